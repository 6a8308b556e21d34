// Mistral-style calls. Two wires share the `[TOOL_CALLS]` marker:
//   v3 (Mistral 7B v0.3, Nemo, Small):   [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]
//   newer (Magistral, Devstral, ...):    [TOOL_CALLS]f[ARGS]{...}[TOOL_CALLS]g[ARGS]{...}
// (an optional `[CALL_ID]id` between the name and `[ARGS]` is accepted). Text before the
// marker is content. Calls come out whole, once each is complete; a call section that does not
// parse stays content, verbatim. Mistral templates require call ids of exactly 9 alphanumerics.
import { callArray, forcedCallGrammar, jsonObjectCall, lit, seq } from "../tool-grammar.ts";
import { seekMarker } from "../holdback.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect, ToolSpec } from "./types.ts";
import { randomAlnum } from "./ids.ts";
import { jsonValueEnd, skipWs } from "../json-scan.ts";
import { emitCall, emitText } from "./events.ts";
import { argumentsSoFar, cutJsonCallArray, type CutCall } from "./cut-call.ts";

export const MISTRAL_TOOL_CALLS = "[TOOL_CALLS]";
const ARGS = "[ARGS]";
const CALL_ID = "[CALL_ID]";
const MAX_NAME = 256;

/** A random call id of exactly 9 alphanumeric characters, as Mistral templates demand. */
export function mistralCallId(): string {
  return randomAlnum(9);
}

const isNameChar = (c: string): boolean => /[A-Za-z0-9_.:-]/.test(c);

interface ParsedCall {
  name: string;
  args: string;
}

/** Raw text of the top-level `"arguments"` value of a (valid JSON) object text. */
function rawArguments(obj: string): string | undefined {
  let i = skipWs(obj, 0);
  if (obj[i] !== "{") return undefined;
  i = skipWs(obj, i + 1);
  while (obj[i] === '"') {
    const kEnd = jsonValueEnd(obj, i);
    const key = JSON.parse(obj.slice(i, kEnd)) as string;
    i = skipWs(obj, skipWs(obj, kEnd) + 1); // past ':'
    const vEnd = jsonValueEnd(obj, i);
    if (vEnd < 0) return undefined;
    if (key === "arguments") return obj.slice(i, vEnd);
    i = skipWs(obj, vEnd);
    if (obj[i] === ",") i = skipWs(obj, i + 1);
  }
  return undefined;
}

/** Calls in a v3 JSON array text, or undefined when it is not a valid call array. */
function parseCallArray(text: string): ParsedCall[] | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(v) || v.length === 0) return undefined;
  // Raw element texts, to keep the arguments as written.
  const raws: string[] = [];
  let i = skipWs(text, 1);
  while (i < text.length && text[i] !== "]") {
    const e = jsonValueEnd(text, i);
    raws.push(text.slice(i, e));
    i = skipWs(text, e);
    if (text[i] === ",") i = skipWs(text, i + 1);
  }
  const calls: ParsedCall[] = [];
  for (let k = 0; k < v.length; k++) {
    const o = v[k] as Record<string, unknown>;
    if (typeof o !== "object" || o === null || Array.isArray(o) || typeof o.name !== "string") return undefined;
    const a = o.arguments;
    if (typeof a === "string") calls.push({ name: o.name, args: a });
    else if (typeof a === "object" && a !== null && !Array.isArray(a)) {
      calls.push({ name: o.name, args: rawArguments(raws[k] ?? "") ?? JSON.stringify(a) });
    } else return undefined;
  }
  return calls;
}

type Section = { state: "incomplete" } | { state: "invalid" } | { state: "done"; calls: ParsedCall[]; end: number };

/** Read one call section (the text after a `[TOOL_CALLS]` marker). */
function readSection(buf: string): Section {
  const start = skipWs(buf, 0);
  if (start === buf.length) return { state: "incomplete" };
  if (buf[start] === "[") {
    const end = jsonValueEnd(buf, start);
    if (end < 0) return { state: "incomplete" };
    const calls = parseCallArray(buf.slice(start, end));
    return calls ? { state: "done", calls, end } : { state: "invalid" };
  }
  // name[ARGS]{...}, optionally name[CALL_ID]id[ARGS]{...}
  let i = start;
  while (i < buf.length && isNameChar(buf[i]!)) i++;
  if (i - start > MAX_NAME) return { state: "invalid" };
  if (i === buf.length) return { state: "incomplete" };
  const name = buf.slice(start, i);
  if (!name) return { state: "invalid" };
  const afterName = (tag: string): boolean | undefined => {
    const rest = buf.slice(i, i + tag.length);
    if (rest === tag) return true;
    return tag.startsWith(rest) ? undefined : false;
  };
  let m = afterName(CALL_ID);
  if (m === undefined) return { state: "incomplete" };
  if (m) {
    i += CALL_ID.length;
    const idStart = i;
    while (i < buf.length && /[A-Za-z0-9_-]/.test(buf[i]!)) i++;
    if (i - idStart > MAX_NAME) return { state: "invalid" };
    if (i === buf.length) return { state: "incomplete" };
  }
  m = afterName(ARGS);
  if (m === undefined) return { state: "incomplete" };
  if (!m) return { state: "invalid" };
  i = skipWs(buf, i + ARGS.length);
  if (i === buf.length) return { state: "incomplete" };
  if (buf[i] !== "{") return { state: "invalid" };
  const end = jsonValueEnd(buf, i);
  if (end < 0) return { state: "incomplete" };
  const args = buf.slice(i, end);
  try {
    JSON.parse(args);
  } catch {
    return { state: "invalid" };
  }
  return { state: "done", calls: [{ name, args }], end };
}

/** The calls of a section cut off by the end of the reply, as far as they were written. */
function cutSection(buf: string): CutCall[] | undefined {
  const start = skipWs(buf, 0);
  if (buf[start] === "[")
    return cutJsonCallArray(buf.slice(start), ["arguments"], (element) => parseCallArray(`[${element}]`)?.[0]);
  // name[ARGS]{... (an optional [CALL_ID]id before [ARGS])
  const m = /^([A-Za-z0-9_.:-]+)(?:\[CALL_ID\][A-Za-z0-9_-]*)?\[ARGS\]\s*(?=\{)/.exec(buf.slice(start));
  if (!m || m[1]!.length > MAX_NAME) return undefined;
  return [{ name: m[1]!, args: argumentsSoFar(buf.slice(start + m[0].length)) }];
}

export class MistralToolParser implements ToolCallParser {
  private readonly newId: () => string;
  private pending = ""; // outside text not yet emitted
  private section: string | null = null; // text after a marker, while in a call section
  private count = 0;

  constructor(newId?: () => string) {
    this.newId = newId ?? mistralCallId;
  }

  push(text: string): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    if (this.section !== null) this.section += text;
    else this.pending += text;
    this.drain(out, false);
    return out;
  }

  flush(): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    this.drain(out, true);
    return out;
  }

  private drain(out: ToolCallEvent[], final: boolean): void {
    for (;;) {
      if (this.section === null) {
        const found = seekMarker(this.pending, MISTRAL_TOOL_CALLS, final);
        emitText(out, found.before);
        if (found.after === undefined) {
          this.pending = found.held;
          return;
        }
        this.section = found.after;
        this.pending = "";
        continue;
      }
      const buf = this.section;
      const r = readSection(buf);
      if (r.state === "incomplete" && !final) return;
      if (r.state === "done") {
        for (const c of r.calls) emitCall(out, this.count++, this.newId(), c);
        this.section = null;
        this.pending = buf.slice(r.end);
        continue;
      }
      // Call markup is never content: a section cut off by the end of the reply
      // keeps the calls whose arguments began (./cut-call.ts) and drops the
      // rest; after a malformed one the marker is dropped and what follows it
      // is scanned again.
      if (r.state === "incomplete") {
        for (const c of cutSection(buf) ?? []) emitCall(out, this.count++, this.newId(), c);
      }
      this.section = null;
      this.pending = r.state === "incomplete" ? "" : buf;
    }
  }
}

/** GBNF: `[TOOL_CALLS]` and a JSON array of one call (several when `parallel`) to one of `tools`. */
export function mistralToolCallGrammar(tools: ToolSpec[], parallel: boolean): string {
  return forcedCallGrammar(tools, jsonObjectCall(), (call) =>
    seq(lit(MISTRAL_TOOL_CALLS), parallel ? callArray(call) : seq(lit("["), call, lit("]"))),
  );
}

export const mistral: ToolDialect = {
  name: "mistral",
  detect: (template) => template.includes(MISTRAL_TOOL_CALLS),
  parser: (newId) => new MistralToolParser(newId),
  forcedGrammar: (tools, parallel) => mistralToolCallGrammar(tools, parallel),
  trigger: MISTRAL_TOOL_CALLS,
  openers: [MISTRAL_TOOL_CALLS],
};
