// How big the KV pool is and how it is laid out (docs/design.md#kv-layout), decided
// once when the worker loads its model:
//
// - `--max-context N`: one buffer of N cells per sequence (lanes + 2 of them),
//   every conversation up to N tokens. The layout of explicit sizes.
// - default (`--max-context auto`), sized from memory: the KV budget is 60%
//   of what is free after the weights and a reserve.
//   - When one buffer of the model's trained window per sequence fits the
//     budget, that: every conversation up to the trained window, and a
//     prompt's prefill attends over its own sequence only.
//   - Otherwise one shared pool (llama.cpp kv_unified) every sequence draws
//     from: the budget divided over the lanes (at least 4096 cells each where
//     memory holds that), never more than the lanes times the trained window.
//     One conversation may grow into what the others leave, up to the trained
//     window or the whole pool. It costs speed beside a long conversation
//     (every step attends over the cells up to the highest in use), so it is
//     the layout of models whose KV is too big for the other.
//   bench/kv-layout.ts measures both (bench/README.md).
// - `--kv-pool N`: a shared pool of N cells (its window capped by
//   --max-context when both are given).
//
// Pure arithmetic: the facts (free memory, KV bytes a token) come from memory.ts
// and model.ts.
import { sequencesFor } from "./kv-pool.ts";
import type { FreeMemory } from "./memory.ts";
import { formatBytes } from "../runtime/byte-size.ts";

export interface KvRequest {
  /** --max-context N; undefined = auto. */
  maxContext?: number;
  /** --kv-pool N: a shared pool of N cells. */
  poolCells?: number;
  /** Why the pool has poolCells cells, when not --kv-pool. */
  poolReason?: string;
  /** Auto sizing, but never per-lane buffers (they could not be allocated). */
  sharedOnly?: boolean;
}

export interface KvFacts {
  lanes: number;
  /** The model's trained window (0 when the GGUF gives none). */
  trainedContext: number;
  /** KV bytes one token takes in every layer (K and V). */
  bytesPerToken: number;
  /** Free memory for KV, weights already off (only asked for when sizing from memory). */
  free?: () => FreeMemory;
}

export interface KvPlan {
  layout: "shared" | "per-lane";
  sequences: number;
  /** KV cells in all. */
  poolCells: number;
  /** Per-lane layout: the cells of each sequence's buffer (shared: equal to the pool). */
  cellsPerSequence: number;
  /** The most tokens one conversation (prompt and reply) may hold. */
  window: number;
  /** What the pool takes in memory. */
  poolBytes: number;
  /** The window, the pool and why, for the startup log. */
  summary: string;
}

/** Fraction of free memory the pool may take (docs/design.md#kv-layout). */
export const KV_MEMORY_SHARE = 0.6;
/** Memory left to everything else (compute buffers, the daemon, the system) before that share is taken. */
export const KV_MEMORY_RESERVE = 2 ** 30;
/** Each lane's share of the pool is at least this many cells where memory holds it. */
export const MIN_LANE_SHARE = 4096;
/** The window assumed when the GGUF gives no trained window. */
const UNKNOWN_TRAINED = 8192;
/** Pool sizes are whole multiples of this (llama.cpp pads the cell count for flash attention to 256). */
const ALIGN = 256;

export function planKv(req: KvRequest, facts: KvFacts): KvPlan {
  const sequences = sequencesFor(facts.lanes);
  const bpt = Math.max(1, facts.bytesPerToken);
  const perToken = `${formatBytes(bpt)} a token`;
  if (req.maxContext !== undefined && req.poolCells === undefined) {
    const n = req.maxContext;
    return {
      layout: "per-lane",
      sequences,
      poolCells: sequences * n,
      cellsPerSequence: n,
      window: n,
      poolBytes: sequences * n * bpt,
      summary: `window ${n} per conversation (--max-context); ${sequences} KV buffers of ${n} cells, one per sequence (${formatBytes(sequences * n * bpt)}, ${perToken})`,
    };
  }
  const trained = facts.trainedContext > 0 ? facts.trainedContext : UNKNOWN_TRAINED;
  let pool: number;
  let why: string;
  if (req.poolCells !== undefined) {
    pool = align(req.poolCells);
    why = req.poolReason ?? "--kv-pool";
  } else {
    const free = facts.free!();
    const left = Math.max(0, free.bytes - KV_MEMORY_RESERVE);
    const budget = Math.floor((KV_MEMORY_SHARE * left) / bpt);
    const share = `${Math.round(KV_MEMORY_SHARE * 100)}% of ${formatBytes(free.bytes)} free ${free.where} memory after the weights and a ${formatBytes(KV_MEMORY_RESERVE)} reserve`;
    if (!req.sharedOnly && sequences * trained <= budget) {
      const bytes = sequences * trained * bpt;
      return {
        layout: "per-lane",
        sequences,
        poolCells: sequences * trained,
        cellsPerSequence: trained,
        window: trained,
        poolBytes: bytes,
        summary:
          `window ${trained} per conversation (the model's trained window); ${sequences} KV buffers of ${trained} cells, one per sequence ` +
          `(${formatBytes(bytes)}, ${perToken}) = within ${share}`,
      };
    }
    const ceiling = facts.lanes * trained;
    const wantedFloor = Math.min(ceiling, facts.lanes * MIN_LANE_SHARE);
    // A share of 4096 per lane when memory holds it at all; else one 4096-cell window.
    const floor = wantedFloor * bpt <= left ? wantedFloor : Math.min(ceiling, MIN_LANE_SHARE);
    pool = align(Math.min(ceiling, Math.max(budget, floor)));
    if (pool >= align(ceiling))
      why = `${facts.lanes} lanes x ${trained}, all they can use (${share} would allow ${budget})`;
    else if (budget >= floor) why = `${share}: ${Math.floor(pool / facts.lanes)} cells a lane`;
    else why = `a floor of ${floor} cells, above ${share} (${budget}): memory is short`;
  }
  const window = Math.min(trained, pool, req.maxContext ?? Infinity);
  const reasonWindow =
    window === req.maxContext ? "--max-context" : window === trained ? "the model's trained window" : "the whole pool";
  return {
    layout: "shared",
    sequences,
    poolCells: pool,
    cellsPerSequence: pool,
    window,
    poolBytes: pool * bpt,
    summary: `window ${window} per conversation (${reasonWindow}); shared KV pool of ${pool} cells (${formatBytes(pool * bpt)}, ${perToken}) = ${why}`,
  };
}

function align(cells: number): number {
  return Math.max(ALIGN, Math.floor(cells / ALIGN) * ALIGN);
}
