// The KV pool: lanes + 2 sequences (docs/design.md#kv-layout), either each with its
// own buffer of max-context cells or all drawing from one shared pool
// (kv-sizing.ts decides), and what they hold. A sequence keeps the tokens of
// its last request after its lane lets go (the prefix cache), so a later
// prompt that shares a prefix reuses those cells in place, copies them
// (llama_memory_seq_cp; in a shared pool the cells are only tagged, not
// copied) from a sequence a live lane holds, or imports them from the host
// tier, where prefixes go when their cells are needed for something else.
// The engine decides who runs; this decides where, and how many cells are
// free in a shared pool. Pinned prefixes (pins.ts) change only what gives
// way: eviction cuts a cached sequence to its pinned length, not to nothing.
import type { LlamaContext } from "./context.ts";
import { cellsInUse, cutCells, emptyCells, ownCells, shareCells, type SequenceCells } from "./kv-cells.ts";
import { isPrefix, PinSet } from "./pins.ts";
import { PrefixCache } from "./prefix-cache.ts";
import { commonPrefix } from "./token-prefix.ts";

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
  /**
   * Lanes: in a shared pool cached prefixes keep at most one lane's share of the cells (docs/design.md#prefix-cache).
   */
  lanes: number;
  /**
   * Percent of the pool's cells pinned prefixes may hold (docs/design.md#pinned-prefixes); 0 = they protect nothing.
   */
  pinBudgetPct: number;
  /** Clock for pin expiry, in milliseconds. */
  now?: () => number;
}

/** Shorter shared prefixes than this do not decide where a prompt runs (they save too little). */
const MIN_PREFIX_REUSE = 16;

/** Sequence count for a lane count (docs/design.md#kv-layout: lanes + 2, within [4, 256]). */
export function sequencesFor(lanes: number): number {
  return Math.min(256, Math.max(4, lanes + 2));
}

export class KvPool {
  readonly sequences: KvSequence[];
  readonly cache: PrefixCache;
  readonly stats = { reusedTokens: 0, prefixCopies: 0, pressureEvictions: 0, spaceEvictions: 0 };
  /** All sequences draw from one pool of `capacity` cells (else each has its own buffer). */
  readonly shared: boolean;
  /** KV cells in all. */
  readonly capacity: number;
  /** Pinned prompt prefixes (docs/design.md#pinned-prefixes). */
  readonly pins: PinSet;
  /** Pinned length of each cached sequence, valid while its cache entry and the pin set are unchanged. */
  private readonly pinnedMemo = new Map<number, { usedAt: number; version: number; length: number }>();

  constructor(
    private readonly context: LlamaContext,
    private readonly opts: KvPoolOptions,
  ) {
    this.shared = context.shared;
    this.capacity = context.poolCells;
    this.sequences = Array.from({ length: context.sequences }, (_, index) => ({
      index,
      tokens: [],
      live: false,
      cells: emptyCells(),
    }));
    this.cache = new PrefixCache(context, { bytes: opts.hostCacheBytes, tokens: this.capacity });
    this.pins = new PinSet({
      capacity: this.capacity,
      budgetPct: opts.pinBudgetPct,
      ...(opts.now ? { now: opts.now } : {}),
    });
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
      for (const s of this.sequences)
        if (s.live) shared = Math.max(shared, commonPrefix(s.tokens, prompt, prompt.length - 1));
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
    const holder =
      inPool > 0 && inPool >= inHost && inPool >= live ? this.sequences[found.pool!.entry.seq.index]! : undefined;
    if (holder && this.pinnedLength(holder) <= inPool) {
      seq = holder;
      this.keepOnly(seq, inPool);
    } else if (holder) {
      // Running in place would cut into a pinned prefix: the shared part is copied instead.
      seq = this.freeSequence(holder);
      this.keepOnly(seq, 0);
      this.copyInto(seq, holder, inPool);
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
        this.copyInto(seq, donor!, donorLen);
      } else {
        this.keepOnly(seq, commonPrefix(seq.tokens, prompt, reusable));
      }
    }
    seq.live = true;
    this.stats.reusedTokens += seq.tokens.length;
    return { seq, cached: seq.tokens.length };
  }

  /**
   * How many of `prompt`'s tokens seat() would give it without prefilling:
   * the longest worthwhile prefix in the pool, the host tier or a live lane.
   */
  seatableLength(prompt: number[]): number {
    const reusable = prompt.length - 1;
    let best = this.cachedLength(prompt, reusable);
    for (const s of this.sequences) if (s.live) best = Math.max(best, commonPrefix(s.tokens, prompt, reusable));
    return best >= MIN_PREFIX_REUSE ? best : 0;
  }

  /**
   * Seats a prompt on a free sequence filled from a state export of its first
   * `tokens` (a park artifact, src/engine/park.ts) instead of the prefix
   * cache. The cells are the sequence's own, counted like prefilled ones.
   * Undefined when llama.cpp refuses the export (the sequence is left empty
   * and free, and the caller seats the prompt the usual way).
   */
  seatImported(blob: Uint8Array, tokens: number[]): KvSequence | undefined {
    const seq = this.freeSequence();
    this.keepOnly(seq, 0);
    if (!this.context.importSequence(seq.index, blob)) return undefined;
    seq.tokens = tokens.slice();
    ownCells(seq);
    seq.live = true;
    return seq;
  }

  /** An emptied sequence takes positions [0, length) of `donor` (llama_memory_seq_cp; in a shared pool only a tag). */
  private copyInto(seq: KvSequence, donor: KvSequence, length: number): void {
    const copied = this.context.copyPrefix(donor.index, seq.index, length);
    seq.tokens = copied ? donor.tokens.slice(0, length) : [];
    if (copied && this.shared) shareCells(donor, seq, length);
    else ownCells(seq);
    if (copied) this.stats.prefixCopies++;
  }

  /**
   * The free sequence a prompt that does not run in place takes: one holding
   * no pinned prefix (docs/design.md#pinned-prefixes: those go last), then the
   * one that keeps the live lanes' sequences spanning the fewest buffers, then
   * an empty one, then the least recently used cache entry, then the lowest
   * index (never `exclude`).
   * llama.cpp's attention views every KV buffer from the lowest to the highest
   * sequence in a batch, idle ones between included, so a spread costs (4
   * lanes on 0,2,4,6 took 11.2 ms a step against 7.9 ms on 0-3, measured
   * here). An entry overwritten goes to the host tier, so losing it costs an
   * import later, not a prefill.
   */
  private freeSequence(exclude?: KvSequence): KvSequence {
    let lo = Infinity;
    let hi = -Infinity;
    for (const s of this.sequences) {
      if (!s.live) continue;
      lo = Math.min(lo, s.index);
      hi = Math.max(hi, s.index);
    }
    const cost = (s: KvSequence): number[] => [
      this.pinnedLength(s) > 0 ? 1 : 0,
      // One shared pool has no buffers to span.
      this.shared ? 0 : Math.max(hi, s.index) - Math.min(lo, s.index),
      s.tokens.length === 0 ? -1 : (this.cache.lastUsed(s) ?? -1),
      s.index,
    ];
    let best: KvSequence | undefined;
    let bestCost: number[] = [];
    for (const s of this.sequences) {
      if (s.live || s === exclude) continue;
      const c = cost(s);
      if (!best || lexicographicallyLess(c, bestCost)) [best, bestCost] = [s, c];
    }
    // lanes + 2 sequences: with at most `lanes` live lanes two free ones always exist.
    return best!;
  }

  /**
   * Takes a free sequence out of the cache and cuts it to `length` tokens,
   * spilling what is cut to the host tier. A pin whose tokens this takes out
   * of the pool, and that no other sequence still holds, has yielded: it is dropped.
   */
  private keepOnly(seq: KvSequence, length: number): void {
    this.cache.withdraw(seq);
    if (seq.tokens.length <= length) return;
    const cut = this.pins.cutBy(seq.tokens, length);
    this.cache.spill(seq, length);
    this.cutTo(seq, length);
    for (const pin of cut) if (!this.sequences.some((s) => isPrefix(pin.tokens, s.tokens))) this.pins.yieldPin(pin);
  }

  /**
   * Cuts a cached sequence to `length` tokens (the rest to the host tier); what stays is still a cache entry. False
   * when nothing was cut.
   */
  private trimCached(seq: KvSequence, length: number): boolean {
    if (seq.tokens.length <= length) return false;
    this.keepOnly(seq, length);
    this.cache.publish(seq);
    return true;
  }

  /** Cuts a cached sequence to its pinned prefix (to nothing when it holds none); false when all it holds is pinned. */
  private trimToPin(seq: KvSequence): boolean {
    return this.trimCached(seq, this.pinnedLength(seq));
  }

  /**
   * How much of a free sequence a pin protects: the longest live pin that is
   * a prefix of its tokens. Remembered per cache entry, since pressure relief
   * asks every tick while pinned prefixes keep the pool above its marks.
   */
  private pinnedLength(seq: KvSequence): number {
    if (this.pins.count === 0 || seq.tokens.length === 0) return 0;
    const usedAt = this.cache.lastUsed(seq);
    // Not a cache entry (a live lane's): its tokens may change, so nothing is remembered.
    if (usedAt === undefined) return this.pins.pinnedLength(seq.tokens);
    const memo = this.pinnedMemo.get(seq.index);
    if (memo && memo.usedAt === usedAt && memo.version === this.pins.version) return memo.length;
    const length = this.pins.pinnedLength(seq.tokens);
    this.pinnedMemo.set(seq.index, { usedAt, version: this.pins.version, length });
    return length;
  }

  /**
   * The pressure watermarks (docs/design.md#memory-pressure): once the pool's occupancy
   * reaches the high mark, cached prefixes leave it, least recently used
   * first, for the host tier, until it is down to the low mark. Live lanes
   * are never touched, and a pinned prefix stays (its sequence is cut to it).
   */
  relievePressure(): void {
    if (this.cache.poolEntryCount === 0) return;
    this.pins.expire();
    const total = this.capacity;
    let used = this.cellsUsed;
    if (used >= this.opts.pressureHigh * total) {
      const low = this.opts.pressureLow * total;
      for (const cached of this.cache.poolByAge()) {
        if (used <= low) break;
        if (!this.trimToPin(this.sequences[cached.index]!)) continue;
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
      if (!this.trimToPin(this.sequences[entry.index]!)) continue;
      this.stats.pressureEvictions++;
      cached = this.cellsUsed - this.liveCells;
    }
  }

  /**
   * Frees cells of a shared pool for `need` new ones by moving cached
   * prefixes to the host tier, least recently used first: first all that is
   * not pinned, then pinned prefixes too (docs/design.md#pinned-prefixes),
   * each sequence's longest pin yielding first. False when no cached prefix
   * is left to move (only pausing a lane can free more).
   */
  evictForSpace(need: number): boolean {
    this.pins.expire();
    let evicted = false;
    for (const entry of this.cache.poolByAge()) {
      if (this.freeCells >= need) return evicted;
      if (!this.trimToPin(this.sequences[entry.index]!)) continue;
      this.stats.spaceEvictions++;
      evicted = true;
    }
    for (const entry of this.cache.poolByAge()) {
      const seq = this.sequences[entry.index]!;
      while (this.freeCells < need && seq.tokens.length > 0) {
        this.trimCached(seq, this.pins.pinnedLength(seq.tokens, seq.tokens.length - 1));
        this.stats.spaceEvictions++;
        evicted = true;
      }
      if (this.freeCells >= need) break;
    }
    return evicted;
  }

  /**
   * A paused lane's sequence (now a cache entry) leaves the pool for the host
   * tier, freeing its cells; a pinned prefix of it stays until evictForSpace
   * finds nothing else to move.
   */
  evictSequence(seq: KvSequence): void {
    if (seq.live || seq.tokens.length === 0) return;
    if (this.trimToPin(seq)) this.stats.spaceEvictions++;
  }

  /**
   * Forgets every cached prefix, in the pool and in the host tier: the
   * adapter set changed, and KV computed under one set must never be served
   * under another (docs/api/lora.md#prefix-cache). Live lanes keep theirs
   * (the engine changes the set only with none running).
   */
  forgetCached(): void {
    for (const seq of this.sequences) {
      if (seq.live) continue;
      this.cache.withdraw(seq);
      this.cutTo(seq, 0);
    }
    this.cache.clearHost();
  }

  /** Cuts a sequence back to `length` tokens; a memory that cannot cut mid-sequence (recurrent, hybrid) is emptied. */
  cutTo(seq: KvSequence, length: number): void {
    if (length >= seq.tokens.length) return;
    if (this.context.truncate(seq.index, length)) seq.tokens.length = length;
    else {
      this.context.truncate(seq.index, 0);
      seq.tokens = [];
    }
    cutCells(
      seq,
      this.sequences.filter((s) => s !== seq),
    );
  }
}

function lexicographicallyLess(a: number[], b: number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return false;
}
