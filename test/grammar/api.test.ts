import { describe, expect, test } from "bun:test";
import { SchemaError, checkGbnf, compileJsonSchema, jsonObjectGrammar, parseGbnf } from "../../grammar/index.ts";
import { Recognizer } from "./recognizer.ts";

describe("jsonObjectGrammar", () => {
  const g = parseGbnf(jsonObjectGrammar());
  const rec = new Recognizer(g);

  test("is clean", () => {
    expect(checkGbnf(g)).toEqual([]);
  });

  test("accepts objects only", () => {
    for (const v of [{}, { a: 1 }, { a: { b: [1, 2, { c: null }] }, 'k"ey': "v\n" }]) {
      expect(rec.accepts(JSON.stringify(v))).toBe(true);
      expect(rec.accepts(JSON.stringify(v, null, 2))).toBe(true);
      expect(rec.accepts(JSON.stringify(v, null, "\t"))).toBe(true);
    }
    for (const t of ["[]", "1", '"s"', "null", "{", '{"a":}', "{a:1}", '{"a":1,}', "{'a':1}"])
      expect(rec.accepts(t)).toBe(false);
  });

  test("whitespace is bounded", () => {
    expect(rec.accepts(`{${" ".repeat(20)}}`)).toBe(true);
    expect(rec.accepts(`{\n${" ".repeat(20)}}`)).toBe(true);
    expect(rec.accepts(`{${" ".repeat(21)}}`)).toBe(false);
    expect(rec.accepts(`{\n\n}`)).toBe(false);
    expect(rec.accepts(`{ \n}`)).toBe(false);
  });

  test("strings must escape quotes, backslashes and control characters", () => {
    expect(rec.accepts('{"a":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9"}')).toBe(true);
    expect(rec.accepts('{"a":"\n"}')).toBe(false);
    expect(rec.accepts('{"a":"\t"}')).toBe(false);
    expect(rec.accepts('{"a":"\\x"}')).toBe(false);
    expect(rec.accepts('{"a":"\\u12"}')).toBe(false);
  });
});

describe("compileJsonSchema", () => {
  test("returns GBNF text, the AST and the ignored list", () => {
    const r = compileJsonSchema({
      type: "object",
      properties: { a: { type: "integer", minimum: 1, maximum: 3 } },
      required: ["a"],
    });
    expect(r.gbnf.startsWith("root ::= ")).toBe(true);
    expect(parseGbnf(r.gbnf)).toEqual(r.grammar);
    expect(r.ignored).toEqual([]);
    const rec = new Recognizer(r.grammar);
    expect(rec.accepts('{"a":2}')).toBe(true);
    expect(rec.accepts('{"a":4}')).toBe(false);
  });

  test("SchemaError carries keyword, path and a 400-ready message", () => {
    let err: SchemaError | undefined;
    try {
      compileJsonSchema({ type: "object", properties: { a: { type: "string", pattern: "(?=x)" } } });
    } catch (e) {
      err = e as SchemaError;
    }
    expect(err).toBeInstanceOf(SchemaError);
    expect(err!.keyword).toBe("pattern");
    expect(err!.path).toBe("/properties/a/pattern");
    expect(err!.kind).toBe("unsupported");
    expect(err!.message).toMatch(
      /^constraint unsatisfiable: lookahead .* \(keyword 'pattern' at \/properties\/a\/pattern\)$/,
    );
  });

  test("strict: false lists what it ignored instead of failing", () => {
    const r = compileJsonSchema(
      { type: "array", items: { type: "integer", multipleOf: 2 }, uniqueItems: true },
      { strict: false },
    );
    expect(r.ignored.sort()).toEqual(["/items/multipleOf", "/uniqueItems"]);
  });

  test("non-schema input is refused", () => {
    expect(() => compileJsonSchema(42)).toThrow(SchemaError);
    expect(() => compileJsonSchema("string")).toThrow(SchemaError);
  });

  test("rule names are legal and stable", () => {
    const schema = {
      type: "object",
      properties: { "weird key!": { type: "string", maxLength: 2 }, 名前: { type: "integer", minimum: 0, maximum: 5 } },
      required: ["weird key!", "名前"],
    };
    const a = compileJsonSchema(schema).gbnf;
    expect(compileJsonSchema(schema).gbnf).toBe(a);
    for (const r of parseGbnf(a).rules) expect(r.name).toMatch(/^[a-zA-Z0-9-]+$/);
  });
});

// Issue #34 (2): a random-weight model wrote a 190-digit integer into a
// forced call and ran to max_tokens. Numbers no bound limits stop at 16
// integer and 16 fraction digits (3 exponent digits); bounds that need more
// digits get them.
describe("numbers have bounded digits", () => {
  const rec = (schema: object) => new Recognizer(parseGbnf(compileJsonSchema(schema).gbnf));
  const digits = (n: number) => `1${"2".repeat(n - 1)}`;

  test("an unbounded integer has at most 16 digits", () => {
    const r = rec({ type: "integer" });
    expect(r.accepts(digits(16))).toBe(true);
    expect(r.accepts(`-${digits(16)}`)).toBe(true);
    expect(r.accepts(digits(17))).toBe(false);
    expect(r.accepts(`-${digits(17)}`)).toBe(false);
  });

  test("an unbounded number: 16 integer digits, 16 fraction digits, 3 exponent digits", () => {
    const r = rec({ type: "number" });
    expect(r.accepts(`${digits(16)}.${digits(16)}e-308`)).toBe(true);
    expect(r.accepts(`${digits(17)}`)).toBe(false);
    expect(r.accepts(`1.${digits(17)}`)).toBe(false);
    expect(r.accepts(`1e${digits(4)}`)).toBe(false);
  });

  test("numbers inside an untyped value are bounded too", () => {
    const r = rec({ type: "object" });
    expect(r.accepts(`{"a":${digits(16)}}`)).toBe(true);
    expect(r.accepts(`{"a":${digits(17)}}`)).toBe(false);
  });

  test("one bound: the open side is bounded; the bound's own digits are kept", () => {
    const min = rec({ type: "integer", minimum: 5 });
    expect(min.accepts(digits(16))).toBe(true);
    expect(min.accepts(digits(17))).toBe(false);
    const max = rec({ type: "integer", maximum: -5 });
    expect(max.accepts(`-${digits(16)}`)).toBe(true);
    expect(max.accepts(`-${digits(17)}`)).toBe(false);
    const big = rec({ type: "integer", minimum: 10 ** 19 });
    expect(big.accepts("10000000000000000000")).toBe(true);
    expect(big.accepts("99999999999999999999")).toBe(true);
    expect(big.accepts("100000000000000000000")).toBe(false);
    const num = rec({ type: "number", minimum: 0 });
    expect(num.accepts(`${digits(16)}.${digits(16)}`)).toBe(true);
    expect(num.accepts(`1.${digits(17)}`)).toBe(false);
    expect(num.accepts(digits(17))).toBe(false);
  });

  test("both bounds: fraction digits stop at 16 unless a bound has more", () => {
    const unit = rec({ type: "number", minimum: 0, maximum: 1 });
    expect(unit.accepts(`0.${"3".repeat(16)}`)).toBe(true);
    expect(unit.accepts(`0.${"3".repeat(17)}`)).toBe(false);
    const fine = rec({ type: "number", minimum: 0, maximum: 1e-20 });
    expect(fine.accepts("0.00000000000000000001")).toBe(true);
  });
});
