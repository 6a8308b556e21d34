// Binds a call's arguments to named parameters the way Python does, for the
// filters and methods the adapter implements (`indent(2, first=true)`).
import type { Value } from "./values.ts";

/**
 * Positional arguments fill `names` in order, keyword arguments by name; a
 * parameter given neither is undefined. Too many arguments, or an unknown or
 * repeated keyword, is a TypeError as in Python.
 */
export function params(
  fnName: string,
  args: Value[],
  kwargs: Map<string, Value>,
  names: readonly string[],
): (Value | undefined)[] {
  if (args.length > names.length) {
    throw new TypeError(
      `${fnName}() takes at most ${names.length} argument${names.length === 1 ? "" : "s"} (${args.length} given)`,
    );
  }
  const bound: (Value | undefined)[] = names.map((_, i) => args[i]);
  for (const [key, value] of kwargs) {
    const i = names.indexOf(key);
    if (i < 0) throw new TypeError(`${fnName}() got an unexpected keyword argument '${key}'`);
    if (bound[i] !== undefined) throw new TypeError(`${fnName}() got multiple values for argument '${key}'`);
    bound[i] = value;
  }
  return bound;
}
