// A batch's input file (docs/api/batches.md#input-file): JSONL, one request
// a line, `{"custom_id", "method", "url", "body"}`. Checked line by line
// with every problem reported as OpenAI reports it (a code, a message, the
// field and the line, counted from 1), so a client fixes its file in one go.
// The check streams the file (lines.ts) and keeps no line; a run streams it
// again and parses each line as it comes to it. The file read is the batch's
// own copy, which nothing changes, so a line runs exactly as it was checked.
import { createHash } from "node:crypto";
import type { BatchError } from "./batch.ts";
import { fileLines } from "./lines.ts";

/** One request of the file: its index among the requests (blank lines do not count), in file order. */
export interface BatchLine {
  i: number;
  customId: string;
  body: Record<string, unknown>;
}

export type InputCheck = { ok: true; total: number } | { ok: false; errors: BatchError[] };

/** OpenAI's limit on requests in one batch. */
export const MAX_LINES = 50_000;
/** Errors reported for one file; past this the rest are left out (the file is refused either way). */
export const MAX_ERRORS = 100;
/**
 * Deepest nesting of a line's body: the HTTP reader holds request bodies to
 * the same bound, since the chat pipeline walks bodies recursively.
 */
export const MAX_BODY_DEPTH = 256;
/** Longest line: the HTTP reader's bound on a request body (100 MiB), so one line is never held past it. */
export const MAX_LINE_BYTES = 100 * 1024 * 1024;
/**
 * custom_ids up to this length are remembered as they are; longer ones by a digest, so the check's memory stays small.
 */
const SHORT_ID = 64;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Whether a parsed value nests deeper than `limit` arrays and objects (iterative: a deep value cannot exhaust the stack
 * here).
 */
function nestsDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== "object" || v === null) continue;
    if (depth > limit) return true;
    for (const item of Array.isArray(v) ? v : Object.values(v)) stack.push([item, depth + 1]);
  }
  return false;
}

/** The first problem with one parsed line, or undefined. */
function lineProblem(value: unknown, endpoint: string, seen: SeenIds): Omit<BatchError, "line"> | undefined {
  if (!isObject(value)) return { code: "invalid_json_line", message: "This line is not a JSON object.", param: null };
  const { custom_id, method, url, body } = value;
  if (custom_id === undefined || custom_id === null)
    return {
      code: "missing_required_parameter",
      message: "Missing required parameter: 'custom_id'.",
      param: "custom_id",
    };
  if (typeof custom_id !== "string" || custom_id === "")
    return { code: "invalid_custom_id", message: "custom_id must be a non-empty string.", param: "custom_id" };
  if (seen.has(custom_id)) {
    return {
      code: "duplicate_custom_id",
      message: `The custom_id '${custom_id}' is a duplicate of another request's: custom_id must be unique for each request in a batch.`,
      param: "custom_id",
    };
  }
  if (method !== "POST")
    return {
      code: "invalid_method",
      message: `method must be 'POST', not ${JSON.stringify(method ?? null)}.`,
      param: "method",
    };
  if (url !== endpoint) {
    return {
      code: "url_mismatch",
      message: `The url ${JSON.stringify(url ?? null)} does not match the batch's endpoint '${endpoint}'.`,
      param: "url",
    };
  }
  if (!isObject(body))
    return { code: "invalid_body", message: "body must be a JSON object (the request's body).", param: "body" };
  if (nestsDeeperThan(body, MAX_BODY_DEPTH))
    return { code: "invalid_body", message: `body is nested deeper than ${MAX_BODY_DEPTH} levels.`, param: "body" };
  return undefined;
}

/** The custom_ids seen so far. */
class SeenIds {
  private readonly short = new Set<string>();
  private readonly long = new Set<string>();

  private digest(id: string): string {
    return createHash("sha256").update(id).digest("base64");
  }

  has(id: string): boolean {
    return id.length <= SHORT_ID ? this.short.has(id) : this.long.has(this.digest(id));
  }

  add(id: string): void {
    if (id.length <= SHORT_ID) this.short.add(id);
    else this.long.add(this.digest(id));
  }
}

/** The first problem with one line as read (undefined: over MAX_LINE_BYTES); a good line's custom_id is remembered. */
function textProblem(text: string | undefined, endpoint: string, seen: SeenIds): Omit<BatchError, "line"> | undefined {
  if (text === undefined)
    return {
      code: "invalid_json_line",
      message: `This line is longer than ${MAX_LINE_BYTES} bytes (100 MiB).`,
      param: null,
    };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { code: "invalid_json_line", message: "This line is not parseable as valid JSON.", param: null };
  }
  const problem = lineProblem(value, endpoint, seen);
  if (!problem) seen.add((value as { custom_id: string }).custom_id);
  return problem;
}

const isBlank = (text: string) => text.trim() === "";

/**
 * Checks the input file at `path` against the batch's endpoint. Blank lines
 * are skipped (a trailing newline is common), but line numbers count them.
 * The check stops at the first request past MAX_LINES, or at MAX_ERRORS.
 */
export async function checkInputFile(path: string, endpoint: string): Promise<InputCheck> {
  const errors: BatchError[] = [];
  const seen = new SeenIds();
  let requests = 0;
  for await (const { number, text } of fileLines(path, MAX_LINE_BYTES)) {
    if (text !== undefined && isBlank(text)) continue;
    if (++requests > MAX_LINES) {
      errors.push({
        code: "too_many_tasks",
        message: `The batch has more than ${MAX_LINES} requests; at most ${MAX_LINES} are accepted.`,
        param: null,
        line: null,
      });
      break;
    }
    const problem = textProblem(text, endpoint, seen);
    if (problem) errors.push({ ...problem, line: number });
    if (errors.length >= MAX_ERRORS) break;
  }
  if (errors.length === 0 && requests === 0)
    errors.push({ code: "empty_file", message: "The batch input file is empty.", param: null, line: null });
  return errors.length > 0 ? { ok: false, errors } : { ok: true, total: requests };
}

/**
 * The requests of a checked input file, in file order, each parsed when it is
 * reached; those `skip` names (by index) are passed over without parsing.
 */
export async function* batchLines(path: string, skip: (i: number) => boolean = () => false): AsyncGenerator<BatchLine> {
  let i = -1;
  for await (const { text } of fileLines(path, MAX_LINE_BYTES)) {
    // A line over the limit never passed the check; undefined here means the file changed under us.
    if (text === undefined) throw new Error("a batch input line is longer than the limit it was checked against");
    if (isBlank(text)) continue;
    i++;
    if (skip(i)) continue;
    const { custom_id, body } = JSON.parse(text) as { custom_id: string; body: Record<string, unknown> };
    yield { i, customId: custom_id, body };
  }
}
