// MiniMax M3's call wire. Every tag carries the namespace token NS =
// `]<]minimax[>[`; one block holds one `invoke` per call, and each argument
// is an element named after its parameter, its value raw text (the template's
// `to_xml` macro: a string as it is, a boolean as JSON `true`/`false`, a
// number as printed, None left out), a nested object as one element per key,
// an array as repeated `item` elements:
//
//   NS<tool_call>\n
//   NS<invoke name="get_weather">NS<city>OsloNS</city>NS<days>3NS</days>NS<opts>NS<hourly>trueNS</hourly>NS</opts>NS</invoke>\n
//   NS<invoke name="search">NS<tags>NS<item>aNS</item>NS<item>bNS</item>NS</tags>NS</invoke>\n
//   NS</tool_call>
//
// Unlike the flat XML wires (./xml-calls.ts) a value's closing tag depends on
// its parameter's name and values nest, so this wire has its own parser and
// grammar. Scalars are typed by the tool's schema (./typed-values.ts), walked
// down through `properties` and `items` for nested values.
import { alt, cls, lit, opt, plus, repeat, seq, type Expr } from "../../../grammar/gbnf/ast.ts";
import { SchemaError } from "../../../grammar/index.ts";
import { partialSuffixLength, seekMarker } from "../holdback.ts";
import { callsGrammar, compiledSchema, textWithout, type GrammarOut, type ToolSpec } from "../tool-grammar.ts";
import { CallWriter, type OpenCall } from "./call-writer.ts";
import { ContentGap } from "./events.ts";
import { isStringOnly, rawValueJson, schemaTypes, withDefinitions } from "./typed-values.ts";
import type { ParserOptions, ToolCallEvent, ToolCallParser, ToolDialect } from "./types.ts";

/** The namespace token before every tag of the wire (a special token in M3's vocabulary). */
export const MINIMAX_NS = "]<]minimax[>[";
const NS = MINIMAX_NS;
const BLOCK_OPEN = `${NS}<tool_call>`;
const BLOCK_CLOSE = `${NS}</tool_call>`;
const INVOKE_OPEN = `${NS}<invoke name="`;
const INVOKE_CLOSE = `${NS}</invoke>`;
const openTag = (name: string) => `${NS}<${name}>`;
const closeTag = (name: string) => `${NS}</${name}>`;
/** Longest tag name (or tool name) read before the markup counts as broken. */
const MAX_NAME = 256;
/** A name the parser can read back from a tag. */
const TAG_NAME = /^[^<>"\n]{1,256}$/;

// --- The tool's schema, walked along the nesting ------------------------

type Schema = Record<string, unknown>;

const asSchema = (s: unknown): Schema | undefined =>
  typeof s === "object" && s !== null && !Array.isArray(s) ? (s as Schema) : undefined;

/** The definition a local `$ref` (`#/$defs/…`, `#/definitions/…`) names, among those beside it. */
function localDefinition(s: Schema, ref: string): unknown {
  const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref);
  const defs = m && asSchema(s[m[1]!]);
  if (!defs) return undefined;
  const key = m[2]!.replace(/~1/g, "/").replace(/~0/g, "~");
  return Object.hasOwn(defs, key) ? defs[key] : undefined;
}

/** `schema` with local `$ref`s followed (a bounded number of hops: a cycle stops). */
function dereferenced(schema: unknown): unknown {
  let s = schema;
  for (let hops = 0; hops < 16; hops++) {
    const o = asSchema(s);
    const target = o && typeof o.$ref === "string" ? localDefinition(o, o.$ref) : undefined;
    if (target === undefined) return s;
    s = withDefinitions(target, o!);
  }
  return s;
}

/** The branch of a union that can be of `type` (the schema itself when it is no union). */
function branchOf(schema: unknown, type: "object" | "array"): Schema | undefined {
  const s = asSchema(dereferenced(schema));
  const branches = s?.anyOf ?? s?.oneOf;
  if (!s || !Array.isArray(branches)) return s;
  for (const b of branches) {
    const branch = dereferenced(withDefinitions(b, s));
    if (schemaTypes(branch).has(type)) return asSchema(branch);
  }
  return undefined;
}

/** The schema of member `key` of an object value (undefined when not declared). */
function memberSchema(object: unknown, key: string): unknown {
  const s = branchOf(object, "object");
  const props = asSchema(s?.properties);
  return props && Object.hasOwn(props, key) ? withDefinitions(props[key], s!) : undefined;
}

/** The schema of an array value's items (undefined when not declared). */
function itemSchema(array: unknown): unknown {
  const s = branchOf(array, "array");
  const items = asSchema(s?.items);
  return items ? withDefinitions(items, s!) : undefined;
}

/**
 * Whether nested elements make an object or an array: the schema says when
 * it admits one of them only; otherwise `item` elements make an array (the
 * template writes array entries so, and keys as themselves).
 */
function containerKind(schema: unknown, firstChild: string): "object" | "array" {
  const types = schemaTypes(dereferenced(schema));
  if (types.has("object") !== types.has("array")) return types.has("object") ? "object" : "array";
  return firstChild === "item" ? "array" : "object";
}

/**
 * A scalar's raw text as JSON. An element with nothing in it is how the
 * template writes an empty string, object or array (to_xml renders nothing
 * for each): the schema says which.
 */
function scalarJson(raw: string, schema: unknown): string {
  const s = dereferenced(schema);
  if (raw.trim() !== "") return rawValueJson(raw, s);
  const types = schemaTypes(s);
  if (!types.has("string") && types.has("object")) return "{}";
  if (!types.has("string") && types.has("array")) return "[]";
  return JSON.stringify(raw);
}

// --- The parser ---------------------------------------------------------

type State =
  | "outside" // content, looking for a block
  | "block" // inside a block, between calls
  | "name" // reading an invoke's name
  | "members" // inside an object or array (the call's arguments at the bottom), between elements
  | "value" // an element just opened: nested elements or a scalar follow
  | "scalar" // reading a scalar value up to its closing tag
  | "skip"; // a malformed block: dropped up to its closing tag

/** An object or array being written: the call's arguments at the bottom, nested values above. */
interface Container {
  /** The element whose closing tag ends it (`invoke` for the arguments). */
  tag: string;
  kind: "object" | "array";
  schema: unknown;
  /** Members or items written so far (a comma goes before the next). */
  written: number;
}

/**
 * Reads MiniMax M3 calls as they stream: the call starts at its invoke's name,
 * brackets, keys and commas go out as their tags arrive, a string streams as
 * its text arrives (less a possible closing tag at the end), and any other
 * scalar goes out whole at its closing tag, typed by the schema.
 */
export class MinimaxM3Parser implements ToolCallParser {
  private state: State = "outside";
  private buf = "";
  private readonly gap = new ContentGap();
  private call: OpenCall | null = null;
  private stack: Container[] = [];
  /** The element whose value is being read. */
  private element = { tag: "", schema: undefined as unknown, streams: false };
  private readonly calls: CallWriter;

  constructor(private readonly opts: ParserOptions = {}) {
    this.calls = new CallWriter(opts.newId);
  }

  push(text: string): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    this.buf += text;
    while (this.step(out, false));
    return out;
  }

  flush(): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    while (this.step(out, true));
    // Cut-off output: a started call ends with its arguments as far as they
    // were written (the reply's finish says it was cut); markup before a
    // call's name is dropped, never content.
    if (this.call) {
      if (this.state === "scalar") this.sendUnclosed(this.valueSoFar(), out);
      this.endCall(out);
    } else if (this.state === "outside") {
      this.gap.flush(out, this.buf);
    }
    this.buf = "";
    this.state = "outside";
    this.stack = [];
    return out;
  }

  /** One step of the state machine; false when it needs more text. */
  private step(out: ToolCallEvent[], final: boolean): boolean {
    switch (this.state) {
      case "outside":
        return this.outside(out, final);
      case "block":
        return this.inBlock();
      case "name":
        return this.readName(out);
      case "members":
        return this.inContainer(out);
      case "value":
        return this.startValue(out);
      case "scalar":
        return this.readScalar(out, final);
      case "skip":
        return this.skip();
    }
  }

  private outside(out: ToolCallEvent[], final: boolean): boolean {
    const found = seekMarker(this.buf, BLOCK_OPEN);
    if (found.after === undefined && final) {
      // At the end a partial opener is text, unless it got as far as the
      // namespace token (a tag no text writes): a block cut off, markup.
      if (!found.held.startsWith(NS)) found.before += found.held;
      found.held = "";
    }
    if (this.gap.wait(out, found.before, found.after !== undefined)) return false;
    if (found.after === undefined) {
      this.buf = found.held;
      return false;
    }
    this.buf = found.after;
    this.state = "block";
    return true;
  }

  private inBlock(): boolean {
    this.buf = this.buf.trimStart();
    if (this.buf.startsWith(BLOCK_CLOSE)) {
      this.buf = this.buf.slice(BLOCK_CLOSE.length);
      this.leaveBlock();
      return true;
    }
    if (this.buf.startsWith(INVOKE_OPEN)) {
      this.buf = this.buf.slice(INVOKE_OPEN.length);
      this.state = "name";
      return true;
    }
    if (BLOCK_CLOSE.startsWith(this.buf) || INVOKE_OPEN.startsWith(this.buf)) return false; // a tag not yet whole
    this.state = "skip";
    return true;
  }

  private readName(out: ToolCallEvent[]): boolean {
    const at = this.buf.indexOf('">');
    if (at < 0) {
      if (this.buf.length > MAX_NAME || /[<\n]/.test(this.buf)) this.state = "skip";
      return this.state === "skip";
    }
    const name = this.buf.slice(0, at).trim();
    this.buf = this.buf.slice(at + 2);
    if (!name || /[<>"\s]/.test(name)) {
      this.state = "skip";
      return true;
    }
    this.call = this.calls.start(name, out);
    const tool = this.opts.tools?.find((t) => t.name === name);
    this.stack = [{ tag: "invoke", kind: "object", schema: tool?.parameters, written: 0 }];
    this.sendArgs("{", out);
    this.state = "members";
    return true;
  }

  /**
   * The tag name at `from` in the buffer, up to `>`, and where the tag ends;
   * "wait" for more text, "broken" when no tag name can come.
   */
  private tagAt(from: number): { name: string; end: number } | "wait" | "broken" {
    const at = this.buf.indexOf(">", from);
    const name = this.buf.slice(from, at < 0 ? undefined : at);
    if (/[<\n"]/.test(name) || name.length > MAX_NAME) return "broken";
    if (at < 0) return "wait";
    return name ? { name, end: at + 1 } : "broken";
  }

  /** Between the elements of an object or array: the next member or item opens, or the container closes. */
  private inContainer(out: ToolCallEvent[]): boolean {
    this.buf = this.buf.trimStart();
    const top = this.stack[this.stack.length - 1]!;
    if (this.buf.startsWith(`${NS}</`)) {
      const tag = this.tagAt(NS.length + 2);
      if (tag === "wait") return false;
      if (tag === "broken" || tag.name !== top.tag) return this.broken(out);
      this.buf = this.buf.slice(tag.end);
      this.sendArgs(top.kind === "object" ? "}" : "]", out);
      this.stack.pop();
      if (this.stack.length === 0) {
        this.endCall(out);
        this.state = "block";
      }
      return true;
    }
    if (this.buf.startsWith(`${NS}<`)) {
      const tag = this.tagAt(NS.length + 1);
      if (tag === "wait") return false;
      if (tag === "broken" || (top.kind === "array" && tag.name !== "item")) return this.broken(out);
      this.buf = this.buf.slice(tag.end);
      const comma = top.written++ > 0 ? "," : "";
      this.sendArgs(top.kind === "object" ? `${comma}${JSON.stringify(tag.name)}:` : comma, out);
      const schema = top.kind === "object" ? memberSchema(top.schema, tag.name) : itemSchema(top.schema);
      // An undeclared value is read as the model wrote it, a string (unless it nests).
      this.element = { tag: tag.name, schema, streams: isStringOnly(dereferenced(schema)) };
      this.state = "value";
      return true;
    }
    if (`${NS}<`.startsWith(this.buf)) return false; // a tag not yet whole
    return this.broken(out);
  }

  /** Just after an element's opening tag: nested elements (an object or array), or a scalar. */
  private startValue(out: ToolCallEvent[]): boolean {
    const { schema } = this.element;
    // A parameter declared a string is raw text whatever it holds.
    if (schema !== undefined && isStringOnly(dereferenced(schema))) return this.startScalar(out);
    const head = this.buf.trimStart();
    if (head.startsWith(`${NS}<`) && head.length > NS.length + 1 && head[NS.length + 1] !== "/") {
      this.buf = head;
      const child = this.tagAt(NS.length + 1);
      if (child === "wait") return false;
      if (child === "broken") return this.broken(out);
      const kind = containerKind(schema, child.name);
      this.stack.push({ tag: this.element.tag, kind, schema, written: 0 });
      this.sendArgs(kind === "object" ? "{" : "[", out);
      this.state = "members";
      return true;
    }
    // Nothing yet, or what may still open a nested element (cut there, the value is not begun).
    if (`${NS}<`.startsWith(head)) return false;
    return this.startScalar(out);
  }

  private startScalar(out: ToolCallEvent[]): boolean {
    if (this.element.streams) this.sendArgs('"', out);
    this.state = "scalar";
    return true;
  }

  private readScalar(out: ToolCallEvent[], final: boolean): boolean {
    // A value runs to its closing tag; the call's or block's end before it means the value never closed.
    const ends = this.valueEnds();
    const [close] = ends;
    const found = ends.map((e) => this.buf.indexOf(e)).filter((i) => i >= 0);
    if (found.length === 0) {
      if (final || !this.element.streams) return false;
      const settled = this.buf.slice(0, this.buf.length - partialSuffixLength(this.buf, ends));
      this.sendString(settled, out);
      this.buf = this.buf.slice(settled.length);
      return false;
    }
    const at = Math.min(...found);
    const raw = this.buf.slice(0, at);
    if (!this.buf.startsWith(close!, at)) {
      this.sendUnclosed(raw, out);
      return this.broken(out);
    }
    this.buf = this.buf.slice(at + close!.length);
    if (this.element.streams) this.sendString(raw, out);
    this.sendArgs(this.element.streams ? '"' : scalarJson(raw, this.element.schema), out);
    this.state = "members";
    return true;
  }

  /** What ends the value being read: its closing tag, or (never closed) the call's or the block's end. */
  private valueEnds(): string[] {
    return [closeTag(this.element.tag), INVOKE_CLOSE, BLOCK_CLOSE];
  }

  /** A value cut by the end of the output, less a partial closing tag. */
  private valueSoFar(): string {
    return this.buf.slice(0, this.buf.length - partialSuffixLength(this.buf, this.valueEnds()));
  }

  /** A value that never closed, as far as it was written. */
  private sendUnclosed(raw: string, out: ToolCallEvent[]): void {
    if (this.element.streams) this.sendString(raw, out);
    else if (raw.trim() !== "") this.sendArgs(rawValueJson(raw, dereferenced(this.element.schema)), out);
  }

  private skip(): boolean {
    const at = this.buf.indexOf(BLOCK_CLOSE);
    if (at < 0) {
      this.buf = this.buf.slice(this.buf.length - partialSuffixLength(this.buf, [BLOCK_CLOSE]));
      return false;
    }
    this.buf = this.buf.slice(at + BLOCK_CLOSE.length);
    this.leaveBlock();
    return true;
  }

  private leaveBlock(): void {
    this.state = "outside";
    this.gap.callEnded();
  }

  /**
   * Markup that does not fit: the rest of the block is dropped. Between the
   * call's parameters the call ends with the parameters it has (as the flat
   * XML wires do); inside a value it ends as written (not valid JSON: broken).
   */
  private broken(out: ToolCallEvent[]): boolean {
    if (this.call) {
      if (this.state === "members" && this.stack.length === 1) this.sendArgs("}", out);
      this.endCall(out);
    }
    this.stack = [];
    this.state = "skip";
    return true;
  }

  private sendString(text: string, out: ToolCallEvent[]): void {
    if (text) this.sendArgs(JSON.stringify(text).slice(1, -1), out);
  }

  private sendArgs(text: string, out: ToolCallEvent[]): void {
    this.calls.send(this.call!, text, out);
  }

  private endCall(out: ToolCallEvent[]): void {
    this.calls.end(this.call!, out);
    this.call = null;
  }
}

// --- The forced grammar -------------------------------------------------

/** Schema keywords that restrict values in ways the element syntax below cannot hold. */
const UNHELD = [
  "allOf",
  "not",
  "if",
  "patternProperties",
  "propertyNames",
  "dependentRequired",
  "dependentSchemas",
  "minProperties",
  "maxProperties",
  "unevaluatedProperties",
  "prefixItems",
  "contains",
  "uniqueItems",
  "unevaluatedItems",
];

function refuseUnheld(s: Schema, where: string): void {
  const k = UNHELD.find((keyword) => keyword in s);
  if (k) throw new SchemaError(k, `${where}/${k}`, `keyword '${k}' cannot be held in MiniMax M3's call syntax`);
}

/** Any raw text but the namespace token (so no value can write a tag). */
const RAW_RULE = "m3-raw";
/** One character of a length-bounded raw string: not `]`, so NS cannot start in it. */
const BOUNDED_CHAR = cls([[0x5d, 0x5d]], true);

/**
 * One tool's call as the template writes it, its arguments held to the
 * schema: the parameters in the schema's order (required ones always,
 * optional ones may be left out), nested objects as their properties'
 * elements, arrays as `item` elements; strings as raw text without NS (an
 * enum as one of its values, length bounds as plain characters); numbers,
 * integers and booleans as the JSON literals the template prints, held by
 * the JSON-schema compiler. Patterns and formats of strings are not held
 * (raw text has no quoting for the regex compiler to work inside); free-form
 * objects, tuples and the keywords in UNHELD are refused.
 */
class CallGrammar {
  private compiled = 0;
  /** `$ref`s being expanded, to refuse a recursive schema rather than loop. */
  private readonly expanding: string[] = [];

  constructor(
    private readonly out: GrammarOut,
    private readonly prefix: string,
    private readonly base: string,
  ) {}

  call(tool: ToolSpec): Expr {
    const root = asSchema(tool.parameters) ?? {};
    refuseUnheld(root, this.base);
    return seq(lit(`${INVOKE_OPEN}${tool.name}">`), this.members(root, "", true), lit(`${INVOKE_CLOSE}\n`));
  }

  /** An object's elements; `freeForm` lets one without properties be empty (a tool without parameters). */
  private members(s: Schema, path: string, freeForm: boolean): Expr {
    const props = asSchema(s.properties) ?? {};
    const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
    const names = [...Object.keys(props), ...[...required].filter((r) => !Object.hasOwn(props, r))];
    const where = this.base + path;
    if (names.length === 0 && !freeForm && s.additionalProperties !== false)
      throw new SchemaError(
        "properties",
        where,
        "an object without properties cannot be held in MiniMax M3's call syntax",
      );
    const unreadable = names.find((name) => !TAG_NAME.test(name));
    if (unreadable !== undefined)
      throw new SchemaError(
        "properties",
        `${where}/properties`,
        `the name '${unreadable}' cannot be a tag in MiniMax M3's call syntax`,
      );
    return seq(
      ...names.map((name) => {
        const element = seq(
          lit(openTag(name)),
          this.value(withDefinitions(props[name] ?? {}, s), `${path}/properties/${name}`),
          lit(closeTag(name)),
        );
        return required.has(name) ? element : opt(element);
      }),
    );
  }

  /** A value's text between its element's tags. */
  private value(schema: unknown, path: string): Expr {
    const where = this.base + path;
    this.out.budget.step();
    if (schema === false) throw new SchemaError("", where, "no value satisfies the schema false", "unsatisfiable");
    const s = asSchema(schema);
    if (!s) return this.raw();
    if (typeof s.$ref === "string") return this.reference(s, path);
    refuseUnheld(s, where);
    const values = Array.isArray(s.enum) ? s.enum : "const" in s ? [s.const] : undefined;
    if (values) return this.literals(values, where);
    const types = schemaTypes(s);
    // A value that may be a string is raw text (the parser types it back by the schema).
    if (types.has("string")) return this.rawString(s);
    const branches = s.anyOf ?? s.oneOf;
    const keyword = s.anyOf ? "anyOf" : "oneOf";
    if (s.type === undefined && Array.isArray(branches))
      return alt(...branches.map((b, i) => this.value(withDefinitions(b, s), `${path}/${keyword}/${i}`)));
    types.delete("null"); // None is never written: the template leaves the element out
    if (Array.isArray(branches) && (types.has("object") || types.has("array")))
      throw new SchemaError(
        keyword,
        `${where}/${keyword}`,
        `'${keyword}' beside 'type' cannot be held in MiniMax M3's call syntax`,
      );
    if (types.size === 1 && types.has("object")) return this.members(s, path, false);
    if (types.size === 1 && types.has("array")) return this.array(s, path);
    if (!types.has("object") && !types.has("array"))
      return compiledSchema(s, `${this.prefix}-v${this.compiled++}`, this.out);
    throw new SchemaError(
      "type",
      `${where}/type`,
      "a value of several structured types cannot be held in MiniMax M3's call syntax",
    );
  }

  private reference(s: Schema, path: string): Expr {
    const ref = s.$ref as string;
    const where = `${this.base}${path}/$ref`;
    const target = localDefinition(s, ref);
    if (target === undefined) throw new SchemaError("$ref", where, `cannot resolve '${ref}'`);
    if (this.expanding.includes(ref))
      throw new SchemaError("$ref", where, "a recursive schema cannot be held in MiniMax M3's call syntax");
    this.expanding.push(ref);
    try {
      return this.value(withDefinitions(target, s), path);
    } finally {
      this.expanding.pop();
    }
  }

  private array(s: Schema, path: string): Expr {
    if (Array.isArray(s.items))
      throw new SchemaError("items", `${this.base}${path}/items`, "tuples cannot be held in MiniMax M3's call syntax");
    const item = seq(
      lit(openTag("item")),
      this.value(s.items === undefined ? {} : withDefinitions(s.items, s), `${path}/items`),
      lit(closeTag("item")),
    );
    const min = typeof s.minItems === "number" ? s.minItems : 0;
    const max = typeof s.maxItems === "number" ? s.maxItems : null;
    return repeat(item, min, max);
  }

  /** An enum's values as the template prints them (a null value is never written). */
  private literals(values: unknown[], where: string): Expr {
    const texts: Expr[] = [];
    for (const v of values) {
      if (v === null) continue;
      if (typeof v === "object" || (typeof v === "string" && v.includes(NS)))
        throw new SchemaError("enum", `${where}/enum`, "this enum value cannot be held in MiniMax M3's call syntax");
      texts.push(lit(String(v)));
    }
    if (texts.length === 0)
      throw new SchemaError("enum", `${where}/enum`, "no value of the enum can be written", "unsatisfiable");
    return alt(...texts);
  }

  /** A string's raw text: a bounded run of plain characters, or any text without NS. */
  private rawString(s: Schema): Expr {
    const min = typeof s.minLength === "number" ? s.minLength : 0;
    const max = typeof s.maxLength === "number" ? s.maxLength : null;
    if (max !== null) return repeat(BOUNDED_CHAR, min, max);
    return min > 0 ? seq(repeat(BOUNDED_CHAR, min, min), this.raw()) : this.raw();
  }

  private raw(): Expr {
    return textWithout(NS, RAW_RULE, this.out.rules);
  }
}

/** The forced grammar: one block, holding one call, or one or more when `parallel`. */
export function minimaxM3Grammar(tools: ToolSpec[], parallel: boolean): string {
  return callsGrammar(
    tools,
    (tool, i, out) => new CallGrammar(out, `tc${i}`, out.budget.at).call(tool),
    (call) => seq(lit(`${BLOCK_OPEN}\n`), parallel ? plus(call) : call, lit(BLOCK_CLOSE)),
  );
}

export const minimaxM3: ToolDialect = {
  name: "minimax-m3",
  // M2's template writes `<minimax:tool_call>` and no namespace token; M3's the token and no such tag.
  detect: (t) => t.includes(NS) && t.includes("<invoke name="),
  parser: (opts) => new MinimaxM3Parser(opts),
  forcedGrammar: minimaxM3Grammar,
  trigger: BLOCK_OPEN,
  // NS opens every call and appears nowhere else in a reply: where it is one token, it is the one to ban.
  openers: [NS],
};
