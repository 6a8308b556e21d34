// The compile budget (../limits.ts). The counts a schema states (lengths,
// entries, merged schemas) are checked where the keyword is read; the work
// itself (subschemas compiled, anyOf branches, values validated, rules made,
// GBNF bytes) is metered as it happens, so a schema whose expansion
// multiplies (nested allOf over $refs, anyOf over anyOf) is stopped after a
// bounded number of steps, not after it has exhausted memory. One budget can
// be shared by several compilations (a request's tools), which then draw on
// the same work, time, rule and byte allowances.

import { type GrammarLimits, limitsWith, overLimit } from "../limits.ts";
import { SchemaError } from "./errors.ts";

/** How many steps pass between two looks at the clock. */
const CLOCK_EVERY = 256;

export class CompileBudget {
  private steps = 0;
  private nextClock = CLOCK_EVERY;
  private rules = 0;
  private bytes = 0;
  private branches = 0;
  private readonly deadline: number;
  /** Pointer of the subschema being compiled: blamed for a limit hit below keyword level. */
  at = "";

  readonly limits: GrammarLimits;

  constructor(limits?: Partial<GrammarLimits>) {
    this.limits = limitsWith(limits);
    this.deadline = performance.now() + this.limits.maxMillis;
  }

  /** Steps spent so far (see maxWork). */
  get spent(): number {
    return this.steps;
  }

  /** A limit error at `at` (a pointer to `keyword`); `detail` names the limit. */
  error(limit: keyof GrammarLimits, keyword: string, at: string, detail: string): SchemaError {
    return new SchemaError(keyword, at, detail, "limit", limit);
  }

  /** Refuse a count the schema states (a length, a number of entries) above `limit`. */
  cap(limit: "maxCount" | "maxEntries" | "maxMerged", value: number, keyword: string, at: string, what: string): void {
    if (value > this.limits[limit]) throw this.error(limit, keyword, at, overLimit(what, limit, this.limits));
  }

  /** Count `units` steps of work on the current subschema. */
  step(units = 1): void {
    this.steps += units;
    if (this.steps > this.limits.maxWork) {
      throw this.error(
        "maxWork",
        keywordOf(this.at),
        this.at,
        `compiling the schema takes more than ${this.limits.maxWork} steps (maxWork): nested $ref, allOf and anyOf multiply`,
      );
    }
    if (this.steps >= this.nextClock) {
      this.nextClock = this.steps + CLOCK_EVERY;
      if (performance.now() > this.deadline) {
        throw this.error(
          "maxMillis",
          keywordOf(this.at),
          this.at,
          `compiling the schema took more than ${this.limits.maxMillis} ms (maxMillis)`,
        );
      }
    }
  }

  /** One more anyOf/oneOf branch compiled (distributing them over their siblings multiplies). */
  branch(keyword: string, at: string): void {
    if (++this.branches > this.limits.maxBranches) {
      const max = this.limits.maxBranches;
      throw this.error(
        "maxBranches",
        keyword,
        at,
        `expanding anyOf/oneOf takes more than ${max} branch compilations (maxBranches): nested or sibling anyOf/oneOf multiply`,
      );
    }
  }

  /** Account for one more named rule of `bytes` GBNF bytes. */
  grow(bytes: number): void {
    this.rules++;
    this.bytes += bytes;
    // Each named rule is at least one rule in llama.cpp, so this refuses early
    // what the final size check (../gbnf/cost.ts) would refuse anyway.
    if (this.rules > this.limits.maxRules)
      throw this.error(
        "maxRules",
        keywordOf(this.at),
        this.at,
        `the grammar needs more than ${this.limits.maxRules} rules (maxRules)`,
      );
    if (this.bytes > this.limits.maxGbnfBytes)
      throw this.error(
        "maxGbnfBytes",
        keywordOf(this.at),
        this.at,
        `the grammar grows past ${this.limits.maxGbnfBytes} bytes (maxGbnfBytes)`,
      );
    this.step();
  }
}

/**
 * The keyword a subschema sits under, from its pointer: `/properties/a` is
 * under "properties", `/anyOf/2` under "anyOf", `/items` under "items".
 */
export function keywordOf(path: string): string {
  const segs = path.split("/").slice(1);
  if (segs.length === 0) return "";
  const last = segs[segs.length - 1]!;
  const parent = segs[segs.length - 2];
  if (parent === "properties" || parent === "$defs" || parent === "definitions" || /^\d+$/.test(last))
    return parent ?? last;
  return last;
}
