// Python's string formatting. str.format, which templates call as
// `'<tool_call{}>'.format(x)` (tencent Hy3): automatic `{}`, numbered `{0}`
// and named `{name}` fields, `!s` / `!r` conversions and the common format
// specs ([[fill]align][sign][0][width][.precision][s|d|f|%]); a field that
// looks inside its value (`{0.name}`, `{0[key]}`) is refused. And the
// printf-style `'%s' % x` with the `format` filter.
import { floatRepr, repr, str } from "./python.ts";
import { FloatValue, TupleValue, isNumeric, numericValue, string, typeName, type Key, type Value } from "./values.ts";

export function formatString(template: string, args: Value[], kwargs: Map<string, Value>): string {
  let out = "";
  let auto: number | undefined;
  let manual = false;
  let i = 0;
  while (i < template.length) {
    const ch = template[i]!;
    if (ch === "}") {
      if (template[i + 1] !== "}") throw new Error("Single '}' encountered in format string");
      out += "}";
      i += 2;
      continue;
    }
    if (ch !== "{") {
      out += ch;
      i++;
      continue;
    }
    if (template[i + 1] === "{") {
      out += "{";
      i += 2;
      continue;
    }
    const end = template.indexOf("}", i);
    if (end < 0) throw new Error("Single '{' encountered in format string");
    const field = template.slice(i + 1, end);
    i = end + 1;

    const [, name = "", conversion, spec = ""] = /^([^!:]*)(?:!([rsa]))?(?::(.*))?$/s.exec(field) ?? [];
    const [, head = "", rest = ""] = /^([^.[]*)(.*)$/s.exec(name) ?? [];
    if (rest !== "") throw new Error(`Unsupported format field '{${field}}'`);
    let value: Value | undefined;
    if (head === "") {
      if (manual) throw new Error("cannot switch from manual field specification to automatic field numbering");
      auto = (auto ?? -1) + 1;
      value = args[auto];
    } else if (/^\d+$/.test(head)) {
      if (auto !== undefined)
        throw new Error("cannot switch from automatic field numbering to manual field specification");
      manual = true;
      value = args[Number(head)];
    } else {
      value = kwargs.get(head);
    }
    if (value === undefined)
      throw new Error(`Replacement index ${head || auto} out of range for positional args tuple`);
    const shown =
      conversion === "r" || conversion === "a" ? string(repr(value)) : conversion === "s" ? string(str(value)) : value;
    out += formatValue(shown, spec);
  }
  return out;
}

/** Python's format(value, spec) for the specs templates use. */
function formatValue(value: Value, spec: string): string {
  if (spec === "") return str(value);
  const m = /^(?:(.)?([<>^=]))?([+\- ]?)(0)?(\d+)?(?:\.(\d+))?([sdf%])?$/s.exec(spec);
  if (!m) throw new Error(`Unsupported format specifier '${spec}'`);
  const [, fillChar, align, sign = "", zero, widthText, precisionText, kind] = m;
  let text: string;
  if (isNumeric(value) && kind !== "s") {
    const n = numericValue(value);
    const precision = precisionText === undefined ? undefined : Number(precisionText);
    if (kind === "f" || kind === "%")
      text = (kind === "%" ? n * 100 : n).toFixed(precision ?? 6) + (kind === "%" ? "%" : "");
    else if (kind === "d") text = String(Math.trunc(n));
    else
      text =
        precision === undefined ? (value instanceof FloatValue ? floatRepr(n) : String(n)) : n.toPrecision(precision);
    if (sign === "+" && n >= 0) text = `+${text}`;
    else if (sign === " " && n >= 0) text = ` ${text}`;
  } else {
    if (kind !== undefined && kind !== "s") throw new Error(`Unknown format code '${kind}' for object of type 'str'`);
    text = str(value);
    if (precisionText !== undefined) text = Array.from(text).slice(0, Number(precisionText)).join("");
  }
  const width = widthText === undefined ? 0 : Number(widthText);
  const pad = width - Array.from(text).length;
  if (pad <= 0) return text;
  const fill = fillChar ?? (zero ? "0" : " ");
  const how = align ?? (zero ? "=" : isNumeric(value) ? ">" : "<");
  if (how === "<") return text + fill.repeat(pad);
  if (how === ">") return fill.repeat(pad) + text;
  if (how === "^") return fill.repeat(Math.floor(pad / 2)) + text + fill.repeat(Math.ceil(pad / 2));
  const signed = /^[+\- ]/.test(text) ? 1 : 0;
  return text.slice(0, signed) + fill.repeat(pad) + text.slice(signed);
}

/**
 * Python's printf-style `text % values` (also the `format` filter): `values`
 * is a tuple of positional values, a dict for `%(name)s`, or one value.
 */
export function percentFormat(template: string, values: Value, named: Map<Key, Value> | undefined): string {
  const positional = values instanceof TupleValue ? values.value : [values];
  let next = 0;
  const out = template.replace(
    /%(?:\(([^)]*)\))?([-+ 0#]*)(\d+)?(?:\.(\d+))?([sradiufFeEgGxXoc%])/g,
    (_, key: string | undefined, flags: string, width, precision, kind: string) => {
      if (kind === "%") return "%";
      let value: Value | undefined;
      if (key !== undefined) {
        if (!named) throw new TypeError("format requires a mapping");
        value = named.get(key);
        if (value === undefined) throw new Error(`KeyError: '${key}'`);
      } else {
        value = positional[next++];
        if (value === undefined) throw new TypeError("not enough arguments for format string");
      }
      const text = percentField(value, kind, precision === undefined ? undefined : Number(precision), flags);
      const size = width === undefined ? 0 : Number(width);
      if (text.length >= size) return text;
      if (flags.includes("-")) return text.padEnd(size);
      if (flags.includes("0") && "diufFeEgGxXo".includes(kind)) {
        const signed = /^[+\- ]/.test(text) ? 1 : 0;
        return text.slice(0, signed) + text.slice(signed).padStart(size - signed, "0");
      }
      return text.padStart(size);
    },
  );
  if (!named && next < positional.length) throw new TypeError("not all arguments converted during string formatting");
  return out;
}

function percentField(value: Value, kind: string, precision: number | undefined, flags: string): string {
  if (kind === "s") return precision === undefined ? str(value) : Array.from(str(value)).slice(0, precision).join("");
  if (kind === "r" || kind === "a") return repr(value);
  if (kind === "c") return isNumeric(value) ? String.fromCodePoint(numericValue(value)) : str(value);
  if (!isNumeric(value)) throw new TypeError(`%${kind} format: a real number is required, not ${typeName(value)}`);
  const n = numericValue(value);
  const sign = n < 0 || Object.is(n, -0) ? "-" : flags.includes("+") ? "+" : flags.includes(" ") ? " " : "";
  const a = Math.abs(n);
  let body: string;
  if ("diu".includes(kind)) body = String(Math.trunc(a));
  else if (kind === "x" || kind === "X" || kind === "o") {
    body = Math.trunc(a).toString(kind === "o" ? 8 : 16);
    if (kind === "X") body = body.toUpperCase();
  } else if (kind === "f" || kind === "F") body = a.toFixed(precision ?? 6);
  else if (kind === "e" || kind === "E") {
    body = a.toExponential(precision ?? 6).replace(/e([+-])(\d)$/, "e$10$2");
    if (kind === "E") body = body.toUpperCase();
  } else {
    // %g: precision significant digits, trailing zeros dropped
    body = String(Number(a.toPrecision(precision === 0 ? 1 : (precision ?? 6))));
    if (kind === "G") body = body.toUpperCase();
  }
  return sign + body;
}
