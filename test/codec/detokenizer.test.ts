// Token ids back to text at token cadence, never splitting a UTF-8 character.
import { beforeAll, describe, expect, test } from "bun:test";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureFixture } from "../../src/fixtures/index.ts";
import { LlamaModel } from "../../src/engine/model.ts";
import { IncrementalDecoder } from "../../src/codec/detokenizer.ts";
import { FakeTokenizer } from "./fake-tokenizer.ts";

let model: LlamaModel;
beforeAll(async () => {
  const path = await ensureFixture("tiny-random", join(tmpdir(), "superfluid-test-fixtures"));
  model = LlamaModel.load(path, { vocabOnly: true });
});

describe("IncrementalDecoder on the fixture tokenizer", () => {
  test("an emoji arriving as four byte-fallback tokens comes out whole, once complete", () => {
    const tokens = model.tokenize("😀", { parseSpecial: false });
    expect(tokens.length).toBe(4); // byte fallback: <0xF0> <0x9F> <0x98> <0x80>
    const decoder = new IncrementalDecoder(model);
    expect(tokens.map((t) => decoder.push([t]))).toEqual(["", "", "", "😀"]);
    expect(decoder.flush()).toBe("");
  });

  test("mixed text one token at a time never emits a partial character", () => {
    const text = "héllo 😀 wörld ✓ done";
    const tokens = model.tokenize(text, { parseSpecial: false });
    const decoder = new IncrementalDecoder(model);
    const pieces = tokens.map((t) => decoder.push([t]));
    pieces.push(decoder.flush());
    for (const p of pieces) expect(p).not.toContain("\uFFFD");
    expect(pieces.join("")).toBe(text);
  });

  test("special tokens come out as their text", () => {
    const tokens = model.tokenize("<think>why</think>\n<tool_call>", { parseSpecial: true });
    expect(tokens).toContain(8);
    const decoder = new IncrementalDecoder(model);
    expect(decoder.push(tokens) + decoder.flush()).toBe("<think>why</think>\n<tool_call>");
  });
});

describe("IncrementalDecoder", () => {
  const fake = new FakeTokenizer();
  const ids = (s: string) => fake.tokenize(s, { parseSpecial: false });

  test("holds an incomplete sequence across pushes of several tokens", () => {
    const [a, b, c, d, e] = ids("x€"); // "x" then the three bytes of €
    const decoder = new IncrementalDecoder(fake);
    expect(decoder.push([a!, b!])).toBe("x");
    expect(decoder.push([c!])).toBe("");
    expect(decoder.push([d!])).toBe("€");
    expect(e).toBeUndefined();
  });

  test("a character that never completes flushes as U+FFFD, and the decoder starts afresh", () => {
    const bytes = ids("é");
    const decoder = new IncrementalDecoder(fake);
    expect(decoder.push([bytes[0]!])).toBe("");
    expect(decoder.flush()).toBe("\uFFFD");
    expect(decoder.push(ids("ok"))).toBe("ok");
  });

  test("a leading U+FEFF is kept, not taken for a byte-order mark", () => {
    const decoder = new IncrementalDecoder(fake);
    expect(decoder.push(ids("\uFEFFhi"))).toBe("\uFEFFhi");
  });

  test("no tokens, no text", () => {
    expect(new IncrementalDecoder(fake).push([])).toBe("");
  });
});
