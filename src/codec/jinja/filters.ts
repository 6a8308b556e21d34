// Jinja2's built-in filters with its own semantics. The library's filters
// are typed by operand and refuse much that Jinja2 accepts: `undefined|trim`
// (Jinja2: ""), `dict|string` (Python's repr), `none|selectattr(...)` (Jinja2:
// nothing, as select/reject/map skip a false value), `[..]|min`, `tojson`
// with transformers' arguments, `indent` with Python's line splitting.
// Filters not listed here go to the library.
import { getattr, getitem } from "./lookup.ts";
import { percentFormat } from "./format.ts";
import { dumps } from "./json.ts";
import { dictItems, replace, splitlines } from "./methods.ts";
import { params } from "./params.ts";
import { codePoints, compare, equals, escapeHtml, iterate, length, like, softStr, str, strip } from "./python.ts";
import { runTest } from "./tests.ts";
import {
  ArrayValue,
  FloatValue,
  IntegerValue,
  MarkupValue,
  NullValue,
  ObjectValue,
  UNDEFINED,
  UndefinedValue,
  isNumeric,
  isString,
  list,
  number,
  numericValue,
  string,
  tuple,
  typeName,
  type Value,
} from "./values.ts";

type Filter = (value: Value, args: Value[], kwargs: Map<string, Value>) => Value;

const flag = (v: Value | undefined, fallback = false): boolean => (v === undefined ? fallback : v.__bool__().value);
const text = (v: Value | undefined, fallback: string): string => (v === undefined ? fallback : str(v));

/** make_attrgetter: "a.b.0" walks getitem by parts, digits as indexes. */
function attrGetter(attribute: Value | undefined): (item: Value) => Value {
  if (attribute === undefined || attribute instanceof NullValue) return (item) => item;
  if (attribute instanceof IntegerValue) return (item) => getitem(item, attribute);
  const parts = str(attribute)
    .split(".")
    .map((p) => (/^\d+$/.test(p) ? number(Number(p)) : string(p)));
  return (item) => parts.reduce((v, part) => getitem(v, part), item);
}

/** The sort key of the ordering filters: strings compare lowercased unless case_sensitive. */
function sortKey(caseSensitive: boolean, attribute?: Value): (item: Value) => Value {
  const get = attrGetter(attribute);
  return (item) => {
    const v = get(item);
    return !caseSensitive && isString(v) ? string(v.value.toLowerCase()) : v;
  };
}

function sorted(items: Value[], key: (item: Value) => Value, reverse: boolean): Value[] {
  const keyed = items.map((item) => [key(item), item] as const);
  // Array.prototype.sort is stable, as Python's sorted is.
  keyed.sort((a, b) => (reverse ? compare(b[0], a[0]) : compare(a[0], b[0])));
  return keyed.map(([, item]) => item);
}

/** select / reject / selectattr / rejectattr; Jinja2 yields nothing for a false value (none, undefined, []). */
function selectOrReject(value: Value, args: Value[], select: boolean, byAttribute: boolean): Value {
  if (!value.__bool__().value) return list([]);
  let rest = args;
  let get = (item: Value) => item;
  if (byAttribute) {
    if (rest.length === 0) throw new TypeError("Missing parameter for attribute name");
    get = attrGetter(rest[0]);
    rest = rest.slice(1);
  }
  const check =
    rest.length === 0 ? (v: Value) => v.__bool__().value : (v: Value) => runTest(str(rest[0]!), v, rest.slice(1));
  return list(iterate(value).filter((item) => check(get(item)) === select));
}

function minOrMax(value: Value, args: Value[], kwargs: Map<string, Value>, name: string, sign: number): Value {
  const [caseSensitive, attribute] = params(name, args, kwargs, ["case_sensitive", "attribute"]);
  const items = iterate(value);
  if (items.length === 0) return UNDEFINED;
  const key = sortKey(flag(caseSensitive), attribute);
  let best = items[0]!;
  let bestKey = key(best);
  for (const item of items.slice(1)) {
    const k = key(item);
    if (compare(k, bestKey) * sign > 0) [best, bestKey] = [item, k];
  }
  return best;
}

/** do_int: Python's int(str, base), else int(float(str)) ("42.23" gives 42), else `fallback`. */
function toInt(value: Value, fallback: Value, base: number): Value {
  if (isNumeric(value)) return number(Math.trunc(numericValue(value)));
  if (!isString(value)) return fallback;
  const s = value.value.trim().replace(/(?<=[0-9a-z])_(?=[0-9a-z])/gi, "");
  const m = /^([+-]?)(0[xob])?([0-9a-z]+)$/i.exec(s);
  if (m) {
    const prefix = m[2]?.toLowerCase();
    const radix = base === 0 ? (({ "0x": 16, "0o": 8, "0b": 2 } as Record<string, number>)[prefix ?? ""] ?? 10) : base;
    const prefixFits =
      prefix === undefined ||
      (prefix === "0x" && radix === 16) ||
      (prefix === "0o" && radix === 8) ||
      (prefix === "0b" && radix === 2);
    const digits = m[3]!.toLowerCase();
    if (prefixFits && Array.from(digits).every((d) => parseInt(d, 36) < radix)) {
      return number((m[1] === "-" ? -1 : 1) * parseInt(digits, radix));
    }
  }
  if (/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(s)) return number(Math.trunc(Number(s)));
  return fallback;
}

function toFloat(value: Value, fallback: Value): Value {
  if (isNumeric(value)) return number(numericValue(value), true);
  if (isString(value)) {
    const s = value.value.trim().toLowerCase();
    const n =
      s === "inf" || s === "+inf"
        ? Infinity
        : s === "-inf"
          ? -Infinity
          : s === "nan"
            ? NaN
            : s === ""
              ? NaN
              : Number(s);
    return Number.isNaN(n) && s !== "nan" ? fallback : number(n, true);
  }
  return fallback;
}

/** Python's round() (halves to even), the float result Jinja2's round filter gives. */
function roundHalfEven(n: number, digits: number): number {
  const scale = 10 ** digits;
  const x = n * scale;
  const r = Math.round(x);
  const half = Math.abs(x % 1) === 0.5;
  return (half && r % 2 !== 0 ? r - 1 : r) / scale;
}

/** do_indent: Python's splitlines, the first line and blank lines left alone unless asked. */
function indent(value: Value, width: Value | undefined, first: boolean, blank: boolean): Value {
  const pad = width === undefined ? "    " : isString(width) ? width.value : " ".repeat(Number(width.value));
  const lines = splitlines(`${str(value)}\n`);
  let out: string;
  if (blank) out = lines.join(`\n${pad}`);
  else out = [lines[0] ?? "", ...lines.slice(1).map((line) => (line ? pad + line : line))].join("\n");
  if (first) out = pad + out;
  return like(value, out);
}

/** do_title: each run after whitespace, `-`, or an opening bracket starts a word. */
function title(s: string): string {
  return s
    .split(/([-\s({[<]+)/u)
    .filter((item) => item !== "")
    .map((item) => item.charAt(0).toUpperCase() + item.slice(1).toLowerCase())
    .join("");
}

const FILTERS = new Map<string, Filter>([
  ["safe", (v) => (v instanceof MarkupValue ? v : new MarkupValue(str(v)))],
  ["string", (v) => softStr(v)],
  ["e", (v) => (v instanceof MarkupValue ? v : new MarkupValue(escapeHtml(str(v))))],
  ["escape", (v) => (v instanceof MarkupValue ? v : new MarkupValue(escapeHtml(str(v))))],
  ["forceescape", (v) => new MarkupValue(escapeHtml(str(v)))],
  ["length", (v) => number(length(v))],
  ["count", (v) => number(length(v))],
  [
    "trim",
    (v, args, kwargs) => {
      const [chars] = params("trim", args, kwargs, ["chars"]);
      return like(v, strip(str(v), chars === undefined || chars instanceof NullValue ? null : str(chars), true, true));
    },
  ],
  ["upper", (v) => like(v, str(v).toUpperCase())],
  ["lower", (v) => like(v, str(v).toLowerCase())],
  [
    "capitalize",
    (v) => {
      const s = str(v);
      return like(v, s.charAt(0).toUpperCase() + s.slice(1).toLowerCase());
    },
  ],
  ["title", (v) => like(v, title(str(v)))],
  ["default", defaultFilter],
  ["d", defaultFilter],
  ["list", (v) => list(iterate(v).slice())],
  ["first", (v) => iterate(v)[0] ?? UNDEFINED],
  [
    "last",
    (v) => {
      const items = iterate(v);
      return items[items.length - 1] ?? UNDEFINED;
    },
  ],
  [
    "reverse",
    (v) => (isString(v) ? like(v, Array.from(v.value).reverse().join("")) : list(iterate(v).slice().reverse())),
  ],
  [
    "items",
    (v) => {
      if (v instanceof UndefinedValue) return list([]);
      if (!(v instanceof ObjectValue)) throw new TypeError(`'${typeName(v)}' object has no attribute 'items'`);
      return dictItems(v.value);
    },
  ],
  [
    "dictsort",
    (v, args, kwargs) => {
      const [caseSensitive, by, reverse] = params("dictsort", args, kwargs, ["case_sensitive", "by", "reverse"]);
      if (!(v instanceof ObjectValue)) throw new TypeError(`'${typeName(v)}' object has no attribute 'items'`);
      const pos = by === undefined || str(by) === "key" ? 0 : str(by) === "value" ? 1 : -1;
      if (pos < 0) throw new Error("FilterArgumentError: You can only sort by either 'key' or 'value'");
      const key = sortKey(flag(caseSensitive), number(pos));
      return list(sorted(iterate(dictItems(v.value)), key, flag(reverse)));
    },
  ],
  [
    "sort",
    (v, args, kwargs) => {
      const [reverse, caseSensitive, attribute] = params("sort", args, kwargs, [
        "reverse",
        "case_sensitive",
        "attribute",
      ]);
      return list(sorted(iterate(v), sortKey(flag(caseSensitive), attribute), flag(reverse)));
    },
  ],
  [
    "unique",
    (v, args, kwargs) => {
      const [caseSensitive, attribute] = params("unique", args, kwargs, ["case_sensitive", "attribute"]);
      const key = sortKey(flag(caseSensitive), attribute);
      const seen: Value[] = [];
      const out: Value[] = [];
      for (const item of iterate(v)) {
        const k = key(item);
        if (seen.some((s) => equals(s, k))) continue;
        seen.push(k);
        out.push(item);
      }
      return list(out);
    },
  ],
  ["min", (v, args, kwargs) => minOrMax(v, args, kwargs, "min", -1)],
  ["max", (v, args, kwargs) => minOrMax(v, args, kwargs, "max", 1)],
  [
    "sum",
    (v, args, kwargs) => {
      const [attribute, start] = params("sum", args, kwargs, ["attribute", "start"]);
      const get = attrGetter(attribute);
      let total: Value = start ?? number(0);
      for (const item of iterate(v)) {
        const x = get(item);
        if (!isNumeric(x) || !isNumeric(total))
          throw new TypeError(`unsupported operand type(s) for +: '${typeName(total)}' and '${typeName(x)}'`);
        total = number(numericValue(total) + numericValue(x), total instanceof FloatValue || x instanceof FloatValue);
      }
      return total;
    },
  ],
  [
    "join",
    (v, args, kwargs) => {
      const [separator, attribute] = params("join", args, kwargs, ["d", "attribute"]);
      const get = attrGetter(attribute);
      return string(
        iterate(v)
          .map((item) => str(get(item)))
          .join(text(separator, "")),
      );
    },
  ],
  [
    "map",
    (v, args, kwargs) => {
      if (!v.__bool__().value) return list([]);
      const items = iterate(v);
      if (kwargs.has("attribute")) {
        const get = attrGetter(kwargs.get("attribute"));
        const fallback = kwargs.get("default");
        return list(
          items.map((item) => {
            const x = get(item);
            return x instanceof UndefinedValue && fallback !== undefined ? fallback : x;
          }),
        );
      }
      const [name, ...rest] = args;
      if (name === undefined) throw new TypeError("map requires a filter argument");
      return list(items.map((item) => applyFilter(str(name), item, rest, kwargs)));
    },
  ],
  ["select", (v, args) => selectOrReject(v, args, true, false)],
  ["reject", (v, args) => selectOrReject(v, args, false, false)],
  ["selectattr", (v, args) => selectOrReject(v, args, true, true)],
  ["rejectattr", (v, args) => selectOrReject(v, args, false, true)],
  ["attr", (v, args) => getattr(v, str(args[0] ?? UNDEFINED))],
  [
    "replace",
    (v, args, kwargs) => {
      const [old, replacement, count] = params("replace", args, kwargs, ["old", "new", "count"]);
      const n = count === undefined || count instanceof NullValue ? -1 : Number(count.value);
      return like(v, replace(str(v), text(old, ""), text(replacement, ""), n));
    },
  ],
  [
    "indent",
    (v, args, kwargs) => {
      const [width, first, blank] = params("indent", args, kwargs, ["width", "first", "blank"]);
      return indent(v, width, flag(first), flag(blank));
    },
  ],
  [
    "center",
    (v, args, kwargs) => {
      const [width] = params("center", args, kwargs, ["width"]);
      const s = str(v);
      const missing = (width === undefined ? 80 : Number(width.value)) - codePoints(s);
      if (missing <= 0) return string(s);
      const left = Math.floor(missing / 2) + ((missing % 2) & ((width === undefined ? 80 : Number(width.value)) % 2));
      return string(" ".repeat(left) + s + " ".repeat(missing - left));
    },
  ],
  [
    "int",
    (v, args, kwargs) => {
      const [fallback, base] = params("int", args, kwargs, ["default", "base"]);
      return toInt(v, fallback ?? number(0), base === undefined ? 10 : Number(base.value));
    },
  ],
  [
    "float",
    (v, args, kwargs) => {
      const [fallback] = params("float", args, kwargs, ["default"]);
      return toFloat(v, fallback ?? number(0, true));
    },
  ],
  [
    "abs",
    (v) => {
      if (!isNumeric(v)) throw new TypeError(`bad operand type for abs(): '${typeName(v)}'`);
      return number(Math.abs(numericValue(v)), v instanceof FloatValue);
    },
  ],
  [
    "round",
    (v, args, kwargs) => {
      const [precision, method] = params("round", args, kwargs, ["precision", "method"]);
      if (!isNumeric(v)) throw new TypeError(`type ${typeName(v)} doesn't define __round__ method`);
      const digits = precision === undefined ? 0 : Number(precision.value);
      const how = method === undefined ? "common" : str(method);
      const n = numericValue(v);
      const scale = 10 ** digits;
      const rounded =
        how === "ceil"
          ? Math.ceil(n * scale) / scale
          : how === "floor"
            ? Math.floor(n * scale) / scale
            : roundHalfEven(n, digits);
      return number(rounded, true);
    },
  ],
  ["wordcount", (v) => number((str(v).match(/[\p{L}\p{N}_]+/gu) ?? []).length)],
  [
    "format",
    (v, args, kwargs) => {
      if (args.length > 0 && kwargs.size > 0)
        throw new Error("FilterArgumentError: can't handle positional and keyword arguments at the same time");
      return like(
        v,
        percentFormat(
          str(v),
          kwargs.size > 0 ? new ObjectValue(kwargs) : tuple(args),
          kwargs.size > 0 ? kwargs : undefined,
        ),
      );
    },
  ],
  [
    "tojson",
    (v, args, kwargs) => {
      // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
      const [ensureAscii, indentArg, separators, sortKeys] = params("tojson", args, kwargs, [
        "ensure_ascii",
        "indent",
        "separators",
        "sort_keys",
      ]);
      let seps: [string, string] | null = null;
      if (separators instanceof ArrayValue) {
        if (separators.value.length !== 2) throw new Error("ValueError: separators must be a pair of strings");
        seps = [str(separators.value[0]!), str(separators.value[1]!)];
      }
      const ind =
        indentArg === undefined || indentArg instanceof NullValue
          ? null
          : isString(indentArg)
            ? indentArg.value
            : Number(indentArg.value);
      return string(
        dumps(v, { ensureAscii: flag(ensureAscii), indent: ind, separators: seps, sortKeys: flag(sortKeys) }),
      );
    },
  ],
]);

function defaultFilter(v: Value, args: Value[], kwargs: Map<string, Value>): Value {
  const [fallback, boolean] = params("default", args, kwargs, ["default_value", "boolean"]);
  if (v instanceof UndefinedValue || (flag(boolean) && !v.__bool__().value)) return fallback ?? string("");
  return v;
}

/** Whether the adapter implements filter `name` (the rest are left to the library). */
export const hasFilter = (name: string): boolean => FILTERS.has(name);

/** Applies filter `name` to `value` with already evaluated arguments. */
export function applyFilter(name: string, value: Value, args: Value[], kwargs: Map<string, Value>): Value {
  const filter = FILTERS.get(name);
  if (!filter) throw new Error(`No filter named '${name}'.`);
  return filter(value, args, kwargs);
}
