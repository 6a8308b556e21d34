// A batch's input file (docs/api/batches.md#input-file): JSONL, one request
// a line, `{"custom_id", "method", "url", "body"}`. Checked line by line
// with every problem reported as OpenAI reports it (a code, a message, the
// field and the line, counted from 1), so a client fixes its file in one go.
// The same parse gives the runner its lines, so a line runs exactly as it
// was validated.
import type { BatchError } from "./batch.ts";

/** One request of the file, in file order. */
export interface BatchLine {
  customId: string;
  body: Record<string, unknown>;
}

export type InputCheck = { ok: true; lines: BatchLine[] } | { ok: false; errors: BatchError[] };

/** OpenAI's limit on requests in one batch. */
export const MAX_LINES = 50_000;
/** Errors reported for one file; past this the rest are left out (the file is refused either way). */
export const MAX_ERRORS = 100;
/**
 * Deepest nesting of a line's body: the HTTP reader holds request bodies to
 * the same bound, since the chat pipeline walks bodies recursively.
 */
export const MAX_BODY_DEPTH = 256;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Whether a parsed value nests deeper than `limit` arrays and objects (iterative: a deep value cannot exhaust the stack here). */
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
function lineProblem(value: unknown, endpoint: string, seen: Set<string>): Omit<BatchError, "line"> | undefined {
  if (!isObject(value)) return { code: "invalid_json_line", message: "This line is not a JSON object.", param: null };
  const { custom_id, method, url, body } = value;
  if (custom_id === undefined || custom_id === null) return { code: "missing_required_parameter", message: "Missing required parameter: 'custom_id'.", param: "custom_id" };
  if (typeof custom_id !== "string" || custom_id === "") return { code: "invalid_custom_id", message: "custom_id must be a non-empty string.", param: "custom_id" };
  if (seen.has(custom_id)) {
    return {
      code: "duplicate_custom_id",
      message: `The custom_id '${custom_id}' is a duplicate of another request's: custom_id must be unique for each request in a batch.`,
      param: "custom_id",
    };
  }
  if (method !== "POST") return { code: "invalid_method", message: `method must be 'POST', not ${JSON.stringify(method ?? null)}.`, param: "method" };
  if (url !== endpoint) {
    return { code: "url_mismatch", message: `The url ${JSON.stringify(url ?? null)} does not match the batch's endpoint '${endpoint}'.`, param: "url" };
  }
  if (!isObject(body)) return { code: "invalid_body", message: "body must be a JSON object (the request's body).", param: "body" };
  if (nestsDeeperThan(body, MAX_BODY_DEPTH)) return { code: "invalid_body", message: `body is nested deeper than ${MAX_BODY_DEPTH} levels.`, param: "body" };
  return undefined;
}

/**
 * Checks a whole input file against the batch's endpoint. Blank lines are
 * skipped (a trailing newline is common), but line numbers count them.
 */
export function parseBatchInput(text: string, endpoint: string): InputCheck {
  const lines: BatchLine[] = [];
  const errors: BatchError[] = [];
  const seen = new Set<string>();
  let requests = 0;
  const raw = text.split("\n");
  for (let i = 0; i < raw.length && errors.length < MAX_ERRORS; i++) {
    const source = raw[i]!.trim();
    if (source === "") continue;
    requests++;
    let value: unknown;
    try {
      value = JSON.parse(source);
    } catch {
      errors.push({ code: "invalid_json_line", message: "This line is not parseable as valid JSON.", param: null, line: i + 1 });
      continue;
    }
    const problem = lineProblem(value, endpoint, seen);
    if (problem) {
      errors.push({ ...problem, line: i + 1 });
      continue;
    }
    const { custom_id, body } = value as { custom_id: string; body: Record<string, unknown> };
    seen.add(custom_id);
    lines.push({ customId: custom_id, body });
  }
  if (errors.length === 0 && requests === 0) errors.push({ code: "empty_file", message: "The batch input file is empty.", param: null, line: null });
  if (errors.length === 0 && requests > MAX_LINES) {
    errors.push({ code: "too_many_tasks", message: `The batch has ${requests} requests; at most ${MAX_LINES} are accepted.`, param: null, line: null });
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, lines };
}
