// Jinja2's binary operators with Python's semantics. The library's versions
// differ where templates notice: `~` fails on none and undefined (Jinja2
// prints "None" and ""), `==` is JavaScript's loose equality, `'x' in none`
// and `none in [...]` fail, `-7 % 2` is -1, `'=' * 3` is unsupported, and
// `'safe'|safe + text` does not escape `text` as markupsafe does.
import { percentFormat } from "./format.ts";
import { compare, contains, equals, escapeHtml, str } from "./python.ts";
import {
  ArrayValue,
  FloatValue,
  MarkupValue,
  ObjectValue,
  TupleValue,
  bool,
  isNumeric,
  isString,
  isUndefined,
  list,
  number,
  numericValue,
  string,
  tuple,
  typeName,
  type Value,
} from "./values.ts";

/** Evaluates `left op right` for every operator but `and` / `or` (which short-circuit in the interpreter). */
export function binary(op: string, left: Value, right: Value): Value {
  switch (op) {
    case "==":
      return bool(equals(left, right));
    case "!=":
      return bool(!equals(left, right));
    case "in":
      return bool(contains(right, left));
    case "not in":
      return bool(!contains(right, left));
    case "~":
      return string(str(left) + str(right));
  }
  // Jinja2's Undefined raises when ordered or computed with.
  if (isUndefined(left) || isUndefined(right))
    throw new Error(`UndefinedError: an undefined value cannot be used with '${op}'`);
  switch (op) {
    case "<":
      return bool(compare(left, right) < 0);
    case "<=":
      return bool(compare(left, right) <= 0);
    case ">":
      return bool(compare(left, right) > 0);
    case ">=":
      return bool(compare(left, right) >= 0);
    case "+":
      return add(left, right);
    case "*":
      return multiply(left, right);
    default:
      return arithmetic(op, left, right);
  }
}

function add(left: Value, right: Value): Value {
  if (isString(left) && isString(right)) {
    // markupsafe: Markup + str escapes the str (either side), and the result is Markup.
    const leftSafe = isMarkup(left);
    const rightSafe = isMarkup(right);
    if (leftSafe || rightSafe) {
      const l = leftSafe ? left.value : escapeHtml(left.value);
      const r = rightSafe ? right.value : escapeHtml(right.value);
      return new MarkupValue(l + r);
    }
    return string(left.value + right.value);
  }
  if (
    left instanceof ArrayValue &&
    right instanceof ArrayValue &&
    left instanceof TupleValue === right instanceof TupleValue
  ) {
    const items = left.value.concat(right.value);
    return left instanceof TupleValue ? tuple(items) : list(items);
  }
  if (isNumeric(left) && isNumeric(right)) return numeric(numericValue(left) + numericValue(right), left, right);
  if (isString(left)) throw new TypeError(`can only concatenate str (not "${typeName(right)}") to str`);
  throw unsupported("+", left, right);
}

function multiply(left: Value, right: Value): Value {
  if (isNumeric(left) && isNumeric(right)) return numeric(numericValue(left) * numericValue(right), left, right);
  const [seq, times] = isNumeric(right) ? [left, right] : [right, left];
  if (isNumeric(times) && !(times instanceof FloatValue)) {
    const n = Math.max(0, numericValue(times));
    if (isString(seq)) return string(seq.value.repeat(n));
    if (seq instanceof ArrayValue) {
      const items = Array.from({ length: n }, () => seq.value).flat();
      return seq instanceof TupleValue ? tuple(items) : list(items);
    }
  }
  throw unsupported("*", left, right);
}

function arithmetic(op: string, left: Value, right: Value): Value {
  if (op === "%" && isString(left))
    return string(percentFormat(left.value, right, right instanceof ObjectValue ? right.value : undefined));
  if (!isNumeric(left) || !isNumeric(right)) throw unsupported(op, left, right);
  const a = numericValue(left);
  const b = numericValue(right);
  if (b === 0 && (op === "/" || op === "//" || op === "%")) throw new Error("ZeroDivisionError: division by zero");
  switch (op) {
    case "-":
      return numeric(a - b, left, right);
    case "/":
      return number(a / b, true);
    case "//":
      return numeric(Math.floor(a / b), left, right);
    case "%":
      // Python's remainder takes the divisor's sign.
      return numeric(a - b * Math.floor(a / b), left, right);
    case "**": {
      if (a === 0 && b < 0) throw new Error("ZeroDivisionError: 0.0 cannot be raised to a negative power");
      return number(a ** b, left instanceof FloatValue || right instanceof FloatValue || b < 0);
    }
    default:
      throw new SyntaxError(`Unknown operator "${op}"`);
  }
}

const isMarkup = (v: Value): boolean => v instanceof MarkupValue;

/** An int result stays int unless an operand was a float. */
const numeric = (n: number, left: Value, right: Value): Value =>
  number(n, left instanceof FloatValue || right instanceof FloatValue);

const unsupported = (op: string, left: Value, right: Value): TypeError =>
  new TypeError(`unsupported operand type(s) for ${op}: '${typeName(left)}' and '${typeName(right)}'`);
