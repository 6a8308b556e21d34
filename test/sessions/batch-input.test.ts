// A batch's input file checked line by line (src/batches/input.ts): every
// problem reported with OpenAI's code, the field and its line from 1.
import { describe, expect, test } from "bun:test";
import { MAX_BODY_DEPTH, MAX_ERRORS, parseBatchInput } from "../../src/batches/input.ts";

const CHAT = "/v1/chat/completions";
const line = (customId: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ custom_id: customId, method: "POST", url: CHAT, body: { model: "m", messages: [] }, ...extra });

describe("batch input files", () => {
  test("valid lines in file order; blank lines are skipped but counted in line numbers", () => {
    const r = parseBatchInput(`${line("a")}\n\n   \n${line("b")}\n`, CHAT);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.lines.map((l) => l.customId)).toEqual(["a", "b"]);
    expect(r.lines[0]!.body).toEqual({ model: "m", messages: [] });

    const bad = parseBatchInput(`${line("a")}\n\n${line("a")}`, CHAT);
    expect(bad.ok ? [] : bad.errors.map((e) => e.line)).toEqual([3]);
  });

  test("each problem's code and field", () => {
    const cases: [string, string, string | null][] = [
      ["[1, 2]", "invalid_json_line", null],
      ["{oops", "invalid_json_line", null],
      [JSON.stringify({ method: "POST", url: CHAT, body: {} }), "missing_required_parameter", "custom_id"],
      [line("", {}), "invalid_custom_id", "custom_id"],
      [JSON.stringify({ custom_id: 7, method: "POST", url: CHAT, body: {} }), "invalid_custom_id", "custom_id"],
      [line("x", { method: "GET" }), "invalid_method", "method"],
      [line("x", { url: "/v1/embeddings" }), "url_mismatch", "url"],
      [line("x", { body: [1] }), "invalid_body", "body"],
      [line("x", { body: null }), "invalid_body", "body"],
    ];
    for (const [text, code, param] of cases) {
      const r = parseBatchInput(text, CHAT);
      expect(r.ok).toBe(false);
      if (r.ok) continue;
      expect([r.errors[0]!.code, r.errors[0]!.param, r.errors[0]!.line]).toEqual([code, param, 1]);
    }
  });

  test(`a body nested deeper than ${MAX_BODY_DEPTH} levels is refused before anything walks it`, () => {
    let deep: unknown = {};
    for (let i = 0; i < MAX_BODY_DEPTH; i++) deep = { a: deep };
    const r = parseBatchInput(line("x", { body: deep }), CHAT);
    expect(r.ok ? null : r.errors[0]!.code).toBe("invalid_body");
    let fits: unknown = {};
    for (let i = 0; i < MAX_BODY_DEPTH - 1; i++) fits = { a: fits };
    expect(parseBatchInput(line("x", { body: fits }), CHAT).ok).toBe(true);
  });

  test("an empty file, and a file of only errors reported up to the cap", () => {
    const empty = parseBatchInput("\n\n", CHAT);
    expect(empty.ok ? null : empty.errors).toEqual([{ code: "empty_file", message: "The batch input file is empty.", param: null, line: null }]);
    const junk = parseBatchInput(Array.from({ length: MAX_ERRORS * 2 }, () => "nope").join("\n"), CHAT);
    expect(junk.ok ? 0 : junk.errors.length).toBe(MAX_ERRORS);
  });
});
