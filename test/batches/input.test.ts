// A batch's input file checked line by line (src/batches/input.ts): every
// problem reported with OpenAI's code, the field and its line from 1; the
// file streamed from disk by lines.ts, and streamed again to run it.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  batchLines,
  checkInputFile,
  MAX_BODY_DEPTH,
  MAX_ERRORS,
  MAX_LINES,
  type InputCheck,
} from "../../src/batches/input.ts";
import { fileLines } from "../../src/batches/lines.ts";

const CHAT = "/v1/chat/completions";
const line = (customId: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ custom_id: customId, method: "POST", url: CHAT, body: { model: "m", messages: [] }, ...extra });

const dir = mkdtempSync(join(tmpdir(), "superfluid-batch-input-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** Writes `text` to a file of its own and returns its path. */
function written(text: string | Buffer): string {
  const path = join(dir, `in-${++files}.jsonl`);
  writeFileSync(path, text);
  return path;
}

const check = (text: string): Promise<InputCheck> => checkInputFile(written(text), CHAT);

async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe("batch input files", () => {
  test("valid lines in file order; blank lines are skipped but counted in line numbers", async () => {
    const path = written(`${line("a")}\n\n   \n${line("b")}\n`);
    expect(await checkInputFile(path, CHAT)).toEqual({ ok: true, total: 2 });
    const lines = await all(batchLines(path));
    expect(lines.map((l) => [l.i, l.customId])).toEqual([
      [0, "a"],
      [1, "b"],
    ]);
    expect(lines[0]!.body).toEqual({ model: "m", messages: [] });
    // A run resumed after line a skips it by its index.
    expect((await all(batchLines(path, (i) => i === 0))).map((l) => l.customId)).toEqual(["b"]);

    const bad = await check(`${line("a")}\n\n${line("a")}`);
    expect(bad.ok ? [] : bad.errors.map((e) => e.line)).toEqual([3]);
  });

  test("each problem's code and field", async () => {
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
      const r = await check(text);
      expect(r.ok).toBe(false);
      if (r.ok) continue;
      expect([r.errors[0]!.code, r.errors[0]!.param, r.errors[0]!.line]).toEqual([code, param, 1]);
    }
  });

  test("long custom_ids are told apart and their duplicates found (they are remembered by digest)", async () => {
    const long = (c: string) => c.repeat(500);
    expect(await check([line(long("a")), line(long("b"))].join("\n"))).toEqual({ ok: true, total: 2 });
    const dup = await check([line(long("a")), line(long("b")), line(long("a"))].join("\n"));
    expect(dup.ok ? null : dup.errors.map((e) => [e.code, e.line])).toEqual([["duplicate_custom_id", 3]]);
  });

  test(`a body nested deeper than ${MAX_BODY_DEPTH} levels is refused before anything walks it`, async () => {
    let deep: unknown = {};
    for (let i = 0; i < MAX_BODY_DEPTH; i++) deep = { a: deep };
    const r = await check(line("x", { body: deep }));
    expect(r.ok ? null : r.errors[0]!.code).toBe("invalid_body");
    let fits: unknown = {};
    for (let i = 0; i < MAX_BODY_DEPTH - 1; i++) fits = { a: fits };
    expect((await check(line("x", { body: fits }))).ok).toBe(true);
  });

  test("an empty file, and a file of only errors reported up to the cap", async () => {
    const empty = await check("\n\n");
    expect(empty.ok ? null : empty.errors).toEqual([
      { code: "empty_file", message: "The batch input file is empty.", param: null, line: null },
    ]);
    const junk = await check(Array.from({ length: MAX_ERRORS * 2 }, () => "nope").join("\n"));
    expect(junk.ok ? 0 : junk.errors.length).toBe(MAX_ERRORS);
  });

  test(`past ${MAX_LINES} requests the check stops with too_many_tasks, after the problems found before`, async () => {
    const lines = Array.from({ length: MAX_LINES + 1 }, (_, i) => line(`r${i}`));
    expect(await check(lines.slice(0, MAX_LINES).join("\n"))).toEqual({ ok: true, total: MAX_LINES });
    lines[1] = "nope";
    const r = await check(lines.join("\n"));
    expect(r.ok ? null : r.errors.map((e) => [e.code, e.line])).toEqual([
      ["invalid_json_line", 2],
      ["too_many_tasks", null],
    ]);
  });

  test("lines longer than a read chunk, characters split across chunks, and a last line without a newline come back whole", async () => {
    // 1 MiB chunks: a line of 3 MiB of multi-byte characters spans four of them, at odd offsets.
    const big = `${"é".repeat(1_500_000)}x`;
    const path = written(`a\n${big}\n\nz`);
    expect(await all(fileLines(path, Infinity))).toEqual([
      { number: 1, text: "a" },
      { number: 2, text: big },
      { number: 3, text: "" },
      { number: 4, text: "z" },
    ]);
  });

  test("a line over the reader's limit comes back without its text, and the lines after it are read as usual", async () => {
    const path = written(`short\n${"y".repeat(3_000_000)}\nafter\n${"w".repeat(11)}`);
    expect(await all(fileLines(path, 10))).toEqual([
      { number: 1, text: "short" },
      { number: 2, text: undefined },
      { number: 3, text: "after" },
      { number: 4, text: undefined },
    ]);
  });
});
