// The hardening reproductions at the grammar level: each hostile schema or
// grammar is refused by the budget (grammar/limits.ts), naming the limit and
// where, after a bounded amount of work — not after minutes and gigabytes.
import { describe, expect, test } from "bun:test";
import {
  CompileBudget,
  DEFAULT_LIMITS,
  SchemaError,
  checkGbnfText,
  compileJsonSchema,
  type GrammarLimits,
} from "../../grammar/index.ts";
import {
  allOfFanout,
  bigEnum,
  chainGbnf,
  exponentialGbnf,
  hugeMinLength,
  manyOptional,
  propertyFanout,
} from "./hostile.ts";

/**
 * Compiles with a fresh budget; the refusal and the steps spent on it. The
 * wall-clock backstop is moved out of the way so that a slow, busy machine
 * still sees the deterministic limit each case is about.
 */
function refuse(schema: unknown): { error: SchemaError; spent: number } {
  const budget = new CompileBudget({ maxMillis: 60_000 });
  try {
    compileJsonSchema(schema, { budget });
  } catch (error) {
    if (error instanceof SchemaError) return { error, spent: budget.spent };
    throw error;
  }
  throw new Error("the schema compiled");
}

// Generous hang guard: before the budget these took from 20 s to forever.
const GUARD = 30_000;

interface Case {
  name: string;
  schema: unknown;
  limit: keyof GrammarLimits;
  keyword: string;
  /** The pointer of the refused keyword. */
  path: RegExp;
  /** At most this many steps spent before the refusal. */
  steps: number;
}

const cases: Case[] = [
  {
    name: "minLength 1e308",
    schema: hugeMinLength,
    limit: "maxCount",
    keyword: "minLength",
    path: /^\/minLength$/,
    steps: 10,
  },
  {
    name: "10,000 optional properties",
    schema: manyOptional(),
    limit: "maxEntries",
    keyword: "properties",
    path: /^\/properties$/,
    steps: 10,
  },
  {
    name: "25 levels of allOf over two $refs",
    schema: allOfFanout(),
    limit: "maxMerged",
    keyword: "allOf",
    path: /^\/\$defs\/d\d+\/allOf$/,
    steps: 2 * DEFAULT_LIMITS.maxMerged,
  },
  // The same fan-out through properties is stopped by the work limit.
  {
    name: "25 levels of properties over two $refs",
    schema: propertyFanout(),
    limit: "maxWork",
    keyword: "properties",
    path: /^\/\$defs\/d\d+\/properties\/[ab]$/,
    steps: DEFAULT_LIMITS.maxWork + DEFAULT_LIMITS.maxEntries,
  },
  {
    name: "a 100,000-value enum",
    schema: bigEnum(),
    limit: "maxEntries",
    keyword: "enum",
    path: /^\/enum$/,
    steps: 10,
  },
];

describe("hostile schemas are refused within the compile budget", () => {
  for (const c of cases) {
    test(
      c.name,
      () => {
        const { error, spent } = refuse(c.schema);
        expect({ limit: error.limit, keyword: error.keyword }).toEqual({ limit: c.limit, keyword: c.keyword });
        expect(error.path).toMatch(c.path);
        expect(spent).toBeLessThanOrEqual(c.steps);
      },
      GUARD,
    );
  }
});

describe("hostile GBNF is refused before it reaches llama.cpp", () => {
  test(
    "30 rules rN ::= rN+1 | rN+1: 2^30 parse stacks for one character",
    () => {
      const { errors } = checkGbnfText(exponentialGbnf());
      expect(errors.map((e) => [e.code, e.limit])).toEqual([["parse-stacks", "maxStacks"]]);
    },
    GUARD,
  );

  test(
    "a 10,000-rule chain",
    () => {
      for (const tail of [false, true]) {
        const { errors } = checkGbnfText(chainGbnf(10_000, tail));
        expect(errors.map((e) => [e.code, e.limit])).toEqual([["grammar-size", "maxRules"]]);
      }
    },
    GUARD,
  );
});
