// `tojson` as transformers defines it for chat templates: Python's
// json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), with keys in insertion order and non-ASCII text kept.
import { floatRepr } from "./python.ts";
import {
  ArrayValue,
  BooleanValue,
  FloatValue,
  IntegerValue,
  NullValue,
  ObjectValue,
  StringValue,
  typeName,
  type Key,
  type Value,
} from "./values.ts";

export interface DumpOptions {
  ensureAscii: boolean;
  /** null: one line; a number of spaces or a string to indent each level with (0 or "": newlines only). */
  indent: number | string | null;
  /** [item separator, key separator]; json.dumps picks [", ", ": "], or [",", ": "] when indenting. */
  separators: [string, string] | null;
  sortKeys: boolean;
}

export function dumps(value: Value, options: DumpOptions): string {
  const indent = typeof options.indent === "number" ? " ".repeat(Math.max(0, options.indent)) : options.indent;
  const [itemSep, keySep] = options.separators ?? (indent === null ? [", ", ": "] : [",", ": "]);
  const quote = options.ensureAscii ? asciiQuote : (s: string) => JSON.stringify(s);

  const write = (v: Value, depth: number): string => {
    if (v instanceof StringValue) return quote(v.value);
    if (v instanceof BooleanValue) return v.value ? "true" : "false";
    if (v instanceof IntegerValue) return String(v.value);
    if (v instanceof FloatValue) return floatJson(v.value);
    if (v instanceof NullValue) return "null";
    if (v instanceof ArrayValue) {
      return container(
        "[",
        "]",
        v.value.map((item) => write(item, depth + 1)),
        depth,
      );
    }
    if (v instanceof ObjectValue) {
      let entries = Array.from(v.value);
      if (options.sortKeys) entries = entries.sort(([a], [b]) => compareKeys(a, b));
      return container(
        "{",
        "}",
        entries.map(([k, item]) => quote(keyText(k)) + keySep + write(item, depth + 1)),
        depth,
      );
    }
    throw new TypeError(`Object of type ${typeName(v)} is not JSON serializable`);
  };

  const container = (open: string, close: string, items: string[], depth: number): string => {
    if (items.length === 0) return open + close;
    if (indent === null) return open + items.join(itemSep) + close;
    const inner = `\n${indent.repeat(depth + 1)}`;
    return `${open + inner + items.join(itemSep + inner)}\n${indent.repeat(depth)}${close}`;
  };

  return write(value, 0);
}

/** json.dumps writes a float as its repr, and the non-finite ones as JavaScript does. */
function floatJson(n: number): string {
  if (Number.isNaN(n)) return "NaN";
  if (!Number.isFinite(n)) return n > 0 ? "Infinity" : "-Infinity";
  return floatRepr(n);
}

/** Dict keys become strings: an int key 0 is written "0". */
function keyText(key: Key): string {
  return typeof key === "number" ? (Number.isInteger(key) ? String(key) : floatRepr(key)) : key;
}

function compareKeys(a: Key, b: Key): number {
  if (typeof a !== typeof b) throw new TypeError("'<' not supported between instances of 'int' and 'str'");
  return a < b ? -1 : a > b ? 1 : 0;
}

/** ensure_ascii: every character outside printable ASCII as \uXXXX (UTF-16 units, as Python writes them). */
function asciiQuote(s: string): string {
  return JSON.stringify(s).replace(/[\x7f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
