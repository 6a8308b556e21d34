// Constrained generation for real: every schema of the corpus is compiled to
// GBNF and enforced by llama.cpp's grammar sampler (through the engine's
// fast-path sampler) on the random-weight fixture, with several seeds. Every
// reply that ends on its own must parse as JSON and validate with ajv.
//
// A random-weight model pads and rambles, so the replies are nudged to end:
// end-of-generation and the string quote get a positive logit bias and
// whitespace a negative one. The bias only shortens replies; validity comes
// from the grammar alone (the bias can never make a banned token legal).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { compileJsonSchema, jsonObjectGrammar } from "../../grammar/index.ts";
import { Engine, type FinishEvent } from "../../src/engine/engine.ts";
import { LlamaModel } from "../../src/engine/model.ts";
import { GREEDY } from "../../src/engine/sampling.ts";
import { fixturePath } from "../support/models.ts";
import { accepted, type Case } from "./corpus/index.ts";

const SEEDS = [1, 2, 3];
const MAX_TOKENS = 300;

let model: LlamaModel;
let engine: Engine;
let prompt: number[];
let bias: Record<number, number>;

beforeAll(async () => {
  model = LlamaModel.load(await fixturePath("tiny-random"));
  engine = new Engine(model, { lanes: 8, cellsPerSequence: 512, threads: 2, prefillBudget: 512 });
  prompt = model.tokenize("<|im_start|>user\nreply in JSON<|im_end|>\n<|im_start|>assistant\n", {
    addSpecial: true,
    parseSpecial: true,
  });
  const single = (text: string) => model.tokenize(text, { parseSpecial: true });
  bias = {};
  for (const t of model.vocabInfo.eog) bias[t] = 8;
  for (const t of single('"')) bias[t] = 3;
  for (const ws of [" ", "\n", "\t", "  "]) for (const t of single(ws)) bias[t] = -4;
});
afterAll(() => {
  engine.close();
  model.free();
});

const ajv2020 = new Ajv2020({ strict: false });
addFormats(ajv2020);
const ajv07 = new Ajv({ strict: false });
addFormats(ajv07);

interface Reply {
  name: string;
  seed: number;
  text: string;
  finish: FinishEvent;
}

/** Runs one job per (grammar, seed) through the engine, eight lanes at a time. */
function generateAll(grammars: { name: string; gbnf: string }[]): Reply[] {
  const text = new Map<string, number[]>();
  const jobs = new Map<string, { name: string; seed: number }>();
  for (const g of grammars) {
    for (const seed of SEEDS) {
      const id = `${g.name}#${seed}`;
      jobs.set(id, { name: g.name, seed });
      text.set(id, []);
      engine.submit({
        id,
        prompt,
        sampling: { ...GREEDY, temperature: 1, topK: 40, seed, logitBias: bias },
        maxTokens: MAX_TOKENS,
        ignoreEos: false,
        grammar: g.gbnf,
      });
    }
  }
  const replies: Reply[] = [];
  while (engine.hasWork()) {
    const events = engine.tick();
    for (const [id, token] of events.tokens) text.get(id)!.push(token);
    for (const f of events.finished) {
      const job = jobs.get(f.id)!;
      const bytes = Buffer.concat(text.get(f.id)!.map((t) => model.tokenBytes(t)));
      replies.push({ ...job, text: bytes.toString("utf8"), finish: f });
    }
  }
  return replies;
}

const strictCases = accepted.filter((c) => c.options?.strict !== false);

describe("constrained generation through llama.cpp's grammar sampler", () => {
  test(`${strictCases.length} corpus schemas x ${SEEDS.length} seeds: every finished reply is valid JSON for its schema`, () => {
    const byName = new Map<string, Case>(strictCases.map((c) => [c.name, c]));
    const replies = generateAll(
      strictCases.map((c) => ({ name: c.name, gbnf: compileJsonSchema(c.schema, c.options).gbnf })),
    );
    expect(replies.length).toBe(strictCases.length * SEEDS.length);
    const errors = replies.filter((r) => r.finish.reason === "error");
    expect(errors.map((r) => `${r.name}: ${r.finish.error}`)).toEqual([]);
    const finished = replies.filter((r) => r.finish.reason === "stop");
    const invalid: string[] = [];
    for (const r of finished) {
      const c = byName.get(r.name)!;
      const validate = (c.draft === "07" ? ajv07 : ajv2020).compile(c.schema as object);
      let value: unknown;
      try {
        value = JSON.parse(r.text);
      } catch {
        invalid.push(`${r.name} seed ${r.seed}: not JSON: ${JSON.stringify(r.text)}`);
        continue;
      }
      if (!validate(value))
        invalid.push(`${r.name} seed ${r.seed}: ${JSON.stringify(r.text)} ${ajv2020.errorsText(validate.errors)}`);
    }
    expect(invalid).toEqual([]);
    // The test must have teeth: most replies end on their own within the cap.
    const schemasWithAReply = new Set(finished.map((r) => r.name)).size;
    console.log(
      `constrained generation: ${finished.length}/${replies.length} replies finished, ${schemasWithAReply}/${strictCases.length} schemas validated`,
    );
    expect(schemasWithAReply).toBeGreaterThanOrEqual(Math.floor(strictCases.length * 0.9));
    // A reply cut by the cap reports length, never stop.
    for (const r of replies.filter((x) => x.finish.reason === "length"))
      expect(r.finish.completionTokens).toBe(MAX_TOKENS);
    // 537 generations: ~25 s on a quiet 2-core machine, several minutes on a busy one.
    // The limit is a hang guard only.
  }, 900_000);

  test("the slow path's prefilter drops nothing the grammar allows: greedy replies equal those of the full mask", () => {
    const cases = strictCases.slice(0, 60);
    const run = () =>
      cases.map((c) => {
        const id = `exact-${c.name}`;
        const gbnf = compileJsonSchema(c.schema, c.options).gbnf;
        engine.submit({
          id,
          prompt,
          sampling: { ...GREEDY, logitBias: bias },
          maxTokens: 60,
          ignoreEos: false,
          grammar: gbnf,
        });
        const out: number[] = [];
        while (engine.hasWork()) for (const [, t] of engine.tick().tokens) out.push(t);
        return out;
      });
    const prefiltered = run();
    const internals = model as unknown as { prefilter?: unknown };
    const saved = internals.prefilter;
    // No keys and no probes: every token goes to the grammar (the plain full mask).
    internals.prefilter = {
      prefixKey: new Int16Array(model.vocabInfo.size).fill(-1),
      probeToken: new Int32Array(256).fill(-1),
    };
    try {
      expect(prefiltered).toEqual(run());
    } finally {
      internals.prefilter = saved;
    }
  });

  test("json_object replies are JSON objects", () => {
    const replies = generateAll([{ name: "json_object", gbnf: jsonObjectGrammar() }]);
    for (const r of replies.filter((x) => x.finish.reason === "stop")) {
      const value = JSON.parse(r.text);
      expect(typeof value).toBe("object");
      expect(Array.isArray(value)).toBe(false);
    }
    expect(replies.some((r) => r.finish.reason === "stop")).toBe(true);
  });

  test("a grammar llama.cpp cannot parse fails that request only", () => {
    engine.submit({ id: "bad", prompt, sampling: GREEDY, maxTokens: 4, ignoreEos: false, grammar: "root ::= missing" });
    engine.submit({ id: "good", prompt, sampling: GREEDY, maxTokens: 4, ignoreEos: true });
    const finished: FinishEvent[] = [];
    while (engine.hasWork()) finished.push(...engine.tick().finished);
    expect(finished.find((f) => f.id === "bad")).toMatchObject({
      reason: "error",
      error: expect.stringContaining("did not compile"),
    });
    expect(finished.find((f) => f.id === "good")).toMatchObject({ reason: "length", completionTokens: 4 });
  });
});
