// Jinja2's tests (`x is string`, `x is iterable`, `selectattr('type',
// 'equalto', 'code_interpreter')`) with Python's answers: a bool is a number,
// a dict and Jinja2's Undefined are iterable, `'1' is lower` is false.
import { compare, contains, equals } from "./python.ts";
import {
  ArrayValue,
  BooleanValue,
  FloatValue,
  FunctionValue,
  IntegerValue,
  MarkupValue,
  NullValue,
  ObjectValue,
  StringValue,
  UndefinedValue,
  isNumeric,
  isString,
  isUndefined,
  numericValue,
  typeName,
  type Value,
} from "./values.ts";

type Test = (value: Value, args: Value[]) => boolean;

const arg = (args: Value[], name: string): Value => {
  const a = args[0];
  if (a === undefined) throw new TypeError(`test '${name}' needs an argument`);
  return a;
};
const integer = (v: Value, name: string): number => {
  if (!isNumeric(v)) throw new TypeError(`test '${name}' needs a number, not ${typeName(v)}`);
  return numericValue(v);
};
// Python: anything with __iter__ (Jinja2's Undefined has one) is iterable; a sequence has
// __len__ and __getitem__: among template values, the same ones.
const iterableLike: Test = (v) =>
  v instanceof ArrayValue || v instanceof StringValue || v instanceof ObjectValue || v instanceof UndefinedValue;
const cased = (s: string) => Array.from(s).some((ch) => ch.toLowerCase() !== ch.toUpperCase());

const TESTS = new Map<string, Test>([
  ["defined", (v) => !isUndefined(v)],
  ["undefined", (v) => isUndefined(v)],
  ["none", (v) => v instanceof NullValue],
  ["boolean", (v) => v instanceof BooleanValue],
  ["true", (v) => v instanceof BooleanValue && v.value === true],
  ["false", (v) => v instanceof BooleanValue && v.value === false],
  ["number", (v) => isNumeric(v)],
  ["integer", (v) => v instanceof IntegerValue],
  ["float", (v) => v instanceof FloatValue],
  ["string", (v) => v instanceof StringValue],
  ["mapping", (v) => v instanceof ObjectValue],
  ["iterable", iterableLike],
  ["sequence", iterableLike],
  ["callable", (v) => v instanceof FunctionValue],
  ["escaped", (v) => v instanceof MarkupValue],
  ["odd", (v) => integer(v, "odd") % 2 !== 0],
  ["even", (v) => integer(v, "even") % 2 === 0],
  ["divisibleby", (v, args) => integer(v, "divisibleby") % integer(arg(args, "divisibleby"), "divisibleby") === 0],
  ["lower", (v) => isString(v) && v.value === v.value.toLowerCase() && cased(v.value)],
  ["upper", (v) => isString(v) && v.value === v.value.toUpperCase() && cased(v.value)],
  ["equalto", (v, args) => equals(v, arg(args, "equalto"))],
  ["eq", (v, args) => equals(v, arg(args, "eq"))],
  ["==", (v, args) => equals(v, arg(args, "=="))],
  ["ne", (v, args) => !equals(v, arg(args, "ne"))],
  ["!=", (v, args) => !equals(v, arg(args, "!="))],
  ["lt", (v, args) => compare(v, arg(args, "lt")) < 0],
  ["<", (v, args) => compare(v, arg(args, "<")) < 0],
  ["le", (v, args) => compare(v, arg(args, "le")) <= 0],
  ["<=", (v, args) => compare(v, arg(args, "<=")) <= 0],
  ["gt", (v, args) => compare(v, arg(args, "gt")) > 0],
  ["greaterthan", (v, args) => compare(v, arg(args, "greaterthan")) > 0],
  [">", (v, args) => compare(v, arg(args, ">")) > 0],
  ["ge", (v, args) => compare(v, arg(args, "ge")) >= 0],
  [">=", (v, args) => compare(v, arg(args, ">=")) >= 0],
  ["lessthan", (v, args) => compare(v, arg(args, "lessthan")) < 0],
  ["in", (v, args) => contains(arg(args, "in"), v)],
  [
    "sameas",
    (v, args) => {
      const other = arg(args, "sameas");
      return (
        v === other ||
        ((v instanceof NullValue || v instanceof BooleanValue) && v.type === other.type && v.value === other.value)
      );
    },
  ],
]);

/** Runs the test `name`; an unknown test is an error, as in Jinja2. */
export function runTest(name: string, value: Value, args: Value[] = []): boolean {
  const test = TESTS.get(name);
  if (!test) throw new Error(`No test named '${name}'.`);
  return test(value, args);
}
