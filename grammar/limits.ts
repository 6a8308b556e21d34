// The budget for compiling a JSON Schema or checking a GBNF grammar (README
// "Limits"). Compilation runs in the daemon's event loop and the grammar runs
// in the worker's decode loop, so a request's schema or grammar must never
// buy unbounded work in either: anything over one of these is refused (a 400
// naming the limit) instead.
//
// The defaults are sized so that hitting any of them costs well under 100 ms
// here, while real schemas (agent tool sets with a few hundred properties,
// enums of a few hundred values) stay far below them.

export interface GrammarLimits {
  /** Largest minLength / maxLength / minItems / maxItems (and regex {m,n}) accepted. */
  maxCount: number;
  /** Most entries in one keyword: properties, required, enum, prefixItems, anyOf/oneOf/allOf lists. */
  maxEntries: number;
  /** Most schemas one allOf / $ref expansion may merge into a single value. */
  maxMerged: number;
  /** Most anyOf/oneOf branch compilations (distributing them over their siblings multiplies). */
  maxBranches: number;
  /** Compile steps (one per subschema, merged schema, enum value, property, validation) for one schema. */
  maxWork: number;
  /** Wall-clock backstop for one compilation, in milliseconds. */
  maxMillis: number;
  /** GBNF text size, in bytes (UTF-16 code units). */
  maxGbnfBytes: number;
  /**
   * Rules as llama.cpp holds them: named rules plus those it makes for groups and repetitions (~2-4 µs each to load).
   */
  maxRules: number;
  /** Elements (characters, references, markers) in those rules: repetitions copy their body. */
  maxElements: number;
  /** Parse stacks one step of llama.cpp's grammar engine may build (alternatives that start alike multiply them). */
  maxStacks: number;
  /**
   * Parse stacks over two steps (every stack alive after a character is advanced again; ambiguous alternatives
   * multiply).
   */
  maxStackPairs: number;
  /** Rule references one step may expand before reaching a character (llama.cpp recurses once per reference). */
  maxChain: number;
  /** Continuations one step may push onto a parse stack (each path copies the whole stack). */
  maxGrowth: number;
}

export const DEFAULT_LIMITS: Readonly<GrammarLimits> = Object.freeze({
  maxCount: 2 ** 31 - 1,
  maxEntries: 1000,
  maxMerged: 256,
  maxBranches: 500,
  maxWork: 25_000,
  maxMillis: 1000,
  maxGbnfBytes: 1 << 20,
  maxRules: 8192,
  maxElements: 1_000_000,
  maxStacks: 1024,
  maxStackPairs: 8192,
  maxChain: 4096,
  maxGrowth: 256,
});

export function limitsWith(overrides: Partial<GrammarLimits> | undefined): GrammarLimits {
  return { ...DEFAULT_LIMITS, ...overrides };
}

/** "<what> is above the limit of <n> (<name>)": the wording every refusal uses. */
export function overLimit(what: string, limit: keyof GrammarLimits, limits: GrammarLimits): string {
  return `${what}, above the limit of ${limits[limit]} (${limit})`;
}
