// Attribute and item lookup as Jinja2's sandbox does it. `obj.name` tries
// the Python attribute first (so `schema.items` is the dict method, not the
// key), then the item; `obj[key]` tries the item first, then the attribute.
// What neither finds is undefined, never an error: `none.x`, `none[0]`,
// `'abc'[5]` and `{}.x` are all undefined in Jinja2. (Looking inside an
// undefined value raises in Jinja2; here it is undefined too, so a template
// renders where Jinja2 would have refused, never the other way round.)
import { methodOf } from "./methods.ts";
import { dictKey } from "./python.ts";
import {
  ArrayValue,
  BooleanValue,
  IntegerValue,
  NamespaceValue,
  ObjectValue,
  UNDEFINED,
  isString,
  string,
  type Value,
} from "./values.ts";

/** `obj.name` */
export function getattr(obj: Value, name: string): Value {
  const method = methodOf(obj, name);
  if (method) return method;
  if (obj instanceof ObjectValue) return obj.value.get(name) ?? UNDEFINED;
  if (obj instanceof NamespaceValue) return obj.value.get(name) ?? UNDEFINED;
  return UNDEFINED;
}

/** `obj[key]` */
export function getitem(obj: Value, key: Value): Value {
  if (obj instanceof ObjectValue) {
    const k = dictKey(key);
    const item = k === undefined ? undefined : obj.value.get(k);
    if (item !== undefined) return item;
  } else if (obj instanceof NamespaceValue && isString(key)) {
    const item = obj.value.get(key.value);
    if (item !== undefined) return item;
  } else if (
    (obj instanceof ArrayValue || isString(obj)) &&
    (key instanceof IntegerValue || key instanceof BooleanValue)
  ) {
    return index(obj, Number(key.value));
  }
  return isString(key) ? getattr(obj, key.value) : UNDEFINED;
}

/** Python indexing: negative counts from the end; out of range is undefined. A str indexes code points. */
function index(obj: Value, i: number): Value {
  if (obj instanceof ArrayValue) {
    const item = obj.value[i < 0 ? obj.value.length + i : i];
    return item ?? UNDEFINED;
  }
  const s = obj.value as string;
  // Fast path for text without surrogate pairs, where UTF-16 units are code points.
  const chars = /[\ud800-\udfff]/.test(s) ? Array.from(s) : s;
  const ch = chars[i < 0 ? chars.length + i : i];
  return ch === undefined ? UNDEFINED : string(ch);
}
