// Reasoning vs content, streaming-safe.
import { describe, expect, test } from "bun:test";
import { ReasoningSplitter, splitReasoning, type ReasoningOptions, type SplitText } from "../../src/codec/reasoning.ts";

const THINK: ReasoningOptions = { open: "<think>", close: "</think>", startInside: false };

function stream(opts: ReasoningOptions, chunks: string[]): SplitText {
  const s = new ReasoningSplitter(opts);
  const out: SplitText = { content: "", reasoning: "" };
  for (const c of chunks) {
    const r = s.push(c);
    out.content += r.content;
    out.reasoning += r.reasoning;
  }
  const r = s.flush();
  return { content: out.content + r.content, reasoning: out.reasoning + r.reasoning };
}

/** Every way to cut `text` into two or three chunks, plus one character at a time. */
function chunkings(text: string): string[][] {
  const all: string[][] = [Array.from(text)];
  for (let i = 0; i <= text.length; i++) {
    for (let j = i; j <= text.length; j++) all.push([text.slice(0, i), text.slice(i, j), text.slice(j)]);
  }
  return all;
}

describe("splitReasoning", () => {
  test("Qwen3-style output: padding around the reasoning and after </think> is dropped", () => {
    expect(splitReasoning("<think>\nLet me see.\n</think>\n\nThe answer is 4.", THINK)).toEqual({
      reasoning: "Let me see.",
      content: "The answer is 4.",
    });
  });

  test("starting inside a block the prompt opened", () => {
    expect(splitReasoning("hmm, 2+2\n</think>\n\n4", { ...THINK, startInside: true })).toEqual({
      reasoning: "hmm, 2+2",
      content: "4",
    });
  });

  test("no markers: all content, or all reasoning when started inside and never closed", () => {
    expect(splitReasoning("just text", THINK)).toEqual({ content: "just text", reasoning: "" });
    expect(splitReasoning("\nthinking...\n", { ...THINK, startInside: true })).toEqual({
      content: "",
      reasoning: "thinking...",
    });
  });

  test("an empty block leaves nothing behind", () => {
    expect(splitReasoning("<think>\n\n</think>\n\nHi", THINK)).toEqual({ content: "Hi", reasoning: "" });
  });

  test("whitespace inside reasoning and content is kept", () => {
    expect(splitReasoning("<think>a\n\nb</think>x\n\ny\n", THINK)).toEqual({
      reasoning: "a\n\nb",
      content: "x\n\ny\n",
    });
  });

  test("a later block adds to the reasoning; a stray close marker is dropped", () => {
    expect(splitReasoning("<think>one</think>A<think>two</think>B", THINK)).toEqual({
      reasoning: "onetwo",
      content: "AB",
    });
    expect(splitReasoning("before</think>\n after", THINK)).toEqual({ reasoning: "", content: "beforeafter" });
  });

  test("a partial marker at the end is text after all", () => {
    expect(splitReasoning("answer <thi", THINK)).toEqual({ content: "answer <thi", reasoning: "" });
    expect(splitReasoning("<think>deep </thin", THINK)).toEqual({ content: "", reasoning: "deep </thin" });
  });

  test("other markers", () => {
    const opts = { open: "<|channel|>analysis<|message|>", close: "<|end|>", startInside: false };
    expect(splitReasoning("<|channel|>analysis<|message|>why<|end|>because", opts)).toEqual({
      reasoning: "why",
      content: "because",
    });
  });

  test("empty markers are refused", () => {
    expect(() => new ReasoningSplitter({ open: "", close: "</think>", startInside: false })).toThrow();
  });
});

describe("ReasoningSplitter streaming", () => {
  const cases: [string, ReasoningOptions][] = [
    ["<think>\nLet me see.\n</think>\n\nThe answer is 4.", THINK],
    ["pre<think> a </think> post <thi", THINK],
    ["x</think>\n\ny", { ...THINK, startInside: true }],
    ["<<think>><</think>>", THINK],
  ];

  for (const [text, opts] of cases) {
    test(`markers split at every position give the same split: ${JSON.stringify(text)}`, () => {
      const whole = splitReasoning(text, opts);
      for (const chunks of chunkings(text)) expect(stream(opts, chunks)).toEqual(whole);
    });
  }

  test("the split of the nested-looking case", () => {
    expect(splitReasoning("<<think>><</think>>", THINK)).toEqual({ content: "<>", reasoning: "><" });
  });

  test("text is released as soon as it cannot be a marker", () => {
    const s = new ReasoningSplitter(THINK);
    expect(s.push("Hello <")).toEqual({ content: "Hello ", reasoning: "" });
    expect(s.push("b>")).toEqual({ content: "<b>", reasoning: "" });
    expect(s.push("<think>\nhmm")).toEqual({ content: "", reasoning: "hmm" });
    expect(s.inReasoning).toBe(true);
    // Trailing whitespace waits: it may be the padding before </think>.
    expect(s.push(" ok\n")).toEqual({ content: "", reasoning: " ok" });
    expect(s.push("more")).toEqual({ content: "", reasoning: "\nmore" });
    expect(s.push("\n</think>\n")).toEqual({ content: "", reasoning: "" });
    expect(s.inReasoning).toBe(false);
    expect(s.push("\nAnswer")).toEqual({ content: "Answer", reasoning: "" });
    expect(s.flush()).toEqual({ content: "", reasoning: "" });
  });
});
