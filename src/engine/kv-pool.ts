// The KV pool: lanes + 2 sequences (docs/design.md#kv-layout), either each with its
// own buffer of max-context cells or all drawing from one shared pool
// (kv-sizing.ts decides), and what they hold. A sequence keeps the tokens of
// its last request after its lane lets go (the prefix cache), so a later
// prompt that shares a prefix reuses those cells in place, copies them
// (llama_memory_seq_cp; in a shared pool the cells are only tagged, not
// copied) from a sequence a live lane holds, or imports them from the host
// tier, where prefixes go when their cells are needed for something else.
// The engine decides who runs; this decides where, and how many cells are
// free in a shared pool.
import type { LlamaContext } from "./context.ts";
import { cellsInUse, cutCells, emptyCells, ownCells, shareCells, type SequenceCells } from "./kv-cells.ts";
import { PrefixCache } from "./prefix-cache.ts";

export interface KvSequence {
  index: number;
  /** The tokens whose KV this sequence holds, in position order. */
  tokens: number[];
  /** A lane runs on it. */
  live: boolean;
  /** Which cells hold them (shared with other sequences after a copy in a shared pool). */
  cells: SequenceCells;
}

export interface KvPoolOptions {
  /** Bytes of host memory for prefixes that leave the pool; 0 = none. */
  hostCacheBytes: number;
  /** KV occupancy (0-1) that makes cached prefixes leave the pool, and the occupancy eviction brings it down to. */
  pressureHigh: number;
  pressureLow: number;
  /** Lanes: in a shared pool cached prefixes keep at most one lane's share of the cells (docs/design.md#prefix-cache). */
  lanes: number;
}

/** Shorter shared prefixes than this do not decide where a prompt runs (they save too little). */
const MIN_PREFIX_REUSE = 16;

/** Sequence count for a lane count (docs/design.md#kv-layout: lanes + 2, within [4, 256]). */
export function sequencesFor(lanes: number): number {
  return Math.min(256, Math.max(4, lanes + 2));
}

export function commonPrefix(a: number[], b: number[], max: number): number {
  const n = Math.min(a.length, b.length, max);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

export class KvPool {
  readonly sequences: KvSequence[];
  readonly cache: PrefixCache;
  readonly stats = { reusedTokens: 0, prefixCopies: 0, pressureEvictions: 0, spaceEvictions: 0 };
  /** All sequences draw from one pool of `capacity` cells (else each has its own buffer). */
  readonly shared: boolean;
  /** KV cells in all. */
  readonly capacity: number;

  constructor(
    private readonly context: LlamaContext,
    private readonly opts: KvPoolOptions,
  ) {
    this.shared = context.shared;
    this.capacity = context.poolCells;
    this.sequences = Array.from({ length: context.sequences }, (_, index) => ({ index, tokens: [], live: false, cells: emptyCells() }));
    this.cache = new PrefixCache(context, { bytes: opts.hostCacheBytes, tokens: this.capacity });
  }

  /** Cells in use, shared cells counted once. */
  get cellsUsed(): number {
    return cellsInUse(this.sequences);
  }

  /** Cells live lanes hold (what cannot be freed without pausing one). */
  get liveCells(): number {
    return cellsInUse(this.sequences.filter((s) => s.live));
  }

  /** Free cells of a shared pool (a per-lane pool has room for each lane's window by construction). */
  get freeCells(): number {
    return this.shared ? this.capacity - this.cellsUsed : Infinity;
  }

  /**
   * New cells seating `prompt` would add to what live lanes hold: all of it
   * but the part a live lane already has (in a shared pool a copy of it costs
   * no cells). A cache entry reused in place counts, since its cells become live.
   */
  cellsToSeat(prompt: number[]): number {
    let shared = 0;
    if (this.shared) {
      for (const s of this.sequences) if (s.live) shared = Math.max(shared, commonPrefix(s.tokens, prompt, prompt.length - 1));
    }
    return prompt.length - (shared >= MIN_PREFIX_REUSE ? shared : 0);
  }

  /** The longest prefix of `prompt` (at most `max` tokens) the cache holds, in the pool or in host memory. */
  cachedLength(prompt: number[], max: number): number {
    const found = this.cache.lookup(prompt, max);
    return Math.max(found.pool?.length ?? 0, found.host?.length ?? 0);
  }

  /** Its lane let go: what the sequence holds becomes a cache entry. */
  release(seq: KvSequence): void {
    seq.live = false;
    this.cache.publish(seq);
  }

  /**
   * Picks the sequence a prompt runs on and seeds it with the longest prefix
   * held anywhere: in place when a free sequence has it, else copied from a
   * live lane's sequence, else imported from the host tier. At least the
   * prompt's last token is always prefilled, since sampling needs its logits.
   * Whatever the chosen sequence held beyond the part kept goes to the host
   * tier first.
   *
   * Where the prompt does not run in place, freeSequence() picks where it runs.
   */
  seat(prompt: number[]): { seq: KvSequence; cached: number } {
    const reusable = prompt.length - 1;
    const worth = (len: number) => (len >= MIN_PREFIX_REUSE ? len : 0);
    const found = this.cache.lookup(prompt, reusable);
    let donor: KvSequence | undefined;
    let donorLen = 0;
    for (const s of this.sequences) {
      if (!s.live) continue;
      const l = commonPrefix(s.tokens, prompt, reusable);
      if (l > donorLen) [donor, donorLen] = [s, l];
    }
    const inPool = worth(found.pool?.length ?? 0);
    const inHost = worth(found.host?.length ?? 0);
    const live = worth(donorLen);
    let seq: KvSequence;
    if (inPool > 0 && inPool >= inHost && inPool >= live) {
      seq = this.sequences[found.pool!.entry.seq.index]!;
      this.keepOnly(seq, inPool);
    } else {
      seq = this.freeSequence();
      if (inHost > live) {
        const entry = found.host!.entry;
        this.cache.touch(entry); // so spilling the sequence below cannot trim it away first
        this.keepOnly(seq, 0);
        if (this.cache.restore(entry, seq)) {
          seq.tokens = entry.tokens.slice();
          ownCells(seq);
          this.cutTo(seq, inHost);
        }
      } else if (live > 0) {
        this.keepOnly(seq, 0);
        const copied = this.context.copyPrefix(donor!.index, seq.index, donorLen);
        seq.tokens = copied ? donor!.tokens.slice(0, donorLen) : [];
        if (copied && this.shared) shareCells(donor!, seq, donorLen);
        else ownCells(seq);
        if (copied) this.stats.prefixCopies++;
      } else {
        this.keepOnly(seq, commonPrefix(seq.tokens, prompt, reusable));
      }
    }
    seq.live = true;
    this.stats.reusedTokens += seq.tokens.length;
    return { seq, cached: seq.tokens.length };
  }

  /**
   * The free sequence a prompt that does not run in place takes: the one that
   * keeps the live lanes' sequences spanning the fewest buffers, then an empty
   * one, then the least recently used cache entry, then the lowest index.
   * llama.cpp's attention views every KV buffer from the lowest to the highest
   * sequence in a batch, idle ones between included, so a spread costs (4
   * lanes on 0,2,4,6 took 11.2 ms a step against 7.9 ms on 0-3, measured
   * here). An entry overwritten goes to the host tier, so losing it costs an
   * import later, not a prefill.
   */
  private freeSequence(): KvSequence {
    let lo = Infinity;
    let hi = -Infinity;
    for (const s of this.sequences) {
      if (!s.live) continue;
      lo = Math.min(lo, s.index);
      hi = Math.max(hi, s.index);
    }
    const cost = (s: KvSequence): number[] => [
      // One shared pool has no buffers to span.
      this.shared ? 0 : Math.max(hi, s.index) - Math.min(lo, s.index),
      s.tokens.length === 0 ? -1 : (this.cache.lastUsed(s) ?? -1),
      s.index,
    ];
    let best: KvSequence | undefined;
    let bestCost: number[] = [];
    for (const s of this.sequences) {
      if (s.live) continue;
      const c = cost(s);
      if (!best || c[0]! < bestCost[0]! || (c[0] === bestCost[0] && (c[1]! < bestCost[1]! || (c[1] === bestCost[1] && c[2]! < bestCost[2]!)))) {
        [best, bestCost] = [s, c];
      }
    }
    // lanes + 2 sequences: with at most `lanes` live lanes a free one always exists.
    return best!;
  }

  /** Takes a free sequence out of the cache and cuts it to `length` tokens, spilling what is cut to the host tier. */
  private keepOnly(seq: KvSequence, length: number): void {
    this.cache.withdraw(seq);
    if (seq.tokens.length > length) this.cache.spill(seq, length);
    this.cutTo(seq, length);
  }

  /**
   * The pressure watermarks (docs/design.md#memory-pressure): once the pool's occupancy
   * reaches the high mark, cached prefixes leave it, least recently used
   * first, for the host tier, until it is down to the low mark. Live lanes
   * are never touched.
   */
  relievePressure(): void {
    if (this.cache.poolEntryCount === 0) return;
    const total = this.capacity;
    let used = this.cellsUsed;
    if (used >= this.opts.pressureHigh * total) {
      const low = this.opts.pressureLow * total;
      for (const cached of this.cache.poolByAge()) {
        if (used <= low) break;
        this.keepOnly(this.sequences[cached.index]!, 0);
        this.stats.pressureEvictions++;
        used = this.cellsUsed;
      }
    }
    if (!this.shared) return;
    // A shared pool: every step attends over the cells up to the highest in
    // use, so cached prefixes keep at most one lane's share (docs/design.md#prefix-cache).
    const share = Math.floor(total / this.opts.lanes);
    let cached = used - this.liveCells;
    for (const entry of this.cache.poolByAge()) {
      if (cached <= share) break;
      this.keepOnly(this.sequences[entry.index]!, 0);
      this.stats.pressureEvictions++;
      cached = this.cellsUsed - this.liveCells;
    }
  }

  /**
   * Frees cells of a shared pool for `need` new ones by moving cached
   * prefixes to the host tier, least recently used first. False when no
   * cached prefix is left to move (only pausing a lane can free more).
   */
  evictForSpace(need: number): boolean {
    let evicted = false;
    for (const entry of this.cache.poolByAge()) {
      if (this.freeCells >= need) break;
      this.keepOnly(this.sequences[entry.index]!, 0);
      this.stats.spaceEvictions++;
      evicted = true;
    }
    return evicted;
  }

  /** A paused lane's sequence (now a cache entry) leaves the pool for the host tier, freeing its cells. */
  evictSequence(seq: KvSequence): void {
    if (seq.live || seq.tokens.length === 0) return;
    this.keepOnly(seq, 0);
    this.stats.spaceEvictions++;
  }

  /** Cuts a sequence back to `length` tokens; a memory that cannot cut mid-sequence (recurrent, hybrid) is emptied. */
  cutTo(seq: KvSequence, length: number): void {
    if (length >= seq.tokens.length) return;
    if (this.context.truncate(seq.index, length)) seq.tokens.length = length;
    else {
      this.context.truncate(seq.index, 0);
      seq.tokens = [];
    }
    cutCells(seq);
  }
}
