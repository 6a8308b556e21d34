// Fallback dialect for templates that take tools but use no wire we know: the
// reply as a whole is a JSON call `{"name": "f", "arguments": {...}}` (or
// "parameters"), or an array of them, optionally inside a ```json fence.
// Anything else is content. Also holds the JSON helpers the Llama 3 dialect uses.
import { callArray, forcedCallGrammar, jsonObjectCall } from "../tool-grammar.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect } from "./types.ts";
import { newCallId } from "./ids.ts";
import { jsonValueEnd, skipWs } from "../json-scan.ts";
import { emitCall, emitText } from "./events.ts";
import { cutJsonCall, cutJsonCallArray } from "./cut-call.ts";

/** Raw text of the top-level members (object) or elements (array) of valid JSON `text`. */
function topLevelParts(text: string): { key?: string; raw: string }[] {
  const parts: { key?: string; raw: string }[] = [];
  const isObject = text[0] === "{";
  let i = skipWs(text, 1);
  while (i < text.length && text[i] !== "}" && text[i] !== "]") {
    let key: string | undefined;
    if (isObject) {
      const kEnd = jsonValueEnd(text, i);
      key = JSON.parse(text.slice(i, kEnd)) as string;
      i = skipWs(text, kEnd);
      i = skipWs(text, i + 1); // ':'
    }
    const vEnd = jsonValueEnd(text, i);
    parts.push({ ...(key !== undefined ? { key } : {}), raw: text.slice(i, vEnd) });
    i = skipWs(text, vEnd);
    if (text[i] === ",") i = skipWs(text, i + 1);
  }
  return parts;
}

export interface ParsedCall {
  name: string;
  /** The arguments object's JSON text as written. */
  args: string;
}

/** A call from a JSON object's text: {name: string, arguments|parameters: object}; else undefined. */
export function parseJsonCall(text: string): ParsedCall | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  return callFromValue(text.trim(), v);
}

function callFromValue(raw: string, v: unknown): ParsedCall | undefined {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  if (typeof o.name !== "string") return undefined;
  const key = isPlainObject(o.arguments) ? "arguments" : isPlainObject(o.parameters) ? "parameters" : undefined;
  if (!key) return undefined;
  let args: string | undefined;
  for (const p of topLevelParts(raw)) if (p.key === key) args = p.raw; // last wins, like JSON.parse
  return { name: o.name, args: (args ?? JSON.stringify(o[key])).trim() };
}

const isPlainObject = (v: unknown): boolean => typeof v === "object" && v !== null && !Array.isArray(v);

/** Calls from a JSON object or a non-empty array of call objects; undefined unless all are calls. */
function parseJsonCalls(text: string): ParsedCall[] | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  const raw = text.trim();
  if (!Array.isArray(v)) {
    const c = callFromValue(raw, v);
    return c ? [c] : undefined;
  }
  if (v.length === 0) return undefined;
  const parts = topLevelParts(raw);
  const calls: ParsedCall[] = [];
  for (let k = 0; k < v.length; k++) {
    const c = callFromValue(parts[k]!.raw, v[k]);
    if (!c) return undefined;
    calls.push(c);
  }
  return calls;
}

const FENCE = "```";

/**
 * A call object (or array of them) cut off before it closed: call markup, never content (a partial call or dropped).
 */
function isCutCall(s: string): boolean {
  const m = /^\s*(?:```[\w-]*\s*)?(\[?\s*\{\s*(?:"(?:n(?:a(?:m(?:e(?:"[\s\S]*)?)?)?)?)?)?)$/.exec(s);
  return m !== null && jsonValueEnd(s, s.length - m[1]!.length) < 0;
}

const ARGUMENT_KEYS = ["arguments", "parameters"] as const;

/** A call object or array of them (optionally fenced) cut off once its arguments began; see ./cut-call.ts. */
function cutCalls(s: string): ParsedCall[] | undefined {
  const header = /^\s*(?:```[\w-]*[ \t]*\r?\n)?\s*/.exec(s)!;
  const body = s.slice(header[0].length);
  if (body.startsWith("[")) return cutJsonCallArray(body, ARGUMENT_KEYS, (element) => parseJsonCall(element));
  const one = cutJsonCall(body, ARGUMENT_KEYS);
  return one ? [one] : undefined;
}

/** What the whole reply so far is: still undecided ("hold"), content ("text"), or calls (only when `final`). */
function classify(s: string, final: boolean): "hold" | "text" | ParsedCall[] {
  const t = skipWs(s, 0);
  if (t === s.length) return final ? "text" : "hold";
  let body = t;
  let fenced = false;
  if (s.startsWith(FENCE, t) || FENCE.startsWith(s.slice(t))) {
    if (!s.startsWith(FENCE, t)) return final ? "text" : "hold";
    const header = /^```[\w-]*[ \t]*\r?\n/.exec(s.slice(t));
    if (!header) return !final && /^```[\w-]*[ \t]*\r?$/.test(s.slice(t)) ? "hold" : "text";
    fenced = true;
    body = skipWs(s, t + header[0].length);
    if (body === s.length) return final ? "text" : "hold";
  }
  if (s[body] !== "{" && s[body] !== "[") return "text";
  const end = jsonValueEnd(s, body);
  if (end < 0) return final ? "text" : "hold";
  const calls = parseJsonCalls(s.slice(body, end));
  if (!calls) return "text";
  const rest = s.slice(end).trim();
  if (rest && !(fenced && (rest === FENCE || (!final && FENCE.startsWith(rest))))) return "text";
  return final ? calls : "hold";
}

class GenericJsonParser implements ToolCallParser {
  private held = "";
  private isText = false;
  constructor(private readonly newId: () => string) {}

  push(text: string): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    if (this.isText) {
      emitText(out, text);
      return out;
    }
    this.held += text;
    if (classify(this.held, false) === "text") {
      this.isText = true;
      emitText(out, this.held);
      this.held = "";
    }
    return out;
  }

  flush(): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    if (this.isText || !this.held) return out;
    const r = classify(this.held, true);
    const calls = Array.isArray(r) ? r : isCutCall(this.held) ? (cutCalls(this.held) ?? []) : undefined;
    if (calls) calls.forEach((c, i) => emitCall(out, i, this.newId(), c));
    else emitText(out, this.held);
    this.held = "";
    return out;
  }
}

/**
 * GBNF for one JSON call object `{"name": "<f>", "<argsKey>": <f's schema>}` to one of `tools`,
 * with `wrap` building the root from the rule `tc-call` and the whitespace rule `tc-ws`.
 */
export const genericJson: ToolDialect = {
  name: "generic-json",
  detect: (template) => /\btools\b/.test(template),
  parser: (opts) => new GenericJsonParser(opts?.newId ?? newCallId),
  forcedGrammar: (tools, parallel) =>
    forcedCallGrammar(tools, jsonObjectCall(), (call) => (parallel ? callArray(call) : call)),
};
