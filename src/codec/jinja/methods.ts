// The Python methods templates call on values: str methods (`.strip('\n')`,
// `.split()`, `.format()`), dict methods (`.get()`, `.items()`) and the few
// list methods the sandbox allows. Jinja2's ImmutableSandboxedEnvironment
// refuses the mutating ones (`list.append`, `dict.update`): calling them
// raises, as in the reference.
import { formatString } from "./format.ts";
import { params } from "./params.ts";
import { codePoints, dictKey, equals, isPySpace, like, str, strip } from "./python.ts";
import {
  ArrayValue,
  NONE,
  ObjectValue,
  StringValue,
  TupleValue,
  UnsafeMethodValue,
  bool,
  fn,
  isString,
  keyValue,
  list,
  number,
  splitArguments,
  tuple,
  typeName,
  type Key,
  type Value,
  type ValueOf,
} from "./values.ts";

type Method<T> = (self: T, args: Value[], kwargs: Map<string, Value>) => Value;

/** The bound method `name` of `obj`, or undefined when Python has no such attribute. */
export function methodOf(obj: Value, name: string): Value | undefined {
  const table: Record<string, Method<never>> | undefined =
    obj instanceof StringValue
      ? STR_METHODS
      : obj instanceof ObjectValue
        ? DICT_METHODS
        : obj instanceof TupleValue
          ? TUPLE_METHODS
          : obj instanceof ArrayValue
            ? LIST_METHODS
            : undefined;
  const method = table && Object.hasOwn(table, name) ? table[name] : undefined;
  if (method) {
    const impl = method as Method<Value>;
    return fn((raw) => {
      const [args, kwargs] = splitArguments(raw);
      return impl(obj, args, kwargs);
    });
  }
  const unsafe = obj instanceof ArrayValue ? UNSAFE_LIST : obj instanceof ObjectValue ? UNSAFE_DICT : undefined;
  if (unsafe?.has(name)) {
    return new UnsafeMethodValue(() => {
      throw new Error(`SecurityError: access to attribute '${name}' of '${typeName(obj)}' object is unsafe.`);
    });
  }
  return undefined;
}

const UNSAFE_LIST = new Set(["append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"]);
const UNSAFE_DICT = new Set(["clear", "pop", "popitem", "setdefault", "update"]);

const textArg = (v: Value | undefined, what: string): string | null => {
  if (v === undefined || v.type === "NullValue") return null;
  if (!isString(v)) throw new TypeError(`${what} arg must be None or str, not ${typeName(v)}`);
  return v.value;
};
const intArg = (v: Value | undefined, fallback: number): number => (v === undefined ? fallback : Number(v.value));

/** str.split / str.rsplit: runs of whitespace when `sep` is None, else every `sep`. */
function split(s: string, sep: string | null, maxsplit: number, fromRight: boolean): string[] {
  if (sep === "") throw new Error("ValueError: empty separator");
  let parts: string[];
  if (sep === null) {
    parts = [];
    let word = "";
    for (const ch of s) {
      if (isPySpace(ch)) {
        if (word) parts.push(word);
        word = "";
      } else word += ch;
    }
    if (word) parts.push(word);
    if (maxsplit < 0 || parts.length <= maxsplit + 1) return parts;
    // Rejoining loses the original whitespace between the kept words: redo the cut on the text itself.
    return fromRight ? splitRightWhitespace(s, maxsplit) : splitLeftWhitespace(s, maxsplit);
  }
  parts = s.split(sep);
  if (maxsplit < 0 || parts.length <= maxsplit + 1) return parts;
  return fromRight
    ? [parts.slice(0, parts.length - maxsplit).join(sep), ...parts.slice(parts.length - maxsplit)]
    : [...parts.slice(0, maxsplit), parts.slice(maxsplit).join(sep)];
}

function splitLeftWhitespace(s: string, maxsplit: number): string[] {
  const parts: string[] = [];
  let i = 0;
  while (parts.length < maxsplit) {
    while (i < s.length && isPySpace(s[i]!)) i++;
    let j = i;
    while (j < s.length && !isPySpace(s[j]!)) j++;
    parts.push(s.slice(i, j));
    i = j;
  }
  const rest = strip(s.slice(i), null, true, false);
  return rest ? [...parts, rest] : parts;
}

function splitRightWhitespace(s: string, maxsplit: number): string[] {
  const parts: string[] = [];
  let j = s.length;
  while (parts.length < maxsplit) {
    while (j > 0 && isPySpace(s[j - 1]!)) j--;
    let i = j;
    while (i > 0 && !isPySpace(s[i - 1]!)) i--;
    parts.unshift(s.slice(i, j));
    j = i;
  }
  const rest = strip(s.slice(0, j), null, false, true);
  return rest ? [rest, ...parts] : parts;
}

/** Python's str.splitlines() line boundaries. */
const LINE_BREAK = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/g;

export function splitlines(s: string, keepends = false): string[] {
  const lines: string[] = [];
  let start = 0;
  for (const m of s.matchAll(LINE_BREAK)) {
    const end = m.index + m[0].length;
    lines.push(s.slice(start, keepends ? end : m.index));
    start = end;
  }
  if (start < s.length) lines.push(s.slice(start));
  return lines;
}

const cased = (ch: string): boolean => ch.toLowerCase() !== ch.toUpperCase();

/** Python's str.title(): a cased letter after an uncased character starts a word. */
function pyTitle(s: string): string {
  let out = "";
  let inWord = false;
  for (const ch of s) {
    out += inWord ? ch.toLowerCase() : ch.toUpperCase();
    inWord = cased(ch);
  }
  return out;
}

const predicate =
  (test: (s: string) => boolean): Method<ValueOf<string>> =>
  (self) =>
    bool(self.value !== "" && test(self.value));
const affixes = (v: Value): string[] => (v instanceof ArrayValue ? v.value.map((x) => str(x)) : [str(v)]);
const pad = (self: ValueOf<string>, args: Value[], side: "left" | "right" | "center"): Value => {
  const width = intArg(args[0], 0);
  const fill = args[1] ? str(args[1]) : " ";
  const missing = width - codePoints(self.value);
  if (missing <= 0) return self;
  if (side === "right") return like(self, self.value + fill.repeat(missing));
  if (side === "left") return like(self, fill.repeat(missing) + self.value);
  const left = Math.floor(missing / 2) + ((missing % 2) & (width % 2));
  return like(self, fill.repeat(left) + self.value + fill.repeat(missing - left));
};

const STR_METHODS: Record<string, Method<ValueOf<string>>> = {
  upper: (self) => like(self, self.value.toUpperCase()),
  lower: (self) => like(self, self.value.toLowerCase()),
  casefold: (self) => like(self, self.value.toLowerCase()),
  swapcase: (self) =>
    like(self, Array.from(self.value, (c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join("")),
  title: (self) => like(self, pyTitle(self.value)),
  capitalize: (self) => like(self, self.value.charAt(0).toUpperCase() + self.value.slice(1).toLowerCase()),
  strip: (self, args) => like(self, strip(self.value, textArg(args[0], "strip"), true, true)),
  lstrip: (self, args) => like(self, strip(self.value, textArg(args[0], "lstrip"), true, false)),
  rstrip: (self, args) => like(self, strip(self.value, textArg(args[0], "rstrip"), false, true)),
  startswith: (self, args) => bool(affixes(args[0] ?? NONE).some((p) => self.value.startsWith(p))),
  endswith: (self, args) => bool(affixes(args[0] ?? NONE).some((p) => self.value.endsWith(p))),
  removeprefix: (self, args) => {
    const p = str(args[0] ?? NONE);
    return like(self, self.value.startsWith(p) ? self.value.slice(p.length) : self.value);
  },
  removesuffix: (self, args) => {
    const p = str(args[0] ?? NONE);
    return like(self, p && self.value.endsWith(p) ? self.value.slice(0, -p.length) : self.value);
  },
  split: (self, args, kwargs) => {
    const [sep, maxsplit] = params("split", args, kwargs, ["sep", "maxsplit"]);
    return list(split(self.value, textArg(sep, "split"), intArg(maxsplit, -1), false).map((p) => like(self, p)));
  },
  rsplit: (self, args, kwargs) => {
    const [sep, maxsplit] = params("rsplit", args, kwargs, ["sep", "maxsplit"]);
    return list(split(self.value, textArg(sep, "rsplit"), intArg(maxsplit, -1), true).map((p) => like(self, p)));
  },
  splitlines: (self, args, kwargs) => {
    const [keepends] = params("splitlines", args, kwargs, ["keepends"]);
    return list(splitlines(self.value, keepends?.__bool__().value ?? false).map((p) => like(self, p)));
  },
  partition: (self, args) => {
    const sep = str(args[0] ?? NONE);
    const i = self.value.indexOf(sep);
    const parts = i < 0 ? [self.value, "", ""] : [self.value.slice(0, i), sep, self.value.slice(i + sep.length)];
    return tuple(parts.map((p) => like(self, p)));
  },
  rpartition: (self, args) => {
    const sep = str(args[0] ?? NONE);
    const i = self.value.lastIndexOf(sep);
    const parts = i < 0 ? ["", "", self.value] : [self.value.slice(0, i), sep, self.value.slice(i + sep.length)];
    return tuple(parts.map((p) => like(self, p)));
  },
  replace: (self, args, kwargs) => {
    const [old, replacement, count] = params("replace", args, kwargs, ["old", "new", "count"]);
    return like(self, replace(self.value, str(old ?? NONE), str(replacement ?? NONE), intArg(count, -1)));
  },
  format: (self, args, kwargs) => like(self, formatString(self.value, args, kwargs)),
  join: (self, args) => {
    const items = args[0] instanceof ArrayValue ? args[0].value : [];
    return like(
      self,
      items
        .map((item, i) => {
          if (!isString(item))
            throw new TypeError(`sequence item ${i}: expected str instance, ${typeName(item)} found`);
          return item.value;
        })
        .join(self.value),
    );
  },
  find: (self, args) => number(self.value.indexOf(str(args[0] ?? NONE), intArg(args[1], 0))),
  rfind: (self, args) => number(self.value.lastIndexOf(str(args[0] ?? NONE))),
  count: (self, args) => {
    const sub = str(args[0] ?? NONE);
    return number(sub === "" ? codePoints(self.value) + 1 : self.value.split(sub).length - 1);
  },
  isdigit: predicate((s) => /^\p{Nd}+$/u.test(s)),
  isnumeric: predicate((s) => /^\p{N}+$/u.test(s)),
  isalpha: predicate((s) => /^\p{L}+$/u.test(s)),
  isalnum: predicate((s) => /^[\p{L}\p{N}]+$/u.test(s)),
  isspace: predicate((s) => Array.from(s).every(isPySpace)),
  islower: predicate((s) => s === s.toLowerCase() && Array.from(s).some(cased)),
  isupper: predicate((s) => s === s.toUpperCase() && Array.from(s).some(cased)),
  ljust: (self, args) => pad(self, args, "right"),
  rjust: (self, args) => pad(self, args, "left"),
  center: (self, args) => pad(self, args, "center"),
  zfill: (self, args) => {
    const width = intArg(args[0], 0);
    const sign = /^[+-]/.test(self.value) ? self.value[0]! : "";
    const digits = self.value.slice(sign.length);
    return like(self, sign + digits.padStart(width - sign.length, "0"));
  },
};

/** Python's str.replace: `count` < 0 replaces all; an empty `old` inserts between characters. */
export function replace(s: string, old: string, replacement: string, count: number): string {
  if (count === 0) return s;
  if (old === "") {
    const chars = Array.from(s);
    const n = count < 0 ? chars.length + 1 : Math.min(count, chars.length + 1);
    let out = "";
    for (let i = 0; i < chars.length; i++) out += (i < n ? replacement : "") + chars[i];
    return out + (n > chars.length ? replacement : "");
  }
  const parts = s.split(old);
  if (count < 0 || parts.length - 1 <= count) return parts.join(replacement);
  return parts.slice(0, count + 1).join(replacement) + old + parts.slice(count + 1).join(old);
}

/** dict.items() as a list of (key, value) tuples. */
export function dictItems(map: Map<Key, Value>): Value {
  return list(Array.from(map, ([k, v]) => tuple([keyValue(k), v])));
}

const DICT_METHODS: Record<string, Method<ValueOf<Map<Key, Value>>>> = {
  get: (self, args) => {
    const key = dictKey(args[0] ?? NONE);
    return (key === undefined ? undefined : self.value.get(key)) ?? args[1] ?? NONE;
  },
  items: (self) => dictItems(self.value),
  keys: (self) => list(Array.from(self.value.keys(), keyValue)),
  values: (self) => list(Array.from(self.value.values())),
  copy: (self) => new ObjectValue(new Map(self.value)),
};

/** The methods of a tuple; a list has these and copy(). */
const TUPLE_METHODS: Record<string, Method<ValueOf<Value[]>>> = {
  count: (self, args) => number(self.value.filter((x) => equals(x, args[0] ?? NONE)).length),
  index: (self, args) => {
    const i = self.value.findIndex((x) => equals(x, args[0] ?? NONE));
    if (i < 0) throw new Error("ValueError: value is not in list");
    return number(i);
  },
};

const LIST_METHODS: Record<string, Method<ValueOf<Value[]>>> = {
  ...TUPLE_METHODS,
  copy: (self) => list(self.value.slice()),
};
