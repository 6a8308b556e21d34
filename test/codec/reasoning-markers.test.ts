// Which markers a model's reasoning is split on: the pair its template names,
// when the vocabulary holds both as single tokens; `<think>` by default.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { detectReasoningMarkers } from "../../src/codec/reasoning-markers.ts";

const all = () => true;
const only =
  (...tokens: string[]) =>
  (s: string) =>
    tokens.includes(s);

describe("reasoning markers", () => {
  test("the template's own pair wins when the vocabulary has it", () => {
    expect(detectReasoningMarkers("{{ '[THINK]' }}", all)).toEqual({ open: "[THINK]", close: "[/THINK]" });
    expect(detectReasoningMarkers("{{ '<seed:think>' }}", all)).toEqual({
      open: "<seed:think>",
      close: "</seed:think>",
    });
  });

  test("a pair that is not two single tokens is not used; <think> is the default", () => {
    expect(detectReasoningMarkers("{{ '[THINK]' }}", only("<think>", "</think>"))).toEqual({
      open: "<think>",
      close: "</think>",
    });
    expect(detectReasoningMarkers("{{ '[THINK]' }}", only("[THINK]"))).toBeUndefined();
    expect(detectReasoningMarkers("plain", () => false)).toBeUndefined();
  });

  const TEMPLATES = join(import.meta.dir, "../../../shared/templates");
  test.skipIf(!existsSync(TEMPLATES))("the real templates' pairs", () => {
    const opens = (f: string) => detectReasoningMarkers(readFileSync(join(TEMPLATES, f), "utf8"), all)?.open;
    expect(opens("ByteDance-Seed-OSS.jinja")).toBe("<seed:think>");
    expect(opens("MiniMax-M3.jinja")).toBe("<mm:think>");
    expect(opens("mistralai-Ministral-3-14B-Reasoning-2512.jinja")).toBe("[THINK]");
    expect(opens("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja")).toBe("<|START_THINKING|>");
    expect(opens("Qwen3.5-4B.jinja")).toBe("<think>");
    expect(opens("google-gemma-4-31B-it.jinja")).toBe("<|channel>thought");
  });
});
