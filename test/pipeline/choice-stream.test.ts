// The daemon's text pipeline for one choice, fed by a scripted generation:
// reasoning split out of <think> blocks, stop strings across tokens (which
// cancel the generation), finish reasons.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { choiceText, type ChoiceDelta, type ChoiceEnd } from "../../src/pipeline/choice-stream.ts";
import { THINK_MARKERS } from "../../src/codec/reasoning-markers.ts";
import { Generation } from "../../src/daemon/worker-client.ts";
import { LlamaModel } from "../../src/engine/model.ts";
import { GREEDY } from "../../src/engine/sampling.ts";
import { fixturePath } from "../support/models.ts";

let tokenizer: LlamaModel;
beforeAll(async () => {
  tokenizer = LlamaModel.load(await fixturePath("tiny-random"), { vocabOnly: true });
});
afterAll(() => tokenizer.free());

/** A generation whose events are pushed by the test, one token per tick. */
function scripted(text: string, reason: "stop" | "length" = "stop") {
  let cancelled = false;
  const g = new Generation(
    "g",
    { type: "generate", id: "g", prompt: [1], sampling: GREEDY, maxTokens: 100, ignoreEos: false },
    () => (cancelled = true),
  );
  const tokens = tokenizer.tokenize(text, { parseSpecial: true });
  g.events.push({ type: "admitted", cachedTokens: 0 });
  for (const t of tokens) g.events.push({ type: "tokens", tokens: [t] });
  // Left open, as a live generation is until the client reads its finish.
  g.events.push({ type: "finished", reason, promptTokens: 1, cachedTokens: 0, completionTokens: tokens.length });
  return { g, tokens, wasCancelled: () => cancelled };
}

async function collect(gen: AsyncGenerator<ChoiceDelta, ChoiceEnd>) {
  let content = "";
  let reasoning = "";
  let step = await gen.next();
  while (!step.done) {
    content += step.value.content;
    reasoning += step.value.reasoning;
    step = await gen.next();
  }
  return { content, reasoning, end: step.value };
}

describe("choice text pipeline", () => {
  test("a <think> block becomes reasoning; the answer is content", async () => {
    const { g } = scripted("<think>\nfirst a plan\n</think>\n\nthe answer");
    const out = await collect(
      choiceText(tokenizer, g, { stops: [], reasoning: { ...THINK_MARKERS, startInside: false } }),
    );
    expect(out).toMatchObject({ reasoning: "first a plan", content: "the answer", end: { finishReason: "stop" } });
  });

  test("a prompt that opened the block: output is reasoning until </think>", async () => {
    const { g } = scripted("thinking here</think>done");
    const out = await collect(
      choiceText(tokenizer, g, { stops: [], reasoning: { ...THINK_MARKERS, startInside: true } }),
    );
    expect(out).toMatchObject({ reasoning: "thinking here", content: "done" });
  });

  test("without a reasoning channel the markers stay in the text", async () => {
    const { g } = scripted("<think>x</think>y");
    const out = await collect(choiceText(tokenizer, g, { stops: [] }));
    expect(out.content).toBe("<think>x</think>y");
  });

  test("a stop string spanning tokens ends the reply before it and cancels the generation", async () => {
    const { g, wasCancelled } = scripted("hello world and more text", "length");
    const out = await collect(choiceText(tokenizer, g, { stops: ["ld an"] }));
    expect(out.content).toBe("hello wor");
    expect(out.end.finishReason).toBe("stop");
    expect(wasCancelled()).toBe(true);
  });

  test("a reply cut by the token cap finishes with length", async () => {
    const { g } = scripted("some words", "length");
    const out = await collect(choiceText(tokenizer, g, { stops: ["zzz"] }));
    expect(out).toMatchObject({ content: "some words", end: { finishReason: "length" } });
  });
});
