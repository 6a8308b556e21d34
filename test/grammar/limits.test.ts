// The compile budget (grammar/limits.ts): every limit refuses what exceeds
// it with a SchemaError (kind "limit") or a GBNF problem naming the limit and,
// for schemas, the JSON pointer of the keyword; what stays within it compiles.
import { describe, expect, test } from "bun:test";
import {
  CompileBudget,
  DEFAULT_LIMITS,
  GbnfSyntaxError,
  SchemaError,
  checkGbnfText,
  compileJsonSchema,
  gbnfErrors,
  parseGbnf,
  type CompileOptions,
  type GbnfProblem,
} from "../../grammar/index.ts";
import { agentTools, chainGbnf, exponentialGbnf, wideToolSchema } from "./hostile.ts";
import { Recognizer } from "./recognizer.ts";

function refusal(schema: unknown, opts: CompileOptions = {}): SchemaError {
  try {
    compileJsonSchema(schema, opts);
  } catch (e) {
    if (e instanceof SchemaError) return e;
    throw e;
  }
  throw new Error("the schema compiled");
}

/** keyword, pointer, kind and limit of a refusal, for one toEqual. */
const summary = (e: SchemaError) => ({ keyword: e.keyword, path: e.path, kind: e.kind, limit: e.limit });

function gbnfProblems(src: string, limits = {}): GbnfProblem[] {
  return checkGbnfText(src, { limits }).errors;
}

const strings = (n: number) => Array.from({ length: n }, (_, i) => `s${i}`);

describe("maxCount: lengths and item counts", () => {
  test("minLength 1e308 is refused at its keyword", () => {
    const e = refusal({ type: "string", minLength: 1e308 });
    expect(summary(e)).toEqual({ keyword: "minLength", path: "/minLength", kind: "limit", limit: "maxCount" });
    expect(e.message).toContain("maxCount");
  });

  test("maxLength, minItems and maxItems beyond it, nested", () => {
    expect(summary(refusal({ type: "object", properties: { a: { type: "string", maxLength: 2 ** 31 } } }))).toEqual({
      keyword: "maxLength",
      path: "/properties/a/maxLength",
      kind: "limit",
      limit: "maxCount",
    });
    expect(summary(refusal({ type: "array", minItems: 1e12 }))).toEqual({
      keyword: "minItems",
      path: "/minItems",
      kind: "limit",
      limit: "maxCount",
    });
    expect(summary(refusal({ type: "array", items: { type: "array", maxItems: 2 ** 40 } }))).toEqual({
      keyword: "maxItems",
      path: "/items/maxItems",
      kind: "limit",
      limit: "maxCount",
    });
  });

  test("a regex quantifier beyond it is refused at the pattern", () => {
    const e = refusal({ type: "object", properties: { p: { type: "string", pattern: "^a{3000000000}$" } } });
    expect({ keyword: e.keyword, path: e.path }).toEqual({ keyword: "pattern", path: "/properties/p/pattern" });
    expect(e.message).toContain("maxCount");
  });

  test("the largest counts compile to a small grammar llama.cpp can load", () => {
    for (const schema of [
      { type: "string", maxLength: DEFAULT_LIMITS.maxCount },
      { type: "string", minLength: 5_000_000, maxLength: DEFAULT_LIMITS.maxCount },
      { type: "array", items: { type: "integer" }, minItems: 3, maxItems: DEFAULT_LIMITS.maxCount },
      { type: "string", pattern: "^[a-z]{0,100000000}$" },
    ]) {
      const { gbnf } = compileJsonSchema(schema);
      expect(gbnf.length).toBeLessThan(4000);
      expect(gbnfErrors(parseGbnf(gbnf))).toEqual([]);
    }
  });

  test("counts are still exact: lengths just inside and outside the bounds", () => {
    const cases: [number, number][] = [
      [0, 100],
      [5, 1025],
      [40, 40],
      [1000, 1100],
      [33, 2100],
    ];
    for (const [min, max] of cases) {
      const rec = new Recognizer(parseGbnf(compileJsonSchema({ type: "string", minLength: min, maxLength: max }).gbnf));
      const str = (n: number) => JSON.stringify("a".repeat(n));
      for (const n of [min, max, (min + max) >> 1])
        expect({ min, max, n, ok: rec.accepts(str(n)) }).toEqual({ min, max, n, ok: true });
      for (const n of [min - 1, max + 1])
        if (n >= 0) expect({ min, max, n, ok: rec.accepts(str(n)) }).toEqual({ min, max, n, ok: false });
    }
    const arrays = new Recognizer(
      parseGbnf(compileJsonSchema({ type: "array", items: { const: 1 }, minItems: 3, maxItems: 70 }).gbnf),
    );
    const arr = (n: number) => JSON.stringify(Array(n).fill(1));
    expect([2, 3, 35, 70, 71].map((n) => arrays.accepts(arr(n)))).toEqual([false, true, true, true, false]);
  });
});

describe("maxEntries: entries in one keyword", () => {
  test("enum, properties, required, prefixItems and anyOf over the limit, at their keyword", () => {
    const n = DEFAULT_LIMITS.maxEntries + 1;
    const props = Object.fromEntries(strings(n).map((k) => [k, { type: "integer" }]));
    const cases: [unknown, string, string][] = [
      [{ enum: strings(n) }, "enum", "/enum"],
      [
        { type: "object", properties: { x: { type: "object", properties: props } } },
        "properties",
        "/properties/x/properties",
      ],
      [{ type: "object", required: strings(n) }, "required", "/required"],
      [{ type: "array", prefixItems: strings(n).map(() => ({ type: "null" })) }, "prefixItems", "/prefixItems"],
      [{ anyOf: strings(n).map((s) => ({ const: s })) }, "anyOf", "/anyOf"],
    ];
    for (const [schema, keyword, path] of cases) {
      expect(summary(refusal(schema))).toEqual({ keyword, path, kind: "limit", limit: "maxEntries" });
    }
  });

  test("an enum of exactly the limit compiles, and its grammar passes the cost checks", () => {
    const { gbnf } = compileJsonSchema({
      type: "object",
      properties: { pick: { enum: strings(DEFAULT_LIMITS.maxEntries) } },
      required: ["pick"],
    });
    expect(gbnfErrors(parseGbnf(gbnf))).toEqual([]);
  });
});

describe("maxMerged, maxBranches, maxWork, maxMillis: the work of expanding a schema", () => {
  test("allOf over $refs merging more than maxMerged schemas", () => {
    const defs: Record<string, unknown> = { leaf: { type: "string" } };
    for (let i = 0; i < 10; i++)
      defs[`d${i}`] = {
        allOf: [
          { $ref: i === 9 ? "#/$defs/leaf" : `#/$defs/d${i + 1}` },
          { $ref: i === 9 ? "#/$defs/leaf" : `#/$defs/d${i + 1}` },
        ],
      };
    const e = refusal({ $defs: defs, $ref: "#/$defs/d0" });
    expect({ kind: e.kind, limit: e.limit, keyword: e.keyword }).toEqual({
      kind: "limit",
      limit: "maxMerged",
      keyword: "allOf",
    });
    expect(e.path).toMatch(/^\/\$defs\/d\d\/allOf$/);
    // The same with room for 2^10 merges compiles.
    expect(compileJsonSchema({ $defs: defs, $ref: "#/$defs/d0" }, { limits: { maxMerged: 4096 } }).gbnf).toContain(
      "root ::=",
    );
  });

  test("anyOf distributed over sibling anyOfs beyond maxBranches", () => {
    const schema = {
      type: "string",
      allOf: Array.from({ length: 12 }, (_, i) => ({ anyOf: [{ minLength: i }, { maxLength: 100 - i }] })),
    };
    const e = refusal(schema);
    expect({ kind: e.kind, limit: e.limit, keyword: e.keyword }).toEqual({
      kind: "limit",
      limit: "maxBranches",
      keyword: "anyOf",
    });
  });

  test("maxWork stops a compilation after that many steps, wherever it is", () => {
    const e = refusal(wideToolSchema(60), { limits: { maxWork: 300 } });
    expect({ kind: e.kind, limit: e.limit }).toEqual({ kind: "limit", limit: "maxWork" });
    // Blamed on the subschema being compiled when the steps ran out.
    expect(e.path).toMatch(/^\/properties\/field_\d+/);
    expect(e.message).toContain("maxWork");
  });

  test("maxMillis is a wall-clock backstop", () => {
    const e = refusal(wideToolSchema(60), { limits: { maxMillis: -1 } });
    expect({ kind: e.kind, limit: e.limit }).toEqual({ kind: "limit", limit: "maxMillis" });
  });

  test("strict: false cannot skip a limit", () => {
    expect(refusal({ type: "string", minLength: 1e308 }, { strict: false }).limit).toBe("maxCount");
    expect(refusal({ enum: strings(5000) }, { strict: false }).limit).toBe("maxEntries");
  });

  test("a shared budget meters several compilations together", () => {
    const budget = new CompileBudget({ maxWork: 2000 });
    compileJsonSchema(wideToolSchema(8), { budget });
    const first = budget.spent;
    expect(first).toBeGreaterThan(0);
    compileJsonSchema(wideToolSchema(8), { budget });
    expect(budget.spent).toBeGreaterThan(first);
    let err: unknown;
    try {
      for (let i = 0; i < 10; i++) compileJsonSchema(wideToolSchema(8), { budget });
    } catch (e) {
      err = e;
    }
    expect(err instanceof SchemaError && err.limit).toBe("maxWork");
  });
});

describe("maxRules and maxGbnfBytes: the size of what is made", () => {
  test("a compiled grammar over the rule or byte limit", () => {
    const rules = refusal(wideToolSchema(60), { limits: { maxRules: 20 } });
    expect({ kind: rules.kind, limit: rules.limit }).toEqual({ kind: "limit", limit: "maxRules" });
    const bytes = refusal(wideToolSchema(60), { limits: { maxGbnfBytes: 3000 } });
    expect({ kind: bytes.kind, limit: bytes.limit }).toEqual({ kind: "limit", limit: "maxGbnfBytes" });
  });

  test("raw GBNF over the byte or rule limit is refused before it is parsed", () => {
    const tooBig = `root ::= ${'"a" '.repeat(DEFAULT_LIMITS.maxGbnfBytes / 4)}(`;
    expect(gbnfProblems(tooBig).map((p) => [p.code, p.limit])).toEqual([["grammar-size", "maxGbnfBytes"]]);
    // Definitions are counted outside literals, classes and comments; the syntax error at the end is never reached.
    const heads = (n: number) => `${Array.from({ length: n }, (_, i) => `r${i} ::= "::=" [:] # ::=`).join("\n")}\n(`;
    expect(gbnfProblems(heads(20), { maxRules: 10 }).map((p) => [p.code, p.limit])).toEqual([
      ["grammar-size", "maxRules"],
    ]);
    expect(() => gbnfProblems(heads(10), { maxRules: 10 })).toThrow(GbnfSyntaxError);
  });

  test("raw GBNF that llama.cpp would expand into too many rules or elements", () => {
    const rules = gbnfProblems('root ::= x x\nx ::= "a"{0,1000}\n', { maxRules: 500 });
    expect(rules.map((p) => [p.code, p.limit])).toEqual([["grammar-size", "maxRules"]]);
    expect(gbnfProblems(chainGbnf(10_000)).map((p) => p.limit)).toEqual(["maxRules"]);
    const elements = gbnfProblems(`root ::= "${"a".repeat(1500)}"{1000}\n`);
    expect(elements.map((p) => [p.code, p.limit])).toEqual([["grammar-size", "maxElements"]]);
  });
});

describe("maxStacks, maxChain, maxGrowth: one step of llama.cpp's grammar engine", () => {
  test("alternatives that multiply parse stacks", () => {
    const p = gbnfProblems(exponentialGbnf(30));
    expect(p.map((x) => [x.code, x.limit])).toEqual([["parse-stacks", "maxStacks"]]);
    // The rule named is where the count first passes the limit, deep in the chain, not the root.
    expect(p[0]!.message).toMatch(/^rule 'r1\d' /);
    expect(gbnfProblems(exponentialGbnf(10))).toEqual([]);
    // After a character, not only at the start; and through empty alternatives.
    expect(
      gbnfProblems(`root ::= "x" r0\n${exponentialGbnf(30).split("\n").slice(1).join("\n")}`).map((x) => x.limit),
    ).toEqual(["maxStacks"]);
    expect(
      gbnfProblems(exponentialGbnf(30).replace('"a"', '""').replace("root ::= r0", 'root ::= r0 "z"')).map(
        (x) => x.limit,
      ),
    ).toEqual(["maxStacks"]);
  });

  test("alternatives that match the same text multiply the stacks of the next character", () => {
    const ambiguous = (n: number) => `root ::= (${Array(n).fill('"x"').join(" | ")})*\n`;
    expect(gbnfProblems(ambiguous(100)).map((p) => [p.code, p.limit])).toEqual([["parse-stacks", "maxStackPairs"]]);
    expect(gbnfProblems(ambiguous(30))).toEqual([]);
  });

  test("a schema whose grammar is over a cost limit is refused by the same checks", () => {
    const e = refusal({ enum: Array.from({ length: 20 }, (_, i) => i * 7) }, { limits: { maxStacks: 8 } });
    expect({ kind: e.kind, limit: e.limit }).toEqual({ kind: "limit", limit: "maxStacks" });
  });

  test("a string enum is written as a trie: a thousand values are a few parse stacks", () => {
    const values = Array.from({ length: 1000 }, (_, i) => `value-${i}`);
    const { gbnf } = compileJsonSchema({ enum: values }, { limits: { maxStacks: 16, maxStackPairs: 200 } });
    const rec = new Recognizer(parseGbnf(gbnf));
    for (const v of ["value-0", "value-999", "value-10", "value-1"]) expect(rec.accepts(JSON.stringify(v))).toBe(true);
    for (const v of ["value-", "value-1000", "value-01", "Value-1"]) expect(rec.accepts(JSON.stringify(v))).toBe(false);
  });

  test("long chains of rule references", () => {
    expect(gbnfProblems(chainGbnf(5000, true)).map((p) => [p.code, p.limit])).toEqual([["rule-depth", "maxChain"]]);
    expect(gbnfProblems(chainGbnf(3000, true))).toEqual([]);
    expect(gbnfProblems(chainGbnf(300)).map((p) => [p.code, p.limit])).toEqual([["rule-depth", "maxGrowth"]]);
    expect(gbnfProblems(chainGbnf(200))).toEqual([]);
  });

  test("recursion whose continuations pile up with nesting is refused, plain recursion is not", () => {
    const refused = [
      'root ::= s\ns ::= "a" s t | "b"\nt ::= " "*\n',
      'root ::= list\nlist ::= "x" ("," list)*\n',
      'root ::= s\ns ::= "a" s*\n',
    ];
    for (const g of refused) expect(gbnfProblems(g).map((p) => p.code)).toEqual(["parse-stacks"]);
    const fine = [
      'root ::= list\nlist ::= "x" ("," list)?\n',
      'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= factor (("*" | "/") factor)*\nfactor ::= [0-9]+ | "(" expr ")"\n',
      'root ::= node\nnode ::= "(" node* ")"\n',
    ];
    for (const g of fine) expect(gbnfProblems(g)).toEqual([]);
  });
});

describe("realistic schemas stay well inside the budget", () => {
  test("a coding agent's tool set", () => {
    const budget = new CompileBudget();
    for (const tool of agentTools) {
      const { gbnf } = compileJsonSchema(tool.parameters, { budget });
      expect(gbnfErrors(parseGbnf(gbnf))).toEqual([]);
    }
    expect(budget.spent).toBeLessThan(DEFAULT_LIMITS.maxWork / 20);
  });

  test("a 400-property tool schema", () => {
    const budget = new CompileBudget();
    const { gbnf } = compileJsonSchema(wideToolSchema(400), { budget });
    expect(gbnfErrors(parseGbnf(gbnf))).toEqual([]);
    expect(budget.spent).toBeLessThan(DEFAULT_LIMITS.maxWork);
    expect(gbnf.length).toBeLessThan(DEFAULT_LIMITS.maxGbnfBytes / 4);
  });

  test("checkGbnfText returns the grammar as the checks saw it", () => {
    const { gbnf, errors } = checkGbnfText('root ::= ("yes" | "no")   # a comment\n');
    expect(errors).toEqual([]);
    expect(gbnf).toBe('root ::= "yes" | "no"\n');
  });
});
