// Pinned prompt prefixes (docs/design.md#pinned-prefixes): a request may ask
// that the first tokens of its prompt stay in the KV pool for a while (the
// engine half of Anthropic's `cache_control` breakpoints). This module only
// keeps the set: which prefixes are pinned, until when, and within what
// budget; kv-pool.ts decides what a pin protects.
//
// The budget counts shared prefixes once (a system prompt pinned by every
// turn of a conversation costs its cells once), so the pins are kept sorted
// lexicographically: the union of the pinned token prefixes is then the sum
// of each pin's length less its common prefix with the pin before it, kept
// up to date on every insertion and removal instead of recomputed.
import { commonPrefix } from "./token-prefix.ts";

/**
 * Live pins at most. Each keeps its token array (an agent's turn pins up to
 * four prefixes of a prompt that may be 100k tokens long), and the budget
 * counts shared prefixes once, so without a count cap a long conversation's
 * pins could grow without bound inside the budget; past it the oldest go.
 */
const MAX_PINS = 256;

export interface PinSetOptions {
  /** KV cells in all (KvPool.capacity). */
  capacity: number;
  /** Percent of `capacity` all live pins together may hold; 0 = pins are recorded but protect nothing. */
  budgetPct: number;
  /** Clock for expiry, in milliseconds (injectable so tests need no sleeping). */
  now?: () => number;
}

export interface Pin {
  readonly tokens: readonly number[];
  /** When it stops protecting (the clock's milliseconds). */
  expiresAt: number;
  /** Last added or refreshed (a logical clock): the budget drops the lowest first. */
  usedAt: number;
  /** Tokens it shares with the pin before it in sorted order. */
  lcpPrev: number;
}

export interface PinSummary {
  count: number;
  /** The union of the live pins' token prefixes (shared prefixes counted once). */
  tokens: number;
  budgetTokens: number;
  /** Pins dropped for the budget or for space. */
  yielded: number;
}

/** `prefix` is a prefix of `tokens`. The last token is compared first: unrelated prompts differ there at once. */
export function isPrefix(prefix: readonly number[], tokens: readonly number[]): boolean {
  const n = prefix.length;
  if (n > tokens.length) return false;
  if (n > 0 && prefix[n - 1] !== tokens[n - 1]) return false;
  for (let i = 0; i < n; i++) if (prefix[i] !== tokens[i]) return false;
  return true;
}

export class PinSet {
  /** Cells all live pins together may hold (0 when pins protect nothing). */
  readonly budgetTokens: number;
  /** Pins protect what they cover (budgetPct above 0). */
  readonly protects: boolean;
  /** Changes whenever the set does (callers cache pinned lengths against it). */
  version = 0;
  yielded = 0;
  private readonly sorted: Pin[] = [];
  private union = 0;
  private clock = 0;
  private nextExpiry = Infinity;
  private readonly limit: number;
  private readonly now: () => number;

  constructor(opts: PinSetOptions) {
    const pct = Math.min(100, Math.max(0, opts.budgetPct));
    this.protects = pct > 0;
    this.budgetTokens = Math.floor((opts.capacity * pct) / 100);
    // Pins that protect nothing are still recorded, within the pool's size (the most any budget could keep).
    this.limit = this.protects ? this.budgetTokens : opts.capacity;
    this.now = opts.now ?? Date.now;
  }

  get count(): number {
    this.expire();
    return this.sorted.length;
  }

  /** The union of the live pins' token prefixes. */
  get tokens(): number {
    this.expire();
    return this.union;
  }

  summary(): PinSummary {
    this.expire();
    return { count: this.sorted.length, tokens: this.union, budgetTokens: this.budgetTokens, yielded: this.yielded };
  }

  /**
   * Pins `tokens` for `ttlMs`. The same tokens pinned again refresh the
   * pin's expiry (the later of the two) and make it the newest. A new pin
   * that takes the union past the budget drops the oldest pins until it
   * fits; one larger than the budget alone is not kept. False when not kept.
   * The array is kept as given: do not change it afterwards.
   */
  add(tokens: readonly number[], ttlMs: number): boolean {
    this.expire();
    if (tokens.length === 0 || !(ttlMs > 0)) return false;
    const expiresAt = this.now() + ttlMs;
    const { index, found } = this.search(tokens);
    if (found) {
      const pin = this.sorted[index]!;
      pin.expiresAt = Math.max(pin.expiresAt, expiresAt);
      pin.usedAt = ++this.clock;
      return true;
    }
    if (tokens.length > this.limit) {
      this.yielded++;
      return false;
    }
    const pin: Pin = { tokens, expiresAt, usedAt: ++this.clock, lcpPrev: 0 };
    this.insertAt(index, pin);
    this.nextExpiry = Math.min(this.nextExpiry, expiresAt);
    while (this.union > this.limit || this.sorted.length > MAX_PINS) {
      let oldest = 0;
      for (let i = 1; i < this.sorted.length; i++) if (this.sorted[i]!.usedAt < this.sorted[oldest]!.usedAt) oldest = i;
      this.removeAt(oldest);
      this.yielded++;
    }
    this.version++;
    return true;
  }

  /**
   * The longest live pin that is a prefix of `tokens` and at most `max`
   * long: how much of a sequence holding `tokens` is protected. 0 when pins
   * protect nothing.
   */
  pinnedLength(tokens: readonly number[], max = tokens.length): number {
    if (!this.protects || this.sorted.length === 0) return 0;
    this.expire();
    let best = 0;
    for (const pin of this.sorted) {
      const n = pin.tokens.length;
      if (n > best && n <= max && isPrefix(pin.tokens, tokens)) best = n;
    }
    return best;
  }

  /**
   * The protecting pins that are prefixes of `tokens` longer than `length` (what cutting `tokens` to `length` takes
   * away).
   */
  cutBy(tokens: readonly number[], length: number): Pin[] {
    if (!this.protects || this.sorted.length === 0) return [];
    this.expire();
    return this.sorted.filter((p) => p.tokens.length > length && isPrefix(p.tokens, tokens));
  }

  /** A pin gave way to space: it is dropped and counted. */
  yieldPin(pin: Pin): void {
    const { index, found } = this.search(pin.tokens);
    if (!found || this.sorted[index] !== pin) return;
    this.removeAt(index);
    this.yielded++;
    this.version++;
  }

  /** Drops the pins past their expiry; cheap until the soonest one is due. */
  expire(): void {
    const now = this.now();
    if (now < this.nextExpiry) return;
    let next = Infinity;
    const before = this.sorted.length;
    // From the end, so each removal's successor is one that stays.
    for (let i = this.sorted.length - 1; i >= 0; i--) {
      const pin = this.sorted[i]!;
      if (pin.expiresAt <= now) this.removeAt(i);
      else next = Math.min(next, pin.expiresAt);
    }
    this.nextExpiry = next;
    if (this.sorted.length !== before) this.version++;
  }

  /** Where `tokens` is, or would go, in lexicographic order. */
  private search(tokens: readonly number[]): { index: number; found: boolean } {
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const other = this.sorted[mid]!.tokens;
      const l = commonPrefix(other, tokens);
      if (l === other.length && l === tokens.length) return { index: mid, found: true };
      // `other` sorts first when it is a prefix of `tokens` or smaller where they differ.
      const otherFirst = l === other.length || (l < tokens.length && other[l]! < tokens[l]!);
      if (otherFirst) lo = mid + 1;
      else hi = mid;
    }
    return { index: lo, found: false };
  }

  private insertAt(index: number, pin: Pin): void {
    const prev = this.sorted[index - 1];
    const next = this.sorted[index];
    pin.lcpPrev = prev ? commonPrefix(prev.tokens, pin.tokens) : 0;
    this.union += pin.tokens.length - pin.lcpPrev;
    if (next) {
      const shared = commonPrefix(pin.tokens, next.tokens);
      // `next` now shares more with its new predecessor (never less: sorted order).
      this.union -= shared - next.lcpPrev;
      next.lcpPrev = shared;
    }
    this.sorted.splice(index, 0, pin);
  }

  private removeAt(index: number): void {
    const pin = this.sorted[index]!;
    const next = this.sorted[index + 1];
    this.union -= pin.tokens.length - pin.lcpPrev;
    if (next) {
      // In sorted order lcp(prev, next) = min(lcp(prev, pin), lcp(pin, next)), lcp being the common prefix.
      const shared = Math.min(pin.lcpPrev, next.lcpPrev);
      this.union += next.lcpPrev - shared;
      next.lcpPrev = shared;
    }
    this.sorted.splice(index, 1);
  }
}
