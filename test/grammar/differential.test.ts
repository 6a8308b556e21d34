// Differential tests of the exact-range and string machinery: random bounds
// and random candidates, grammar (via the recognizer) against a direct
// predicate.

import { describe, expect, test } from "bun:test";
import { compileJsonSchema } from "../../grammar/index.ts";
import { Recognizer } from "./recognizer.ts";
import { rng } from "./sampler.ts";

/** Exact decimal text → scaled BigInt (scale 10^8). */
function scaled(text: string): bigint {
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(text)!;
  const frac = (m[3] ?? "").padEnd(8, "0").slice(0, 8);
  const v = BigInt(m[2]!) * 10n ** 8n + BigInt(frac);
  return m[1] ? -v : v;
}

describe("integer ranges are exact", () => {
  const rand = rng(42);
  const pick = () => Math.floor(rand() * 2400) - 1200;
  for (let i = 0; i < 40; i++) {
    let lo: number | null = pick();
    let hi: number | null = pick();
    if (lo > hi) [lo, hi] = [hi, lo];
    if (i % 7 === 3) lo = null;
    if (i % 7 === 5) hi = null;
    test(`[${lo}, ${hi}]`, () => {
      const schema: Record<string, unknown> = { type: "integer" };
      if (lo !== null) schema.minimum = lo;
      if (hi !== null) schema.maximum = hi;
      const rec = new Recognizer(compileJsonSchema(schema).grammar);
      const candidates = new Set<number>([0, -1, 1, 10, -10, 99, 100, 1000, -1000, 9999, 123456]);
      for (const b of [lo, hi]) if (b !== null) for (let d = -12; d <= 12; d++) candidates.add(b + d);
      for (let k = 0; k < 150; k++) candidates.add(Math.floor(rand() * 5000) - 2500);
      for (const n of candidates) {
        const want = (lo === null || n >= lo) && (hi === null || n <= hi);
        expect({ n, ok: rec.accepts(String(n)) }).toEqual({ n, ok: want });
      }
      expect(rec.accepts("-0")).toBe(false);
      expect(rec.accepts("007")).toBe(false);
    });
  }
});

describe("decimal ranges are exact", () => {
  const rand = rng(7);
  const dec = (maxInt: number, maxFrac: number) => {
    const neg = rand() < 0.4;
    const int = Math.floor(rand() * maxInt);
    const fl = Math.floor(rand() * (maxFrac + 1));
    let frac = "";
    for (let i = 0; i < fl; i++) frac += Math.floor(rand() * 10);
    const t = `${neg ? "-" : ""}${int}${frac ? `.${frac}` : ""}`;
    return /^-0(\.0*)?$/.test(t) ? t.slice(1) : t;
  };
  for (let i = 0; i < 40; i++) {
    const a = Number(dec(30, 3));
    const b = Number(dec(30, 3));
    const lo = Math.min(a, b);
    const hi = Math.max(a, b);
    const exLo = i % 3 === 1;
    const exHi = i % 4 === 2;
    const noLo = i % 9 === 4;
    const noHi = i % 9 === 7;
    const schema: Record<string, unknown> = { type: "number" };
    if (!noLo) schema[exLo ? "exclusiveMinimum" : "minimum"] = lo;
    if (!noHi) schema[exHi ? "exclusiveMaximum" : "maximum"] = hi;
    const unsat = !noLo && !noHi && (lo > hi || (lo === hi && (exLo || exHi)));
    if (unsat) continue;
    test(JSON.stringify(schema), () => {
      const rec = new Recognizer(compileJsonSchema(schema).grammar);
      const L = scaled(String(lo));
      const H = scaled(String(hi));
      const cands = new Set<string>(["0", "0.0", "1", "-1", "0.5", "-0.5", "29.999", "30"]);
      for (const b of [lo, hi]) {
        cands.add(String(b));
        cands.add(String(b) + (String(b).includes(".") ? "0" : ".0"));
        cands.add((b + 0.001).toFixed(3));
        cands.add((b - 0.001).toFixed(3));
        cands.add((b + 0.0001).toFixed(4));
        cands.add((b - 0.0001).toFixed(4));
      }
      for (let k = 0; k < 120; k++) cands.add(dec(35, 5));
      for (const c of cands) {
        if (/^-0(\.0*)?$/.test(c)) continue; // "-0" is deliberately never produced
        const v = scaled(c);
        const want = (noLo || (exLo ? v > L : v >= L)) && (noHi || (exHi ? v < H : v <= H));
        expect({ c, ok: rec.accepts(c) }).toEqual({ c, ok: want });
      }
    });
  }
});

describe("pattern × length automata are exact", () => {
  const patterns = ["^[a-c]+$", "b", "^a|c$", "^(ab)*$", "^[^a]*a[^a]*$", "^(?:a|bc)+$", "^.{1,3}$"];
  const lengths: [number | undefined, number | undefined][] = [
    [2, undefined],
    [undefined, 3],
    [1, 4],
    [3, 3],
    [0, 0],
  ];
  const rand = rng(99);
  const alphabet = ["a", "b", "c", "\n", '"', "é"];
  for (const p of patterns) {
    for (const [min, max] of lengths) {
      test(`/${p}/ length ${min ?? 0}..${max ?? "∞"}`, () => {
        const schema: Record<string, unknown> = { type: "string", pattern: p };
        if (min !== undefined) schema.minLength = min;
        if (max !== undefined) schema.maxLength = max;
        const re = new RegExp(p, "u");
        const want = (s: string) => re.test(s) && [...s].length >= (min ?? 0) && [...s].length <= (max ?? Infinity);
        let rec: Recognizer;
        try {
          rec = new Recognizer(compileJsonSchema(schema).grammar);
        } catch (e) {
          // Unsatisfiable combinations must really be unsatisfiable.
          expect((e as Error).message).toMatch(/constraint unsatisfiable/);
          for (let k = 0; k < 300; k++) {
            let s = "";
            const len = Math.floor(rand() * 6);
            for (let j = 0; j < len; j++) s += alphabet[Math.floor(rand() * alphabet.length)];
            expect(want(s)).toBe(false);
          }
          return;
        }
        for (let k = 0; k < 150; k++) {
          let s = "";
          const len = Math.floor(rand() * 6);
          for (let j = 0; j < len; j++) s += alphabet[Math.floor(rand() * alphabet.length)];
          expect({ s, ok: rec.accepts(JSON.stringify(s)) }).toEqual({ s, ok: want(s) });
        }
      });
    }
  }
});

describe("extra keys never collide with declared ones", () => {
  test("random keys", () => {
    const declared = ["a", "ab", 'b"', "", "é", "x\ny"];
    const schema = {
      type: "object",
      properties: Object.fromEntries(declared.map((k) => [k, { const: 1 }])),
      additionalProperties: { const: 2 },
    };
    const rec = new Recognizer(compileJsonSchema(schema).grammar);
    const rand = rng(5);
    const alphabet = ["a", "b", '"', "é", "\n", "y", "x"];
    for (let k = 0; k < 300; k++) {
      let key = "";
      const len = Math.floor(rand() * 4);
      for (let j = 0; j < len; j++) key += alphabet[Math.floor(rand() * alphabet.length)];
      // As an extra key (value 2) it must be accepted exactly when undeclared.
      const text = `{${JSON.stringify(key)}:2}`;
      expect({ key, ok: rec.accepts(text) }).toEqual({ key, ok: !declared.includes(key) });
    }
  });
});
