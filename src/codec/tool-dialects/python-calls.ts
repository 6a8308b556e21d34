// Tool calls written as a Python list of calls with keyword arguments, the
// wire of LFM2 / LFM2.5 (./lfm2.ts): `[get_weather(city="Oslo", days=3), search(q='x')]`.
//
// Reading (PythonCallReader): the list is converted character by character,
// so each call starts once its name and `(` are written and its keyword
// arguments stream out as a JSON object while they are written. Values are
// Python literals: strings in either quote with Python's escapes, numbers
// (underscores, hex/octal/binary, `.5`), True/False/None, lists, tuples
// (as arrays) and dicts with string keys. JSON's true/false/null are read
// too: the LFM2.5 template renders a dict argument with `tojson`, so models
// write them inside dicts (llama.cpp's LFM2 parser accepts both as well).
//
// Writing (pythonCall): the forced grammar of one call, each argument held to
// its parameter's schema. A value is written as the JSON the schema compiles
// to, which is a Python literal as well, except that a value's own
// true/false/null is written True/False/None as the template renders a
// boolean or None argument (`| string`); inside lists and dicts they stay
// JSON (the template's `tojson`), which the reader above accepts.
import { parseGbnf, SchemaError, type Expr, type Rule } from "../../../grammar/index.ts";
import { compiledSchema, lit, ref, repeat, seq, type GrammarOut } from "../tool-grammar.ts";
import { CallWriter, type OpenCall } from "./call-writer.ts";
import { withDefinitions } from "./typed-values.ts";
import type { ToolCallEvent, ToolSpec } from "./types.ts";

// ---------------------------------------------------------------------------
// Reading

/** Characters of a bare word: a function or argument name, a number, True/False/None. */
const WORD = /[\p{L}\p{N}_.+-]/u;
const WS = /\s/;

/** A string value's JSON text for `text` (without the quotes). */
const jsonChars = (text: string): string => JSON.stringify(text).slice(1, -1);

const LITERALS: Record<string, string> = {
  True: "true",
  False: "false",
  None: "null",
  true: "true",
  false: "false",
  null: "null",
};

/** A Python number literal as a JSON number, or undefined when `word` is not one. */
export function pythonNumberJson(word: string): string | undefined {
  const sign = word.startsWith("-") ? "-" : "";
  const digits = /^[+-]/.test(word) ? word.slice(1) : word;
  // Underscores group digits (`1_000`), one at a time, never at either end.
  if (/^_|_$|__/.test(digits)) return undefined;
  const s = digits.replace(/_/g, "");
  if (/^0[xob]/i.test(s)) {
    try {
      return sign + BigInt(s).toString();
    } catch {
      return undefined;
    }
  }
  const m = /^(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(s);
  if (!m || (m[1] === "" && !m[2])) return undefined;
  const int = m[1]!.replace(/^0+(?=\d)/, "") || "0";
  return sign + int + (m[2] ? `.${m[2]}` : "") + (m[3] === undefined ? "" : `e${m[3]}`);
}

const literalJson = (word: string): string | undefined =>
  Object.hasOwn(LITERALS, word) ? LITERALS[word] : pythonNumberJson(word);

/** Single-character escapes Python decodes (a backslash-newline continues the line). */
const ESCAPES: Record<string, string> = {
  n: "\n",
  t: "\t",
  r: "\r",
  b: "\b",
  f: "\f",
  v: "\v",
  a: "\x07",
  "\\": "\\",
  "'": "'",
  '"': '"',
  // Not a Python escape (Python keeps the backslash), but JSON's: the forced
  // grammar writes JSON strings, which may hold it.
  "/": "/",
  "\n": "",
};
/** Hex digits after \x, \u and \U. */
const HEX_DIGITS: Record<string, number> = { x: 2, u: 4, U: 8 };

type Frame =
  /** The list of calls: `[` not yet read, a call's name, its `(`, a comma, the list closed. */
  | { kind: "calls"; expect: "open" | "item" | "paren" | "after" | "closed" }
  /** A call's keyword arguments: a name, its `=`, its value, a comma or `)`. */
  | { kind: "kwargs"; expect: "item" | "eq" | "value" | "after"; count: number; key: string }
  | { kind: "list" | "tuple"; expect: "item" | "after"; count: number }
  | { kind: "dict"; expect: "key" | "colon" | "value" | "after"; count: number };

/**
 * Reads lists of calls (the text between a wire's opening and closing
 * markers, never the markers) into call events. One reader serves a whole
 * reply, so call indexes run on from list to list.
 */
export class PythonCallReader {
  private readonly calls: CallWriter;
  private stack: Frame[] = [];
  private call: OpenCall | null = null;
  /** The open call's arguments JSON converted in this push, not yet sent (one fragment a push). */
  private fresh = "";
  /** The name read before a call's `(`. */
  private name = "";
  /** A string being read: its quote and the escape after its backslash (null outside one). */
  private str: { quote: string; escape: string | null } | null = null;
  /** A bare word being read. */
  private word: string | null = null;
  private failed = false;
  /** Where the current push or finish puts its events. */
  private out: ToolCallEvent[] = [];

  constructor(newId?: () => string) {
    this.calls = new CallWriter(newId);
  }

  /** Calls started so far. */
  get count(): number {
    return this.calls.started;
  }

  /** A new list starts (its opening marker was read). */
  begin(): void {
    this.stack = [{ kind: "calls", expect: "open" }];
    this.str = null;
    this.word = null;
    this.failed = false;
  }

  /** Text of the list; events of the calls it starts, streams and ends go to `out`. */
  push(text: string, out: ToolCallEvent[]): void {
    this.out = out;
    for (const c of text) {
      if (this.failed) break;
      this.step(c);
    }
    this.emitFresh();
  }

  /**
   * The list ended (its closing marker, or the end of the reply). A call
   * still open ends with its arguments as far as they were written: a cut
   * call, or a malformed one (either way not valid JSON, so never run).
   */
  finish(out: ToolCallEvent[]): void {
    this.out = out;
    if (this.call && !this.failed && this.word !== null && this.inValuePosition()) {
      // A number or literal cut at the end is written as far as it converts.
      const value = literalJson(this.word);
      if (value !== undefined) {
        this.beginValue();
        this.emit(value);
      }
    }
    this.word = null;
    this.str = null;
    this.endCall();
    this.stack = [];
  }

  private step(c: string): void {
    if (this.str) return this.stringChar(c);
    if (this.word !== null) {
      if (WORD.test(c)) {
        this.word += c;
        return;
      }
      const word = this.word;
      this.word = null;
      if (!this.endWord(word)) return this.fail();
    }
    if (WS.test(c)) return;
    this.structural(c);
  }

  private top(): Frame {
    return this.stack[this.stack.length - 1]!;
  }

  /** Whether a value may start here. */
  private inValuePosition(): boolean {
    const f = this.top();
    return (
      ((f.kind === "kwargs" || f.kind === "dict") && f.expect === "value") ||
      ((f.kind === "list" || f.kind === "tuple") && f.expect === "item")
    );
  }

  private structural(c: string): void {
    const f = this.top();
    switch (f.kind) {
      case "calls":
        if (f.expect === "open" && c === "[") f.expect = "item";
        else if ((f.expect === "open" || f.expect === "item") && WORD.test(c)) {
          // (A lone call may come without the list's brackets.)
          f.expect = "item";
          this.word = c;
        } else if (f.expect === "paren" && c === "(") this.openCall();
        else if (f.expect === "after" && c === ",") f.expect = "item";
        else if ((f.expect === "item" || f.expect === "after") && c === "]") f.expect = "closed";
        else this.fail();
        return;
      case "kwargs":
        if (f.expect === "item" && WORD.test(c)) this.word = c;
        else if (f.expect === "eq" && c === "=") {
          this.emit(`${f.count > 0 ? "," : ""}${JSON.stringify(f.key)}:`);
          f.expect = "value";
        } else if (f.expect === "after" && c === ",") f.expect = "item";
        else if ((f.expect === "item" || f.expect === "after") && c === ")") this.closeCall();
        else if (f.expect === "value") this.startValue(c);
        else this.fail();
        return;
      case "list":
      case "tuple": {
        const closer = f.kind === "list" ? "]" : ")";
        if (c === closer && (f.expect === "item" || f.expect === "after")) this.closeContainer("]");
        else if (f.expect === "after" && c === ",") f.expect = "item";
        else if (f.expect === "item") this.startValue(c);
        else this.fail();
        return;
      }
      case "dict":
        if (c === "}" && (f.expect === "key" || f.expect === "after")) this.closeContainer("}");
        else if (f.expect === "key" && (c === "'" || c === '"')) {
          // JSON keys are strings, so only string keys are read.
          this.emit(f.count > 0 ? ',"' : '"');
          this.str = { quote: c, escape: null };
        } else if (f.expect === "colon" && c === ":") {
          this.emit(":");
          f.expect = "value";
        } else if (f.expect === "after" && c === ",") f.expect = "key";
        else if (f.expect === "value") this.startValue(c);
        else this.fail();
        return;
    }
  }

  private startValue(c: string): void {
    if (c === "'" || c === '"') {
      this.beginValue();
      this.emit('"');
      this.str = { quote: c, escape: null };
    } else if (c === "[" || c === "(" || c === "{") {
      this.beginValue();
      this.emit(c === "{" ? "{" : "[");
      this.stack.push(
        c === "{"
          ? { kind: "dict", expect: "key", count: 0 }
          : { kind: c === "[" ? "list" : "tuple", expect: "item", count: 0 },
      );
    } else if (WORD.test(c)) this.word = c;
    else this.fail();
  }

  /** The comma before a list item (a dict's or the call's own comma comes with the key). */
  private beginValue(): void {
    const f = this.top();
    if ((f.kind === "list" || f.kind === "tuple") && f.count > 0) this.emit(",");
  }

  /** A value (or a dict key) was completed. */
  private valueDone(): void {
    const f = this.top();
    if (f.kind === "dict" && f.expect === "key") f.expect = "colon";
    else if (f.kind !== "calls") {
      f.expect = "after";
      f.count++;
    }
  }

  private closeContainer(closer: string): void {
    this.stack.pop();
    this.emit(closer);
    this.valueDone();
  }

  /** A finished bare word: what it is depends on where it stands. False when it cannot stand there. */
  private endWord(word: string): boolean {
    const f = this.top();
    if (f.kind === "calls") {
      this.name = word;
      f.expect = "paren";
      return true;
    }
    if (f.kind === "kwargs" && f.expect === "item") {
      f.key = word;
      f.expect = "eq";
      return true;
    }
    const value = literalJson(word);
    if (value === undefined || !this.inValuePosition()) return false;
    this.beginValue();
    this.emit(value);
    this.valueDone();
    return true;
  }

  private stringChar(c: string): void {
    const s = this.str!;
    if (s.escape === null) {
      if (c === "\\") s.escape = "";
      else if (c === s.quote) {
        this.str = null;
        this.emit('"');
        this.valueDone();
      } else this.emit(jsonChars(c));
      return;
    }
    s.escape += c;
    const e = s.escape;
    const kind = e[0]!;
    if (Object.hasOwn(HEX_DIGITS, kind)) {
      if (e.length <= HEX_DIGITS[kind]!) return;
      const hex = e.slice(1);
      const code = /^[0-9a-fA-F]+$/.test(hex) ? Number.parseInt(hex, 16) : Number.NaN;
      if (!(code <= 0x10ffff)) return this.fail();
      s.escape = null;
      // A \u escape may be half of a surrogate pair: JSON writes it as the same escape.
      this.emit(code >= 0xd800 && code <= 0xdfff ? `\\u${hex.toLowerCase()}` : jsonChars(String.fromCodePoint(code)));
      return;
    }
    if (/[0-7]/.test(kind)) {
      // Octal: up to three digits; a character after a shorter run is read on its own.
      const digits = /^[0-7]*/.exec(e)![0];
      if (digits.length === e.length && e.length < 3) return;
      s.escape = null;
      this.emit(jsonChars(String.fromCodePoint(Number.parseInt(digits, 8))));
      if (digits.length < e.length) this.stringChar(c);
      return;
    }
    s.escape = null;
    // An unknown escape keeps its backslash, as in Python.
    this.emit(jsonChars(Object.hasOwn(ESCAPES, c) ? ESCAPES[c]! : `\\${c}`));
  }

  private openCall(): void {
    this.call = this.calls.start(this.name, this.out);
    this.stack.push({ kind: "kwargs", expect: "item", count: 0, key: "" });
    this.emit("{");
  }

  private closeCall(): void {
    this.emit("}");
    this.stack.pop();
    this.top().expect = "after";
    this.endCall();
  }

  private emit(json: string): void {
    if (this.call) this.fresh += json;
  }

  private emitFresh(): void {
    if (this.call) this.calls.send(this.call, this.fresh, this.out);
    this.fresh = "";
  }

  private endCall(): void {
    if (!this.call) return;
    this.emitFresh();
    this.calls.end(this.call, this.out);
    this.call = null;
  }

  /** Something that is not the wire's syntax: the rest of the list is dropped (an open call ends as written). */
  private fail(): void {
    this.failed = true;
    this.endCall();
  }
}

// ---------------------------------------------------------------------------
// Writing

/** Keywords of a tool's parameters schema a keyword-argument list can honour (annotations aside). */
const KWARGS_KEYWORDS = new Set(["type", "properties", "required", "additionalProperties", "$defs", "definitions"]);
const ANNOTATIONS = new Set([
  "title",
  "description",
  "$schema",
  "$id",
  "$comment",
  "examples",
  "default",
  "deprecated",
  "readOnly",
  "writeOnly",
]);
/** How a value's own JSON literals are written in Python. */
const PYTHON_LITERALS: Record<string, string> = { true: "True", false: "False", null: "None" };

/** A JSON pointer segment. */
const segment = (key: string): string => `/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`;

/**
 * The grammar of one call, `NAME(a=…, b=…)` (a CallRule for callsGrammar in
 * ../tool-grammar.ts): the arguments in the schema's order, ", " between
 * them, the required ones always, optional ones when the model chooses.
 * Extra arguments are never written (valid whatever additionalProperties
 * says). Parameters schemas that constrain the object otherwise (anyOf,
 * $ref, minProperties above the required count, ...) are refused with a
 * SchemaError: a keyword-argument list cannot be held to them.
 */
export function pythonCall(tool: ToolSpec, i: number, out: GrammarOut): Expr {
  const root = (typeof tool.parameters === "object" && tool.parameters !== null ? tool.parameters : {}) as Record<
    string,
    unknown
  >;
  const props = (typeof root.properties === "object" && root.properties !== null ? root.properties : {}) as Record<
    string,
    unknown
  >;
  const required = new Set(Array.isArray(root.required) ? (root.required as string[]) : []);
  const names = [...Object.keys(props), ...[...required].filter((r) => !Object.hasOwn(props, r))];
  checkKwargsSchema(root, required.size, names.length);
  const members: { required: boolean; arg: Expr }[] = [];
  names.forEach((name, j) => {
    const isRequired = required.has(name);
    const schema = Object.hasOwn(props, name) ? props[name] : (root.additionalProperties ?? {});
    let value: Expr;
    try {
      if (schema === false)
        throw new SchemaError("required", "", `required argument '${name}' is not allowed`, "unsatisfiable");
      value = pythonValue(withDefinitions(schema, root), `tc${i}-p${j}`, out);
    } catch (err) {
      if (!(err instanceof SchemaError)) throw err;
      // An optional argument no value fits is simply never written.
      if (!isRequired && err.kind === "unsatisfiable") return;
      const at = Object.hasOwn(props, name) ? `/properties${segment(name)}` : "/additionalProperties";
      throw new SchemaError(err.keyword, at + err.path, err.detail, err.kind, err.limit);
    }
    members.push({ required: isRequired, arg: seq(lit(`${name}=`), value) });
  });
  return seq(lit(`${tool.name}(`), argumentList(members, `tc${i}-args`, out.rules), lit(")"));
}

/** Refuses a parameters schema whose constraints a list of named arguments cannot be held to. */
function checkKwargsSchema(root: Record<string, unknown>, requiredCount: number, argumentCount: number): void {
  const types = root.type === undefined ? ["object"] : [root.type].flat();
  if (!types.includes("object"))
    throw new SchemaError("type", "", "a call's arguments are an object, but this schema allows none", "unsatisfiable");
  for (const [keyword, value] of Object.entries(root)) {
    if (KWARGS_KEYWORDS.has(keyword) || ANNOTATIONS.has(keyword)) continue;
    // Bounds that the required arguments, or all of them together, already meet.
    if (keyword === "minProperties" && typeof value === "number" && value <= requiredCount) continue;
    if (keyword === "maxProperties" && typeof value === "number" && value >= argumentCount) continue;
    throw new SchemaError(
      keyword,
      "",
      "this wire writes arguments as Python keyword arguments, which can only be held to properties and required",
    );
  }
}

/**
 * A value held to `schema`: its JSON grammar, with the value's own
 * true/false/null written as Python's; a plain string also in single quotes.
 */
function pythonValue(schema: unknown, prefix: string, out: GrammarOut): Expr {
  const value = compiledSchema(schema, prefix, out);
  const rules = new Map(out.rules.filter((r) => r.name.startsWith(`${prefix}-`)).map((r) => [r.name, r]));
  const root = rules.get(`${prefix}-root`)!;
  root.body = pythonLiterals(root.body, rules, new Set());
  const quoted = singleQuoted(schema, out.rules);
  return quoted ? { kind: "alt", alts: [quoted, value] } : value;
}

/** What a string schema may say for its value to be written in single quotes as well. */
const PLAIN_STRING_KEYWORDS = new Set(["type", "enum", "const", "minLength", "maxLength"]);
/** Length bounds up to this are written as one counted repetition (GBNF counts stop at 2000). */
const MAX_QUOTED_LENGTH = 1000;
/** Escapes a single-quoted Python string needs. */
const QUOTED_ESCAPES: Record<string, string> = { "\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

const pythonQuoted = (value: string): string =>
  `'${[...value].map((c) => QUOTED_ESCAPES[c] ?? (c < " " ? `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}` : c)).join("")}'`;

/**
 * A string in single quotes, as the LFM2.5 template writes one
 * (`city='Oslo'`; Liquid's LFM2 examples use double quotes, which the JSON
 * grammar writes): one of its values, or characters within its length
 * bounds. Undefined when the schema asks more (a pattern, a format, other
 * types): then only the JSON grammar's double-quoted string is written.
 */
function singleQuoted(schema: unknown, rules: Rule[]): Expr | undefined {
  if (typeof schema !== "object" || schema === null) return undefined;
  const s = schema as Record<string, unknown>;
  if (!Object.keys(s).every((k) => PLAIN_STRING_KEYWORDS.has(k) || ANNOTATIONS.has(k))) return undefined;
  if (s.type !== undefined && s.type !== "string") return undefined;
  const values = Array.isArray(s.enum) ? s.enum : "const" in s ? [s.const] : undefined;
  if (values) {
    const plain = !("enum" in s && "const" in s) && s.minLength === undefined && s.maxLength === undefined;
    if (!plain || values.length === 0 || !values.every((v) => typeof v === "string")) return undefined;
    return { kind: "alt", alts: (values as string[]).map((v) => lit(pythonQuoted(v))) };
  }
  if (s.type !== "string") return undefined;
  const min = s.minLength ?? 0;
  const max = s.maxLength ?? null;
  const bounded = (n: unknown) => typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= MAX_QUOTED_LENGTH;
  if (!bounded(min) || (max !== null && (!bounded(max) || (max as number) < (min as number)))) return undefined;
  return seq(lit("'"), repeat(quotedChar(rules), min as number, max as number | null), lit("'"));
}

/**
 * One character of a single-quoted string: anything but the quote, a
 * backslash or a control character, or an escape the reader decodes (\u
 * escapes of surrogates left out, as the JSON grammar leaves them out, so a
 * character is one code point and lengths count as JSON Schema counts).
 */
function quotedChar(rules: Rule[]): Expr {
  if (!rules.some((r) => r.name === QUOTED_CHAR.name)) rules.push(QUOTED_CHAR);
  return ref(QUOTED_CHAR.name);
}

const QUOTED_CHAR: Rule = parseGbnf(String.raw`
py-quoted-char ::= [^'\\\x00-\x1F] | "\\" (["'\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))
`).rules[0]!;

/**
 * `e` with the JSON literals it can be as a whole (through alternatives and
 * the rules they name, inlined where they change) written as Python's. What
 * a value holds (list items, dict values) keeps JSON's spelling.
 */
function pythonLiterals(e: Expr, rules: Map<string, Rule>, seen: Set<string>): Expr {
  switch (e.kind) {
    case "lit":
      return Object.hasOwn(PYTHON_LITERALS, e.value) ? lit(PYTHON_LITERALS[e.value]!) : e;
    case "seq":
      return e.items.length === 1 ? pythonLiterals(e.items[0]!, rules, seen) : e;
    case "alt": {
      const alts = e.alts.map((a) => pythonLiterals(a, rules, seen));
      return alts.every((a, k) => a === e.alts[k]) ? e : { kind: "alt", alts };
    }
    case "ref": {
      const rule = rules.get(e.name);
      if (!rule || seen.has(e.name)) return e;
      const body = pythonLiterals(rule.body, rules, new Set([...seen, e.name]));
      return body === rule.body ? e : body;
    }
    default:
      return e;
  }
}

/**
 * Arguments in order, separated by ", ": each optional one may be left out,
 * so the first one written is any optional argument up to and including the
 * first required one (none at all when none is required), and each later
 * one brings its comma. The tails are rules named `<name>-<j>`, so the
 * grammar grows linearly with the arguments.
 */
function argumentList(members: { required: boolean; arg: Expr }[], name: string, rules: Rule[]): Expr {
  const rest: Expr[] = [];
  rest[members.length] = seq();
  for (let j = members.length - 1; j >= 1; j--) {
    const m = members[j]!;
    const next = seq(lit(", "), m.arg);
    rules.push({ name: `${name}-${j}`, body: seq(m.required ? next : repeat(next, 0, 1), rest[j + 1]!) });
    rest[j] = ref(`${name}-${j}`);
  }
  const firsts: Expr[] = [];
  for (const [j, m] of members.entries()) {
    firsts.push(seq(m.arg, rest[j + 1]!));
    if (m.required) break;
  }
  if (!members.some((m) => m.required)) firsts.push(seq());
  return firsts.length === 1 ? firsts[0]! : { kind: "alt", alts: firsts };
}
