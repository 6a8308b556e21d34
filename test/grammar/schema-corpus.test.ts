// The JSON Schema corpus: every accepted schema compiles to a clean grammar
// that accepts its valid examples, rejects its invalid ones, and only ever
// produces (via the random sampler) JSON that ajv validates. Refused schemas
// fail with the expected keyword and path.

import { afterAll, describe, expect, test } from "bun:test";
import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { SchemaError, checkGbnf, compileJsonSchema, parseGbnf } from "../../grammar/index.ts";
import { type Case, accepted, refused } from "./corpus/index.ts";
import { Recognizer } from "./recognizer.ts";
import { Sampler } from "./sampler.ts";

const ajv2020 = new Ajv2020({ strict: false });
addFormats(ajv2020);
const ajv07 = new Ajv({ strict: false });
addFormats(ajv07);

const SEEDS = 8;
const compileTimes: number[] = [];

function ajvFor(c: Case) {
  return c.draft === "07" ? ajv07 : ajv2020;
}

/** The schema without the keywords strict: false ignored (oneOf → anyOf). */
function stripIgnored(schema: unknown, pointers: string[]): unknown {
  const copy = structuredClone(schema);
  for (const p of pointers) {
    const segs = p
      .split("/")
      .slice(1)
      .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
    const last = segs.pop()!;
    let cur = copy as Record<string, unknown>;
    for (const s of segs) cur = cur[s] as Record<string, unknown>;
    if (last === "oneOf") cur.anyOf = cur.oneOf;
    delete cur[last];
  }
  return copy;
}

function depth(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depth));
  if (v !== null && typeof v === "object") return 1 + Math.max(0, ...Object.values(v).map(depth));
  return 0;
}

const show = (v: unknown) => JSON.stringify(v)?.slice(0, 120);

describe("schema corpus: accepted", () => {
  test("corpus has at least 150 schemas with unique names", () => {
    expect(accepted.length).toBeGreaterThanOrEqual(150);
    expect(new Set(accepted.map((c) => c.name)).size).toBe(accepted.length);
  });

  for (const c of accepted) {
    test(c.name, () => {
      const t0 = performance.now();
      const result = compileJsonSchema(c.schema, c.options);
      compileTimes.push(performance.now() - t0);
      expect(result.ignored).toEqual(c.ignored ?? []);

      // The text reparses to the same grammar and passes every check.
      const grammar = parseGbnf(result.gbnf);
      expect(grammar).toEqual(result.grammar);
      expect(checkGbnf(grammar)).toEqual([]);

      const ajv = ajvFor(c);
      const validate = ajv.compile(c.schema as object);
      const enforced = c.ignored?.length ? ajv.compile(stripIgnored(c.schema, c.ignored) as object) : validate;
      const rec = new Recognizer(grammar);

      for (const v of c.valid) {
        expect({ example: show(v), ajv: validate(v) }).toEqual({ example: show(v), ajv: true });
        expect({ example: show(v), accepted: rec.accepts(JSON.stringify(v)) }).toEqual({
          example: show(v),
          accepted: true,
        });
        if (depth(v) <= 10) {
          const pretty = JSON.stringify(v, null, 2);
          expect({ example: pretty, accepted: rec.accepts(pretty) }).toEqual({ example: pretty, accepted: true });
        }
      }
      for (const v of c.invalid) {
        expect({ example: show(v), ajv: enforced(v) }).toEqual({ example: show(v), ajv: false });
        expect({ example: show(v), accepted: rec.accepts(JSON.stringify(v)) }).toEqual({
          example: show(v),
          accepted: false,
        });
      }
      for (const t of c.invalidText ?? []) {
        expect({ text: t, accepted: rec.accepts(t) }).toEqual({ text: t, accepted: false });
      }
      for (const v of c.stricter ?? []) {
        expect({ example: show(v), ajv: validate(v) }).toEqual({ example: show(v), ajv: true });
        expect({ example: show(v), accepted: rec.accepts(JSON.stringify(v)) }).toEqual({
          example: show(v),
          accepted: false,
        });
      }
    });
  }
});

describe("schema corpus: random walks of the grammar validate", () => {
  for (const c of accepted) {
    test(c.name, () => {
      const { grammar } = compileJsonSchema(c.schema, c.options);
      const ajv = ajvFor(c);
      const enforced = ajv.compile((c.ignored?.length ? stripIgnored(c.schema, c.ignored) : c.schema) as object);
      const sampler = new Sampler(grammar);
      for (let seed = 1; seed <= SEEDS; seed++) {
        const text = sampler.sample(seed * 7919 + c.name.length);
        let value: unknown;
        expect(() => (value = JSON.parse(text))).not.toThrow();
        const ok = enforced(value);
        expect({ text, ok, errors: ok ? null : enforced.errors }).toEqual({ text, ok: true, errors: null });
      }
    });
  }
});

describe("schema corpus: refused", () => {
  test("at least 40 refusal cases", () => {
    expect(refused.length).toBeGreaterThanOrEqual(40);
  });
  for (const r of refused) {
    test(r.name, () => {
      let err: unknown;
      try {
        compileJsonSchema(r.schema, r.options);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(SchemaError);
      const e = err as SchemaError;
      expect({ keyword: e.keyword, path: e.path }).toEqual({ keyword: r.keyword, path: r.path });
      expect(e.kind).toBe(r.kind ?? "unsupported");
      expect(e.message.startsWith("constraint unsatisfiable: ")).toBe(true);
    });
  }
});

afterAll(() => {
  if (compileTimes.length === 0) return;
  const sorted = [...compileTimes].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  const worst = sorted[sorted.length - 1]!;
  const worstCase = accepted[compileTimes.indexOf(worst)]?.name;
  console.log(
    `grammar compile time over ${sorted.length} schemas: median ${median.toFixed(2)} ms, worst ${worst.toFixed(2)} ms (${worstCase})`,
  );
});
