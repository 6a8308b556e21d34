// A grammar that holds a whole reply, after a prompt that left a reasoning
// block open: the reasoning runs to its closing marker (any text without
// it), then the held answer follows.
import { describe, expect, test } from "bun:test";
import { parseGbnf } from "../../grammar/index.ts";
import { afterReasoning } from "../../src/codec/tool-grammar.ts";
import { recognizes } from "../grammar/recognizer.ts";

describe("afterReasoning", () => {
  const answer = 'root ::= "{" item "}"\nitem ::= [a-z]+ | "{" item "}"\n';
  const g = parseGbnf(afterReasoning(answer, "</think>"));

  test("reasoning, the closing marker, a gap, then the held answer", () => {
    expect(recognizes(g, "I should answer <b>x</b> here.\n</think>\n\n{abc}")).toBe(true);
    expect(recognizes(g, "</think>{{x}}")).toBe(true);
    // The answer is still held, and recursive references to its root still resolve.
    expect(recognizes(g, "ok</think>\n\nabc")).toBe(false);
    expect(recognizes(g, "ok</think>{{x}")).toBe(false);
  });

  test("the reasoning ends at the first closing marker, and must end", () => {
    expect(recognizes(g, "a</think>b</think>{x}")).toBe(false);
    expect(recognizes(g, "{x}")).toBe(false);
  });
});
