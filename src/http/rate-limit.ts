// Per-client token buckets (docs/api/openai.md#fill-in-the-middle): `capacity` tokens, refilled at
// `rate` per second; one request takes one. An empty bucket answers how long
// until the next token, for the 429's Retry-After.
import { RequestError } from "../daemon/request-error.ts";

export interface TakeResult {
  ok: boolean;
  /** Seconds until a token is back (whole, rounded up; at least 1) when !ok. */
  retryAfter: number;
}

/** Buckets idle this long are full again and forgotten. */
const SWEEP_EVERY = 1024;

export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private takes = 0;

  constructor(
    /** Tokens per second; 0 = unmetered. */
    readonly rate: number,
    readonly capacity: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get metered(): boolean {
    return this.rate > 0;
  }

  take(key: string): TakeResult {
    if (!this.metered) return { ok: true, retryAfter: 0 };
    const now = this.now();
    if (++this.takes % SWEEP_EVERY === 0) this.sweep(now);
    const b = this.buckets.get(key) ?? { tokens: this.capacity, at: now };
    b.tokens = Math.min(this.capacity, b.tokens + ((now - b.at) / 1000) * this.rate);
    b.at = now;
    this.buckets.set(key, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { ok: true, retryAfter: 0 };
    }
    return { ok: false, retryAfter: Math.max(1, Math.ceil((1 - b.tokens) / this.rate)) };
  }

  /** Drops buckets that have refilled completely (they behave as new ones). */
  private sweep(now: number): void {
    for (const [key, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * this.rate >= this.capacity) this.buckets.delete(key);
    }
  }
}

/**
 * Takes one fill-in-the-middle request from `peer`'s bucket, or refuses it: 429 completion_rate_limited with
 * Retry-After.
 */
export function chargeFimRequest(buckets: TokenBuckets, peer: string): void {
  const taken = buckets.take(peer);
  if (taken.ok) return;
  throw new RequestError(
    429,
    `fill-in-the-middle requests from this client are over --completion-rate (${buckets.rate}/s, burst ${buckets.capacity}); retry after ${taken.retryAfter} s`,
    "completion_rate_limited",
    null,
    { "retry-after": String(taken.retryAfter) },
  );
}
