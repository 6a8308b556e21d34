// KV layout arithmetic: the cell ledger of a shared pool (shared cells counted
// once) and the sizing of the pool from memory (kv-sizing.ts). No model needed.
import { describe, expect, test } from "bun:test";
import { cellsInUse, cutCells, emptyCells, ownCells, shareCells, type CellOwner } from "../../src/engine/kv-cells.ts";
import { KV_MEMORY_RESERVE, planKv } from "../../src/engine/kv-sizing.ts";

const seq = (n = 0): CellOwner => ({ tokens: Array.from({ length: n }, (_, i) => i), cells: emptyCells() });
const GiB = 2 ** 30;

describe("cell ledger", () => {
  test("own cells add up; a shared prefix counts once", () => {
    const a = seq(100);
    const b = seq(50);
    expect(cellsInUse([a, b])).toBe(150);
    const c = seq();
    c.tokens = a.tokens.slice(0, 80);
    shareCells(a, c, 80);
    expect(cellsInUse([a, b, c])).toBe(150);
    c.tokens.push(1, 2, 3); // c appends its own cells
    expect(cellsInUse([a, b, c])).toBe(153);
    a.tokens.length = 40; // a cut below what c shares: c still holds 40..80
    cutCells(a, [b, c]);
    expect(cellsInUse([a, b, c])).toBe(133);
    a.tokens.push(...Array.from({ length: 60 }, () => 9)); // new cells at 40..100, not c's
    expect(cellsInUse([a, b, c])).toBe(193);
    expect(cellsInUse([c])).toBe(83);
  });

  test("chains of copies and cuts agree with a cell-by-cell model", () => {
    // A brute-force model: each cell is [lineage id, position]; sequences list their cells.
    let rnd = 7;
    const next = (n: number) => (rnd = (rnd * 1103515245 + 12345) % 2 ** 31) % n;
    let cellId = 0;
    const seqs = Array.from({ length: 5 }, () => ({ owner: seq(), cells: [] as number[] }));
    for (let step = 0; step < 400; step++) {
      const s = seqs[next(seqs.length)]!;
      const op = next(4);
      if (op === 0) {
        const k = 1 + next(20);
        for (let i = 0; i < k; i++) {
          s.owner.tokens.push(0);
          s.cells.push(cellId++);
        }
      } else if (op === 1) {
        const len = next(s.cells.length + 1);
        s.owner.tokens.length = len;
        s.cells.length = len;
        // The cut says who else holds cells: a lineage no copy reaches past the cut is kept.
        cutCells(
          s.owner,
          seqs.filter((o) => o !== s).map((o) => o.owner),
        );
      } else if (op === 2) {
        const src = seqs[next(seqs.length)]!;
        if (src === s) continue;
        const len = next(src.cells.length + 1);
        s.owner.tokens = src.owner.tokens.slice(0, len);
        s.cells = src.cells.slice(0, len);
        shareCells(src.owner, s.owner, len);
      } else {
        // An import: new cells of its own.
        const len = next(30);
        s.owner.tokens = Array.from({ length: len }, () => 0);
        s.cells = Array.from({ length: len }, () => cellId++);
        ownCells(s.owner);
      }
      const truth = new Set(seqs.flatMap((x) => x.cells)).size;
      expect(cellsInUse(seqs.map((x) => x.owner))).toBe(truth);
    }
  });
});

describe("KV sizing", () => {
  const facts = (
    freeGiB: number,
    over: Partial<{ lanes: number; trainedContext: number; bytesPerToken: number }> = {},
  ) => ({
    lanes: 8,
    trainedContext: 32768,
    bytesPerToken: 2048,
    free: () => ({ bytes: freeGiB * GiB, where: "host" as const }),
    ...over,
  });

  test("--max-context N keeps one buffer of N cells per sequence", () => {
    const p = planKv({ maxContext: 2048 }, facts(16));
    expect(p).toMatchObject({
      layout: "per-lane",
      sequences: 10,
      cellsPerSequence: 2048,
      poolCells: 20480,
      window: 2048,
    });
    expect(p.summary).toContain("--max-context");
  });

  test("auto, when a buffer of the trained window per sequence fits 60% of free memory: per-lane buffers of it", () => {
    const p = planKv({}, facts(16));
    expect(p).toMatchObject({
      layout: "per-lane",
      sequences: 10,
      cellsPerSequence: 32768,
      poolCells: 10 * 32768,
      window: 32768,
    });
    expect(p.summary).toBe(
      "window 32768 per conversation (the model's trained window); 10 KV buffers of 32768 cells, one per sequence (640 MiB, 2 KiB a token) = within 60% of 16 GiB free host memory after the weights and a 1 GiB reserve",
    );
  });

  test("auto, when they do not fit: one shared pool, each conversation still up to the trained window", () => {
    const p = planKv({}, facts(1.5));
    const budget = Math.floor((0.6 * 0.5 * GiB) / 2048);
    expect(p).toMatchObject({ layout: "shared", poolCells: Math.floor(budget / 256) * 256, window: 32768 });
    expect(p.summary).toContain(
      "window 32768 per conversation (the model's trained window); shared KV pool of 157184 cells (307 MiB, 2 KiB a token) = 60% of 1.50 GiB",
    );
    // At the ceiling: the lanes times the trained window, all they can use.
    const q = planKv({ sharedOnly: true }, facts(16));
    expect(q).toMatchObject({ layout: "shared", poolCells: 8 * 32768, window: 32768 });
    expect(q.summary).toContain(
      "shared KV pool of 262144 cells (512 MiB, 2 KiB a token) = 8 lanes x 32768, all they can use",
    );
  });

  test("a built-in-sized model (65536 trained, ~128 bytes a token) gets its whole trained window", () => {
    const p = planKv({}, facts(2, { trainedContext: 65536, bytesPerToken: 128 }));
    expect(p).toMatchObject({ layout: "per-lane", window: 65536, cellsPerSequence: 65536 });
  });

  test("auto on a real model (Qwen3-4B: 144 KiB a token) takes 60% of what the weights and reserve leave", () => {
    const bpt = 36 * 8 * (128 + 128) * 2; // 147456
    const p = planKv({}, facts(20, { trainedContext: 40960, bytesPerToken: bpt }));
    const budget = Math.floor((0.6 * (20 * GiB - KV_MEMORY_RESERVE)) / bpt);
    expect(p.poolCells).toBe(Math.floor(budget / 256) * 256);
    expect(p.poolBytes).toBeLessThanOrEqual(0.6 * 19 * GiB);
    expect(p).toMatchObject({ layout: "shared", window: 40960 });
    expect(p.summary).toContain(
      "= 60% of 20 GiB free host memory after the weights and a 1 GiB reserve: 10368 cells a lane",
    );
    // A 16k-token prompt fits, beside eight short ones.
    expect(p.poolCells).toBeGreaterThan(16384 + 8 * 512);
  });

  test("short memory: at least 4096 cells a lane when memory holds them, else one window of 4096", () => {
    const bpt = 147456;
    const some = planKv({}, facts(1 + (8 * 4096 * bpt) / GiB + 0.01, { trainedContext: 40960, bytesPerToken: bpt }));
    expect(some.poolCells).toBe(8 * 4096);
    expect(some.window).toBe(8 * 4096);
    const little = planKv({}, facts(1.5, { trainedContext: 40960, bytesPerToken: bpt }));
    expect(little.poolCells).toBe(4096);
    expect(little.window).toBe(4096);
    expect(little.summary).toContain("memory is short");
  });

  test("--kv-pool N: a shared pool of N cells; --max-context caps its window", () => {
    expect(planKv({ poolCells: 1000 }, facts(16))).toMatchObject({ layout: "shared", poolCells: 768, window: 768 });
    expect(planKv({ poolCells: 65536 }, facts(16))).toMatchObject({ poolCells: 65536, window: 32768 });
    expect(planKv({ poolCells: 65536, maxContext: 4096 }, facts(16))).toMatchObject({
      layout: "shared",
      poolCells: 65536,
      window: 4096,
    });
  });
});
