// The runtime value classes of @huggingface/jinja, obtained from the library
// at load (it exports its Interpreter and Environment but not these), plus the
// one value it lacks: Markup, the string Jinja2's `safe` filter returns.
//
// The adapter builds and inspects values through these very classes, so the
// library's own code (macros, calls, `set`, namespaces) and ours exchange
// values freely.
import { Environment, Interpreter, parse, tokenize } from "@huggingface/jinja";

/** Any runtime value: `type` names its class ("StringValue", ...), `value` holds the JavaScript data. */
export interface Value {
  type: string;
  value: unknown;
  __bool__(): { value: boolean };
  toString(): string;
}

export interface ValueOf<T> extends Value {
  value: T;
}

/** A dict key: Jinja2 dicts may have integer keys (`{0: 'a'}`); the library's Map holds them as numbers. */
export type Key = string | number;
export type FunctionImpl = (args: Value[], scope: Environment) => Value;

interface ValueClass<T> {
  new (value: T): ValueOf<T>;
}

const env = new Environment();
const classOf = <T>(value: Value): ValueClass<T> => value.constructor as ValueClass<T>;
/** Evaluates one expression with the library's own interpreter, to obtain the classes it only makes itself. */
const evaluate = (expression: string): Value =>
  new Interpreter(env).evaluate(parse(tokenize(`{{ ${expression} }}`)).body[0], env) as Value;

export const IntegerValue = classOf<number>(env.set("i", 1));
export const FloatValue = classOf<number>(env.set("f", 0.5));
export const StringValue = classOf<string>(env.set("s", ""));
export const BooleanValue = classOf<boolean>(env.set("b", true));
export const NullValue = classOf<null>(env.set("n", null));
export const UndefinedValue = classOf<undefined>(env.set("u", undefined));
export const ArrayValue = classOf<Value[]>(env.set("a", []));
export const ObjectValue = classOf<Map<Key, Value>>(env.set("o", {}));
export const FunctionValue = classOf<FunctionImpl>(env.set("fn", () => null));
export const TupleValue = classOf<Value[]>(evaluate("(1, 2)"));
export const NamespaceValue = classOf<Map<string, Value>>(evaluate("namespace()"));
let kwargsValue: Value | undefined;
env.setVariable("capture", new FunctionValue((args) => (kwargsValue = args[0]!)) as never);
evaluate("capture(k=1)");
/** The library's carrier for keyword arguments: the last argument of a call that has any. */
export const KeywordArgumentsValue = classOf<Map<string, Value>>(kwargsValue!);

/**
 * markupsafe.Markup: a string marked safe. Jinja2's `safe` filter returns
 * one, and `Markup + str` escapes the plain string (HTML entities), which
 * real templates rely on without knowing it (Functionary v3.1).
 */
export class MarkupValue extends StringValue {}

/**
 * A method the sandbox refuses (`list.append`): Jinja2's unsafe undefined,
 * which prints as "" and is not defined, but raises when called.
 */
export class UnsafeMethodValue extends FunctionValue {}

export const UNDEFINED: Value = new UndefinedValue(undefined);
export const NONE: Value = new NullValue(null);
const TRUE: Value = new BooleanValue(true);
const FALSE: Value = new BooleanValue(false);

export const bool = (b: boolean): Value => (b ? TRUE : FALSE);
export const string = (s: string): Value => new StringValue(s);
export const list = (items: Value[]): Value => new ArrayValue(items);
export const tuple = (items: Value[]): Value => new TupleValue(items);
export const fn = (impl: FunctionImpl): Value => new FunctionValue(impl);
/** A Python number: ints stay IntegerValue, anything with a fraction or marked float is FloatValue. */
export const number = (n: number, float = false): Value =>
  float || !Number.isInteger(n) ? new FloatValue(n) : new IntegerValue(n);

/** A dict key as a value: integer keys come back as ints. */
export const keyValue = (key: Key): Value => (typeof key === "number" ? number(key) : string(key));

export const isString = (v: Value): v is ValueOf<string> => v instanceof StringValue;
/** int, float or bool: Python's numbers (bool is an int subclass). */
export const isNumeric = (v: Value): v is ValueOf<number | boolean> =>
  v instanceof IntegerValue || v instanceof FloatValue || v instanceof BooleanValue;
/** Jinja2's Undefined, and the unsafe undefined the sandbox gives for a refused method. */
export const isUndefined = (v: Value): boolean => v instanceof UndefinedValue || v instanceof UnsafeMethodValue;
export const numericValue = (v: ValueOf<number | boolean>): number => Number(v.value);

/** Splits a call's arguments into positional ones and the keyword map the library appends last. */
export function splitArguments(args: Value[]): [Value[], Map<string, Value>] {
  const last = args[args.length - 1];
  if (last instanceof KeywordArgumentsValue) return [args.slice(0, -1), last.value];
  return [args, new Map()];
}

/** Python's type name of a value, for error messages that read like Jinja2's. */
export function typeName(v: Value): string {
  if (v instanceof BooleanValue) return "bool";
  if (v instanceof IntegerValue) return "int";
  if (v instanceof FloatValue) return "float";
  if (v instanceof StringValue) return v instanceof MarkupValue ? "Markup" : "str";
  if (v instanceof NullValue) return "NoneType";
  if (v instanceof UndefinedValue) return "Undefined";
  if (v instanceof TupleValue) return "tuple";
  if (v instanceof ArrayValue) return "list";
  if (v instanceof ObjectValue) return "dict";
  if (v instanceof NamespaceValue) return "Namespace";
  if (v instanceof FunctionValue) return "function";
  return v.type;
}
