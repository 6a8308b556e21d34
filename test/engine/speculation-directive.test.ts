// --speculate as a worker resolves it (src/engine/speculation-directive.ts):
// a model that cannot cut a rejected draft off its KV refuses prompt-lookup
// and decodes plainly under auto; the settings reach the worker intact
// through its command line; the library answers what a model's memory is.
import { describe, expect, test } from "bun:test";
import { LlamaModel } from "../../src/engine/model.ts";
import { SPECULATION_DEFAULTS } from "../../src/engine/speculation.ts";
import {
  cannotCutDraft,
  resolveSpeculation,
  speculationFlags,
  speculationSettings,
  SpeculationRefusedError,
  type ModelMemoryKind,
} from "../../src/engine/speculation-directive.ts";
import { parseWorkerArgs, UsageError } from "../../src/worker/args.ts";
import { fixturePath } from "../support/models.ts";
import { resolveSampling } from "../../src/daemon/sampling-resolve.ts";
import { parseServeOptions, UsageError as ServeUsageError, type ServeOptions } from "../../src/cli/serve-options.ts";

const PLAIN: ModelMemoryKind = { recurrent: false, hybrid: false, slidingWindow: 0 };
const CANNOT_CUT: [string, ModelMemoryKind, RegExp][] = [
  ["recurrent", { ...PLAIN, recurrent: true }, /recurrent state/],
  ["hybrid", { ...PLAIN, hybrid: true }, /hybrid model/],
  ["sliding-window", { ...PLAIN, slidingWindow: 4096 }, /sliding-window attention \(4096 tokens\)/],
];

describe("speculation directive", () => {
  test("no settings: plain decoding, whatever the model", () => {
    expect(resolveSpeculation(undefined, PLAIN)).toEqual({ strategy: "off" });
    expect(resolveSpeculation(undefined, { recurrent: true, hybrid: true, slidingWindow: 1 })).toEqual({
      strategy: "off",
    });
  });

  test("a model that can cut a draft runs prompt-lookup under both directives, with the tuning given", () => {
    for (const directive of ["auto", "prompt-lookup"] as const) {
      const resolved = resolveSpeculation(speculationSettings(directive, { draftTokens: 7 }), PLAIN);
      expect(resolved).toEqual({
        strategy: "prompt-lookup",
        config: { strategy: "prompt-lookup", ...SPECULATION_DEFAULTS, draftTokens: 7 },
      });
    }
    expect(cannotCutDraft(PLAIN)).toBeUndefined();
  });

  test("draft-model resolves to its own strategy (the path stays with the worker), and is refused like prompt-lookup by a model that cannot cut", () => {
    const settings = speculationSettings("draft-model", { draftModel: "/m/draft.gguf" });
    expect(resolveSpeculation(settings, PLAIN)).toEqual({
      strategy: "draft-model",
      config: { strategy: "draft-model", ...SPECULATION_DEFAULTS },
    });
    expect(() => resolveSpeculation(settings, { recurrent: true, hybrid: false, slidingWindow: 0 })).toThrow(
      "--speculate draft-model: this model cannot use it: ",
    );
  });

  test("recurrent, hybrid and sliding-window models refuse prompt-lookup; auto decodes them plainly, saying why", () => {
    for (const [name, kind, why] of CANNOT_CUT) {
      expect(cannotCutDraft(kind), name).toMatch(why);
      let refused: unknown;
      try {
        resolveSpeculation(speculationSettings("prompt-lookup"), kind);
      } catch (err) {
        refused = err;
      }
      expect(refused, name).toBeInstanceOf(SpeculationRefusedError);
      expect((refused as Error).message).toStartWith("--speculate prompt-lookup: this model cannot use it: ");
      expect((refused as Error).message).toMatch(why);
      const auto = resolveSpeculation(speculationSettings("auto"), kind);
      expect(auto.strategy).toBe("off");
      expect(auto.config).toBeUndefined();
      expect(auto.reason).toMatch(why);
      expect(auto.reason).toEndWith("; decoding plainly");
    }
  });

  test("the daemon's worker flags parse back to the same settings; no flags = off", () => {
    const settings = speculationSettings("prompt-lookup", {
      draftTokens: 15,
      minYield: 0,
      throughputGate: false,
      minSpeedup: 1.5,
      reprobe: 0,
      reprobeMax: 4,
    });
    expect(parseWorkerArgs(["--model", "m", ...speculationFlags(settings)]).speculation).toEqual(settings);
    expect(parseWorkerArgs(["--model", "m", "--speculate", "auto"]).speculation).toEqual(speculationSettings("auto"));
    expect(parseWorkerArgs(["--model", "m"]).speculation).toBeUndefined();
    const draft = speculationSettings("draft-model", { draftModel: "/m/draft.gguf" });
    expect(parseWorkerArgs(["--model", "m", ...speculationFlags(draft)]).speculation).toEqual(draft);
    for (const bad of [
      ["--speculate", "off"],
      ["--speculate", "draft-model:"],
      ["--spec-draft-tokens", "16"],
      ["--spec-min-speedup", "0"],
      ["--spec-throughput-gate", "yes"],
      ["--spec-min-yield", "-1"],
    ]) {
      expect(() => parseWorkerArgs(["--model", "m", ...bad])).toThrow(UsageError);
    }
  });

  test("libllama reports a plain transformer fixture as able to cut a draft", async () => {
    const model = LlamaModel.load(await fixturePath("tiny-random"));
    try {
      expect(model.memoryKind()).toEqual(PLAIN);
    } finally {
      model.free();
    }
  });
});

describe("--spec-max-temperature (resolveSampling's model cap)", () => {
  const model = { temperature: 1.2, topK: 20 };
  test("caps a temperature that came from the model's defaults", () => {
    expect(resolveSampling({}, {}, model, 0.5).temperature).toBe(0.5);
    expect(resolveSampling({}, {}, model, 1.5).temperature).toBe(1.2);
    expect(resolveSampling({}, {}, model).temperature).toBe(1.2);
  });
  test("never a caller's or the operator's, nor the built-in 1.0 when the model names none", () => {
    expect(resolveSampling({ temperature: 1.1 }, {}, model, 0.5).temperature).toBe(1.1);
    expect(resolveSampling({}, { temperature: 0.9 }, model, 0.5).temperature).toBe(0.9);
    expect(resolveSampling({}, {}, {}, 0.5).temperature).toBe(1.0);
  });
  test("the flag parses to a number from 0 to 2", () => {
    expect(
      (parseServeOptions(["--spec-max-temperature", "0.7"], { HOME: "/h" }) as ServeOptions).specMaxTemperature,
    ).toBe(0.7);
    expect(() => parseServeOptions(["--spec-max-temperature", "3"], { HOME: "/h" })).toThrow(ServeUsageError);
  });
});
