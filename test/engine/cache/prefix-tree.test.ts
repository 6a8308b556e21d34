// The token radix tree: longest shared prefix per kind of holder, splits,
// removal, and whole-prefix queries, checked against a brute-force scan.
import { describe, expect, test } from "bun:test";
import { PrefixTree } from "../../../src/engine/prefix-tree.ts";
import { uniform } from "../../../src/fixtures/prng.ts";

interface E {
  name: string;
  kind: "pool" | "host";
}

function common(a: number[], b: number[], max: number): number {
  let i = 0;
  while (i < Math.min(a.length, b.length, max) && a[i] === b[i]) i++;
  return i;
}

describe("prefix tree", () => {
  test("finds the longest prefix per kind, splitting edges where entries part", () => {
    const tree = new PrefixTree<E>();
    const a = { name: "a", kind: "pool" as const };
    const b = { name: "b", kind: "host" as const };
    const c = { name: "c", kind: "pool" as const };
    tree.insert(a, [1, 2, 3, 4, 5]);
    tree.insert(b, [1, 2, 3, 9, 9, 9]);
    tree.insert(c, [1, 2]);
    const m = tree.longest([1, 2, 3, 9, 9, 7], 100, (e) => e.kind);
    expect(m.get("host")).toEqual({ entry: b, length: 5 });
    expect(m.get("pool")).toEqual({ entry: a, length: 3 });
    // `max` caps the depth looked at.
    expect(tree.longest([1, 2, 3, 9, 9, 7], 2, (e) => e.kind).get("host")!.length).toBe(2);
    expect(tree.longest([7, 1, 2], 100, (e) => e.kind).size).toBe(0);
    tree.remove(a);
    expect(tree.longest([1, 2, 3, 4, 5], 100, (e) => e.kind).get("pool")).toEqual({ entry: c, length: 2 });
    expect(tree.size).toBe(2);
  });

  test("ties go to the preferred entry", () => {
    const tree = new PrefixTree<E & { at: number }>();
    const old = { name: "old", kind: "pool" as const, at: 1 };
    const fresh = { name: "fresh", kind: "pool" as const, at: 2 };
    tree.insert(old, [5, 6, 7]);
    tree.insert(fresh, [5, 6, 8]);
    const m = tree.longest(
      [5, 6, 9],
      10,
      (e) => e.kind,
      (x, y) => y.at - x.at,
    );
    expect(m.get("pool")).toEqual({ entry: fresh, length: 2 });
  });

  test("prefixesOf lists entries whose whole tokens start the query", () => {
    const tree = new PrefixTree<E>();
    const short = { name: "short", kind: "host" as const };
    const mid = { name: "mid", kind: "host" as const };
    const other = { name: "other", kind: "host" as const };
    tree.insert(short, [1, 2]);
    tree.insert(mid, [1, 2, 3, 4]);
    tree.insert(other, [1, 3]);
    expect(
      tree
        .prefixesOf([1, 2, 3, 4, 5])
        .map((e) => e.name)
        .sort(),
    ).toEqual(["mid", "short"]);
    expect(tree.prefixesOf([1, 2, 3]).map((e) => e.name)).toEqual(["short"]);
    expect(
      tree
        .prefixesOf([1, 2, 3, 4])
        .map((e) => e.name)
        .sort(),
    ).toEqual(["mid", "short"]);
  });

  test("random inserts and removals agree with a brute-force scan", () => {
    const rand = uniform(7);
    const tree = new PrefixTree<E>();
    const live = new Map<E, number[]>();
    const seq = (n: number) => Array.from({ length: n }, () => Math.floor(rand() * 3));
    for (let step = 0; step < 400; step++) {
      if (live.size > 0 && rand() < 0.3) {
        const victim = [...live.keys()][Math.floor(rand() * live.size)]!;
        tree.remove(victim);
        live.delete(victim);
      } else {
        const e = { name: `e${step}`, kind: rand() < 0.5 ? ("pool" as const) : ("host" as const) };
        const tokens = seq(1 + Math.floor(rand() * 12));
        tree.insert(e, tokens);
        live.set(e, tokens);
      }
      const query = seq(1 + Math.floor(rand() * 14));
      const max = Math.floor(rand() * 15);
      const got = tree.longest(query, max, (e) => e.kind);
      for (const kind of ["pool", "host"] as const) {
        let best = 0;
        for (const [e, t] of live) if (e.kind === kind) best = Math.max(best, common(t, query, max));
        const hit = got.get(kind);
        expect(hit?.length ?? 0).toBe(best);
        if (hit) expect(common(live.get(hit.entry)!, query, max)).toBe(best);
      }
    }
  });
});
