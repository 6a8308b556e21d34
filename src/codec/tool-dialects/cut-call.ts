// Calls cut off by the end of the reply (max_tokens): once a call's name is
// written and its arguments object has begun, every wire returns it as a
// partial call, its arguments as far as they were written (the reply's
// finish_reason "length" says they are cut). Cut before that point, the
// markup is dropped: call markup is never content.
import { jsonStringValue, jsonValueEnd, removeTrailingCommas, skipWs } from "../json-scan.ts";

export interface CutCall {
  name: string;
  /** The arguments object's text as far as it was written. */
  args: string;
}

/**
 * An arguments object as far as it was written: whole once it closed (with
 * the trailing-comma repair), else without trailing whitespace or a trailing
 * comma (what a streamed call has sent so far).
 */
export function argumentsSoFar(written: string): string {
  const end = jsonValueEnd(written, 0);
  if (end >= 0) return removeTrailingCommas(written.slice(0, end));
  const region = removeTrailingCommas(written).trimEnd();
  return region.endsWith(",") ? region.slice(0, -1).trimEnd() : region;
}

// `{` "name" : "<name>" , "<key>" : — followed by the arguments object's `{`.
const HEADER = /^\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"([a-z]+)"\s*:\s*(?=\{)/;

/** A `{"name": ..., "<key>": {...` call object cut before it closed, once its arguments began. */
export function cutJsonCall(text: string, keys: readonly string[]): CutCall | undefined {
  const m = HEADER.exec(text);
  if (!m || !keys.includes(m[2]!)) return undefined;
  const name = jsonStringValue(m[1]!);
  if (name === undefined) return undefined;
  return { name, args: argumentsSoFar(text.slice(m[0].length)) };
}

/**
 * A JSON array of call objects cut before it closed: `whole` reads each
 * element that closed (undefined when one is not a call), then the cut last
 * element if it got as far as its arguments. Undefined when no call results.
 */
export function cutJsonCallArray(
  text: string,
  keys: readonly string[],
  whole: (element: string) => CutCall | undefined,
): CutCall[] | undefined {
  let i = skipWs(text, 0);
  if (text[i] !== "[") return undefined;
  i = skipWs(text, i + 1);
  const calls: CutCall[] = [];
  while (i < text.length) {
    const end = jsonValueEnd(text, i);
    if (end < 0) {
      const cut = cutJsonCall(text.slice(i), keys);
      if (cut) calls.push(cut);
      break;
    }
    const call = whole(text.slice(i, end));
    if (!call) return undefined;
    calls.push(call);
    i = skipWs(text, end);
    if (text[i] === ",") i = skipWs(text, i + 1);
  }
  return calls.length ? calls : undefined;
}
