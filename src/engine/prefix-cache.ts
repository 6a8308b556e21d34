// The prefix cache (docs/design.md#prefix-cache): what finished requests left in the
// KV pool, plus the host tier, where prefixes that leave the pool are kept as
// llama.cpp's own state export and imported back when a prompt reuses them.
// One radix tree indexes both, by token ids only.
import type { LlamaContext } from "./context.ts";
import { PrefixTree, type PrefixMatch } from "./prefix-tree.ts";

/** A KV sequence as the cache sees it: its index and the tokens its cells hold. */
export interface CachedSequence {
  index: number;
  tokens: number[];
}

export type CacheEntry =
  | { kind: "pool"; seq: CachedSequence; usedAt: number }
  | { kind: "host"; blob: Uint8Array; tokens: number[]; usedAt: number };

export interface HostTierLimits {
  /** Bytes the host tier may hold; 0 turns it off. */
  bytes: number;
  /** Tokens it may hold (the pool's cell count, docs/design.md#host-tier). */
  tokens: number;
}

export interface CacheLookup {
  pool?: PrefixMatch<Extract<CacheEntry, { kind: "pool" }>>;
  host?: PrefixMatch<Extract<CacheEntry, { kind: "host" }>>;
}

/** Prefixes shorter than this are not worth a host-tier copy. */
const MIN_SPILL_TOKENS = 16;

export class PrefixCache {
  private readonly tree = new PrefixTree<CacheEntry>();
  private readonly poolEntries = new Map<number, Extract<CacheEntry, { kind: "pool" }>>();
  private clock = 0;
  hostBytes = 0;
  hostTokens = 0;
  readonly stats = { spills: 0, imports: 0, importFailures: 0, hostEvictions: 0 };

  constructor(
    private readonly context: LlamaContext,
    readonly hostLimits: HostTierLimits,
  ) {}

  get hostEntries(): number {
    return this.tree.size - this.poolEntries.size;
  }

  get poolEntryCount(): number {
    return this.poolEntries.size;
  }

  /** When a free sequence's entry was last published or used (a logical clock); undefined when it holds none. */
  lastUsed(seq: CachedSequence): number | undefined {
    return this.poolEntries.get(seq.index)?.usedAt;
  }

  /** A sequence's lane retired: what its cells hold becomes reusable. */
  publish(seq: CachedSequence): void {
    this.withdraw(seq);
    if (seq.tokens.length === 0) return;
    const entry = { kind: "pool" as const, seq, usedAt: ++this.clock };
    this.poolEntries.set(seq.index, entry);
    this.tree.insert(entry, seq.tokens);
  }

  /** A sequence is about to change (a lane takes it): it stops being a cache entry. */
  withdraw(seq: CachedSequence): void {
    const entry = this.poolEntries.get(seq.index);
    if (!entry) return;
    this.poolEntries.delete(seq.index);
    this.tree.remove(entry);
  }

  /** The longest prefix of `prompt` (at most `max` tokens) held in the pool and in host memory. */
  lookup(prompt: number[], max: number): CacheLookup {
    const found = this.tree.longest(
      prompt,
      max,
      (e) => e.kind,
      (a, b) => b.usedAt - a.usedAt,
    );
    return {
      pool: found.get("pool") as CacheLookup["pool"],
      host: found.get("host") as CacheLookup["host"],
    };
  }

  /**
   * Keeps a sequence's tokens in the host tier before its cells are cut below
   * `keep` tokens, unless another entry already covers them. Must be called
   * after withdraw(seq).
   */
  spill(seq: CachedSequence, keep = 0): void {
    const tokens = seq.tokens;
    if (
      this.hostLimits.bytes === 0 ||
      tokens.length - keep < MIN_SPILL_TOKENS ||
      tokens.length > this.hostLimits.tokens
    )
      return;
    const covered = this.tree.longest(tokens, tokens.length, () => "any").get("any");
    if (covered && covered.length === tokens.length) return;
    const blob = this.context.exportSequence(seq.index);
    if (!blob || blob.length > this.hostLimits.bytes) return;
    // Host entries that are prefixes of these tokens add nothing beside them.
    for (const e of this.tree.prefixesOf(tokens)) if (e.kind === "host") this.dropHost(e);
    const entry = { kind: "host" as const, blob, tokens: tokens.slice(), usedAt: ++this.clock };
    this.tree.insert(entry, entry.tokens);
    this.hostBytes += blob.length;
    this.hostTokens += entry.tokens.length;
    this.stats.spills++;
    this.trimHost();
  }

  /** Imports a host entry into an empty sequence; false when llama.cpp refuses it (the entry is dropped). */
  restore(entry: Extract<CacheEntry, { kind: "host" }>, seq: CachedSequence): boolean {
    if (!this.context.importSequence(seq.index, entry.blob)) {
      this.stats.importFailures++;
      this.dropHost(entry);
      return false;
    }
    entry.usedAt = ++this.clock;
    this.stats.imports++;
    return true;
  }

  /** Marks an entry used (it stays longest among equals and is evicted last). */
  touch(entry: CacheEntry): void {
    entry.usedAt = ++this.clock;
  }

  /** Free sequences holding cached tokens, least recently used first (pressure eviction order). */
  poolByAge(): CachedSequence[] {
    return [...this.poolEntries.values()].sort((a, b) => a.usedAt - b.usedAt).map((e) => e.seq);
  }

  /** Drops every host-tier entry (their KV was computed under another adapter set). */
  clearHost(): void {
    for (const e of [...this.tree.entries()]) if (e.kind === "host") this.dropHost(e);
  }

  private dropHost(entry: Extract<CacheEntry, { kind: "host" }>): void {
    if (!this.tree.tokensOf(entry)) return; // already dropped (e.g. trimmed while being restored)
    this.tree.remove(entry);
    this.hostBytes -= entry.blob.length;
    this.hostTokens -= entry.tokens.length;
  }

  /** Evicts least recently used host entries until the tier is within its limits. */
  private trimHost(): void {
    if (this.hostBytes <= this.hostLimits.bytes && this.hostTokens <= this.hostLimits.tokens) return;
    const host = [...this.tree.entries()]
      .filter((e): e is Extract<CacheEntry, { kind: "host" }> => e.kind === "host")
      .sort((a, b) => a.usedAt - b.usedAt);
    for (const e of host) {
      if (this.hostBytes <= this.hostLimits.bytes && this.hostTokens <= this.hostLimits.tokens) break;
      this.dropHost(e);
      this.stats.hostEvictions++;
    }
  }
}
