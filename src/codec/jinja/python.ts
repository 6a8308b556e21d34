// What Python does with a value, as Jinja2 templates see it: str(), repr(),
// ==, ordering, `in`, iteration and len(). @huggingface/jinja answers these
// the JavaScript way (`{{ true }}` prints "true", `[1] == [1]` is false,
// `'1' == 1` is true, a dict prints as JSON); chat templates are written and
// checked against Python Jinja2, so these answer as Python does.
import {
  ArrayValue,
  BooleanValue,
  FloatValue,
  FunctionValue,
  IntegerValue,
  MarkupValue,
  NamespaceValue,
  NullValue,
  ObjectValue,
  StringValue,
  TupleValue,
  UndefinedValue,
  isNumeric,
  isString,
  isUndefined,
  keyValue,
  numericValue,
  string,
  typeName,
  type Key,
  type Value,
} from "./values.ts";

/** Python's str(value); Jinja2's Undefined prints as "". */
export function str(v: Value): string {
  if (v instanceof StringValue) return v.value;
  if (isUndefined(v)) return "";
  return repr(v);
}

/** Python's repr(value), as str() of a list or dict shows its items. */
export function repr(v: Value): string {
  if (v instanceof StringValue) return stringRepr(v.value);
  if (v instanceof BooleanValue) return v.value ? "True" : "False";
  if (v instanceof IntegerValue) return String(v.value);
  if (v instanceof FloatValue) return floatRepr(v.value);
  if (v instanceof NullValue) return "None";
  if (v instanceof UndefinedValue) return "Undefined";
  if (v instanceof TupleValue) {
    const items = v.value.map(repr);
    return items.length === 1 ? `(${items[0]},)` : `(${items.join(", ")})`;
  }
  if (v instanceof ArrayValue) return `[${v.value.map(repr).join(", ")}]`;
  if (v instanceof ObjectValue) return dictRepr(v.value);
  if (v instanceof NamespaceValue) return `<Namespace ${dictRepr(v.value)}>`;
  if (v instanceof FunctionValue) return "<function>";
  return String(v.value);
}

function dictRepr(map: Map<Key, Value>): string {
  const items: string[] = [];
  for (const [k, item] of map) items.push(`${repr(keyValue(k))}: ${repr(item)}`);
  return `{${items.join(", ")}}`;
}

/** Characters str.isprintable() rejects: repr escapes them. */
const NON_PRINTABLE = /[\p{C}\p{Z}]/u;

/** Python's repr of a str: single quotes unless the text has ' and no ", escapes for the rest. */
function stringRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    if (ch === quote || ch === "\\") out += `\\${ch}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (ch !== " " && NON_PRINTABLE.test(ch)) {
      const code = ch.codePointAt(0)!;
      const hex = code.toString(16);
      out +=
        code <= 0xff
          ? `\\x${hex.padStart(2, "0")}`
          : code <= 0xffff
            ? `\\u${hex.padStart(4, "0")}`
            : `\\U${hex.padStart(8, "0")}`;
    } else out += ch;
  }
  return out + quote;
}

/** Python's repr of a float: shortest round-trip digits, exponent form below 1e-4 and from 1e16. */
export function floatRepr(n: number): string {
  if (Number.isNaN(n)) return "nan";
  if (!Number.isFinite(n)) return n > 0 ? "inf" : "-inf";
  if (n === 0) return Object.is(n, -0) ? "-0.0" : "0.0";
  const [mantissa, exp] = n.toExponential().split("e") as [string, string];
  const exponent = Number(exp);
  if (exponent < -4 || exponent >= 16) {
    const sign = exponent < 0 ? "-" : "+";
    return `${mantissa}e${sign}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  const text = String(n);
  return text.includes(".") ? text : `${text}.0`;
}

/** Python's ==: numbers by value (True == 1), containers item by item, a list never equals a tuple. */
export function equals(a: Value, b: Value): boolean {
  if (isNumeric(a) && isNumeric(b)) return numericValue(a) === numericValue(b);
  if (isString(a) && isString(b)) return a.value === b.value;
  if (a instanceof NullValue || b instanceof NullValue) return a instanceof NullValue && b instanceof NullValue;
  if (a instanceof UndefinedValue || b instanceof UndefinedValue)
    return a instanceof UndefinedValue && b instanceof UndefinedValue;
  if (a instanceof ArrayValue && b instanceof ArrayValue) {
    if (a instanceof TupleValue !== b instanceof TupleValue || a.value.length !== b.value.length) return false;
    return a.value.every((item, i) => equals(item, b.value[i]!));
  }
  if (a instanceof ObjectValue && b instanceof ObjectValue) {
    if (a.value.size !== b.value.size) return false;
    for (const [k, item] of a.value) {
      const other = b.value.get(k);
      if (other === undefined || !equals(item, other)) return false;
    }
    return true;
  }
  return a === b;
}

/** Python's ordering (<): numbers, strings, and lists or tuples item by item; anything else is a TypeError. */
export function compare(a: Value, b: Value): number {
  if (isNumeric(a) && isNumeric(b)) return Math.sign(numericValue(a) - numericValue(b));
  if (isString(a) && isString(b)) return a.value < b.value ? -1 : a.value > b.value ? 1 : 0;
  if (a instanceof ArrayValue && b instanceof ArrayValue && a instanceof TupleValue === b instanceof TupleValue) {
    const n = Math.min(a.value.length, b.value.length);
    for (let i = 0; i < n; i++) {
      if (!equals(a.value[i]!, b.value[i]!)) return compare(a.value[i]!, b.value[i]!);
    }
    return Math.sign(a.value.length - b.value.length);
  }
  throw new TypeError(`'<' not supported between instances of '${typeName(a)}' and '${typeName(b)}'`);
}

/** Python's `item in container`; `x in undefined` is false in Jinja2. */
export function contains(container: Value, item: Value): boolean {
  if (isString(container)) {
    if (!isString(item)) throw new TypeError(`'in <string>' requires string as left operand, not ${typeName(item)}`);
    return container.value.includes(item.value);
  }
  if (container instanceof ArrayValue) return container.value.some((x) => equals(x, item));
  if (container instanceof ObjectValue) {
    const key = dictKey(item);
    return key !== undefined && container.value.has(key);
  }
  if (container instanceof UndefinedValue) return false;
  throw new TypeError(`argument of type '${typeName(container)}' is not iterable`);
}

/** The Map key a value stands for in a dict: strings, and numbers (True is 1, as Python hashes it). */
export function dictKey(v: Value): Key | undefined {
  if (isString(v)) return v.value;
  if (isNumeric(v)) return numericValue(v);
  if (v instanceof ArrayValue || v instanceof ObjectValue) throw new TypeError(`unhashable type: '${typeName(v)}'`);
  return undefined;
}

/** Python's iter(): a str yields its characters, a dict its keys; Jinja2's Undefined yields nothing. */
export function iterate(v: Value): Value[] {
  if (v instanceof ArrayValue) return v.value;
  if (v instanceof ObjectValue) return Array.from(v.value.keys(), keyValue);
  if (isString(v)) return Array.from(v.value, (ch) => string(ch));
  if (v instanceof UndefinedValue) return [];
  throw new TypeError(`'${typeName(v)}' object is not iterable`);
}

/** Python's len(); Jinja2's Undefined has length 0. */
export function length(v: Value): number {
  if (isString(v)) return codePoints(v.value);
  if (v instanceof ArrayValue) return v.value.length;
  if (v instanceof ObjectValue) return v.value.size;
  if (v instanceof UndefinedValue) return 0;
  throw new TypeError(`object of type '${typeName(v)}' has no len()`);
}

/** Length in code points, as Python counts a str: a surrogate pair is one. */
export function codePoints(s: string): number {
  let n = s.length;
  for (let i = 0; i + 1 < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/** markupsafe.escape of plain text. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>'"]/g, (c) => ESCAPES[c]!);
}
const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "'": "&#39;", '"': "&#34;" };

/** Jinja2's soft_str: Markup stays Markup, anything else becomes its str(). */
export function softStr(v: Value): Value {
  return v instanceof StringValue ? v : string(str(v));
}

/** A string result that stays Markup when its source was Markup (Markup's str methods return Markup). */
export function like(source: Value, text: string): Value {
  return source instanceof MarkupValue ? new MarkupValue(text) : string(text);
}

/** Python's str.isspace() characters: what strip() and split() remove by default. */
const PY_SPACE =
  "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000";
export const isPySpace = (ch: string): boolean => PY_SPACE.includes(ch);

/** Python's str.strip/lstrip/rstrip: whitespace, or any of `chars`. Scans, so it stays linear. */
export function strip(s: string, chars: string | null, left: boolean, right: boolean): string {
  const drop = chars === null ? isPySpace : (ch: string) => chars.includes(ch);
  let start = 0;
  let end = s.length;
  if (left) while (start < end && drop(s[start]!)) start++;
  if (right) while (end > start && drop(s[end - 1]!)) end--;
  return s.slice(start, end);
}
