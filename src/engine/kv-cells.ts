// Which KV cells a set of sequences holds. A prefix copy inside one shared
// pool only tags the donor's cells with the receiver too, so the pool's cells
// in use are not the sum of the sequences' lengths: 8 lanes on one 12k-token
// system prompt hold 12k cells, not 96k. Admission and relief need the real
// count, and llama.cpp has no call that gives it.
//
// Each sequence's positions are runs of cells, each run from one "lineage"
// (cells written one after another by one sequence): borrowed runs below
// `base`, then its own lineage from `base` to its length. The cells in use are
// the union of every run. The engine only ever appends to a sequence (its own
// lineage grows); cuts, copies and imports go through here.

/** Positions [from, to) of a sequence held in cells of `lineage` (at those same positions). */
interface Run {
  lineage: number;
  from: number;
  to: number;
}

export interface CellOwner {
  /** The tokens whose KV the sequence holds (its length is what the cells cover). */
  tokens: number[];
  cells: SequenceCells;
}

export interface SequenceCells {
  borrowed: Run[];
  /** Positions from here on are the sequence's own lineage. */
  base: number;
  lineage: number;
}

let nextLineage = 1;

export function emptyCells(): SequenceCells {
  return { borrowed: [], base: 0, lineage: nextLineage++ };
}

/** The runs covering a sequence's current length. */
function runsOf(seq: CellOwner): Run[] {
  const n = seq.tokens.length;
  const { borrowed, base, lineage } = seq.cells;
  const runs = borrowed.filter((r) => r.from < n).map((r) => (r.to <= n ? r : { ...r, to: n }));
  if (n > base) runs.push({ lineage, from: base, to: n });
  return runs;
}

/**
 * The sequence was cut to its current length (call after cutting its
 * tokens). When one of `others` may hold its own lineage's cells past the
 * cut (a copy made from it), what it keeps of that lineage becomes a borrowed
 * run and it appends under a new lineage from now on. When none does (a
 * rejected draft cut off the cells the last decode wrote), the cells past the
 * cut are gone everywhere and the lineage stays as it is, so repeated cuts
 * do not pile up runs. Without `others` a copy is assumed.
 */
export function cutCells(seq: CellOwner, others?: Iterable<CellOwner>): void {
  const n = seq.tokens.length;
  if (others && n >= seq.cells.base && !borrowsPast(others, seq.cells.lineage, n)) return;
  seq.cells = n === 0 ? emptyCells() : { borrowed: runsOf(seq), base: n, lineage: nextLineage++ };
}

/** One of the owners holds cells of `lineage` at positions from `from` on. */
function borrowsPast(owners: Iterable<CellOwner>, lineage: number, from: number): boolean {
  for (const o of owners)
    if (o.cells.borrowed.some((r) => r.lineage === lineage && Math.min(r.to, o.tokens.length) > from)) return true;
  return false;
}

/** `dst` now holds positions [0, length) of `src` in the same cells (a copy inside a shared pool). */
export function shareCells(src: CellOwner, dst: CellOwner, length: number): void {
  const runs = runsOf(src)
    .filter((r) => r.from < length)
    .map((r) => ({ ...r, to: Math.min(r.to, length) }));
  dst.cells = { borrowed: runs, base: length, lineage: nextLineage++ };
}

/** `seq` was filled with new cells of its own (an import, or a copy into a separate buffer). */
export function ownCells(seq: CellOwner): void {
  seq.cells = emptyCells();
}

/** Cells the sequences hold between them: the union of their runs. */
export function cellsInUse(seqs: Iterable<CellOwner>): number {
  const byLineage = new Map<number, Run[]>();
  for (const s of seqs) {
    for (const r of runsOf(s)) {
      if (r.to <= r.from) continue;
      let list = byLineage.get(r.lineage);
      if (!list) byLineage.set(r.lineage, (list = []));
      list.push(r);
    }
  }
  let total = 0;
  for (const runs of byLineage.values()) {
    if (runs.length === 1) {
      total += runs[0]!.to - runs[0]!.from;
      continue;
    }
    runs.sort((a, b) => a.from - b.from);
    let end = -1;
    for (const r of runs) {
      if (r.from >= end) total += r.to - r.from;
      else if (r.to > end) total += r.to - end;
      end = Math.max(end, r.to);
    }
  }
  return total;
}
