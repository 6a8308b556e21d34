// Speculative decoding by prompt lookup (docs/design.md#speculative-decoding):
// a decoding lane's last three tokens (else two) are looked up in its own
// context, and the tokens that followed their last earlier occurrence are
// drafted. The engine stages the lane's next token and the draft in one
// decode and samples each position in turn from its own logits, keeping
// drafts while they equal what was sampled; the first sample that differs
// (or the one after the last draft) is the lane's next token, and the cells
// of the rejected drafts are cut off the KV. Every token is drawn by the
// lane's sampler chain exactly as without speculation, one draw per token in
// order, so the output has the same distribution (and, seeded, the same
// draws); only numerics of a wider batch can differ.
//
// Drafting costs decode work, so gates turn it off where it does not pay:
// a request whose drafts yield too little stops drafting (the yield floor),
// and per lane count the tokens per second with and without drafts (at each
// depth the adaptive gate tries) are compared (the throughput gate), an "off"
// measured again after a growing number of requests.

/**
 * The strategies a worker can run on llama.cpp: drafts from the lane's own context, or from a small model
 * (./draft-model.ts).
 */
export type SpecStrategy = "prompt-lookup" | "draft-model";

export interface SpeculationConfig {
  strategy: SpecStrategy;
  /** Draft depth, 1-15 (--spec-draft-tokens, default 4). */
  draftTokens: number;
  /** Accepted draft tokens per drafting round below which a request stops drafting; 0 = no floor (--spec-min-yield). */
  minYield: number;
  /** Drafting rounds a request's yield is judged after (--spec-yield-rounds). */
  yieldRounds: number;
  /** Compare speculative and plain decode per lane count (--spec-throughput-gate). */
  throughputGate: boolean;
  /** The gate also measures shallower drafts and keeps the fastest depth (--spec-adaptive). */
  adaptive: boolean;
  /** How much faster speculation must be to stay on (--spec-min-speedup). */
  minSpeedup: number;
  /** Decode steps each side of a throughput comparison measures (--spec-gate-probe-tokens). */
  probeTokens: number;
  /** Requests after an abandonment before measuring again, doubling; 0 = final (--spec-gate-reprobe). */
  reprobe: number;
  /** The most requests between re-measurements (--spec-gate-reprobe-max). */
  reprobeMax: number;
}

export const SPECULATION_DEFAULTS: Omit<SpeculationConfig, "strategy"> = {
  draftTokens: 4,
  minYield: 0.75,
  yieldRounds: 24,
  throughputGate: true,
  adaptive: true,
  minSpeedup: 1.08,
  probeTokens: 16,
  reprobe: 32,
  reprobeMax: 1024,
};

/** The most draft tokens a lane may carry (--spec-draft-tokens). */
export const MAX_DRAFT_TOKENS = 15;

/**
 * The draft for the context `held` followed by `next` (a lane's KV and the
 * token it feeds next): up to `depth` tokens that followed the last earlier
 * occurrence of the context's final three tokens, else of its final two
 * (continued into the draft itself where that occurrence reaches the end).
 * Empty when neither recurs.
 */
export function lookupDraft(held: readonly number[], next: number, depth: number): number[] {
  const end = held.length + 1;
  const at = (i: number) => (i < held.length ? held[i]! : next);
  for (const n of [3, 2]) {
    if (end <= n) continue;
    const tail = end - n;
    // The last earlier occurrence: scanned backwards from the latest start before the tail itself.
    const first = at(tail);
    for (let start = tail - 1; start >= 0; start--) {
      // Most positions differ at once (start < tail <= held.length: read directly).
      if (held[start] !== first) continue;
      let k = 1;
      while (k < n && at(start + k) === at(tail + k)) k++;
      if (k < n) continue;
      // Copied on past the context's end into the draft itself, as an overlapping copy
      // does: a loop of period p near the end drafts its full depth, not p tokens.
      const draft: number[] = [];
      for (let i = start + n; draft.length < depth; i++) draft.push(i < end ? at(i) : draft[i - end]!);
      return draft;
    }
  }
  return [];
}

/** One request's drafting record, for the yield floor. */
export class RequestYield {
  rounds = 0;
  proposed = 0;
  accepted = 0;
  /** Stopped drafting: its yield fell under the floor. */
  stopped = false;

  constructor(private readonly config: SpeculationConfig) {}

  /** A drafting round: `proposed` draft tokens, `accepted` of them kept. Returns the verdict once judged. */
  round(proposed: number, accepted: number): "pass" | "fail" | undefined {
    this.rounds++;
    this.proposed += proposed;
    this.accepted += accepted;
    if (this.config.minYield <= 0 || this.rounds !== this.config.yieldRounds) return undefined;
    if (this.accepted / this.rounds < this.config.minYield) {
      this.stopped = true;
      return "fail";
    }
    return "pass";
  }
}

interface Rate {
  ticks: number;
  tokens: number;
  ms: number;
}

/** The throughput gate's state for one lane count. */
interface LaneCountVerdict {
  /** Measuring: each probed depth's ticks (0 = plain decoding), until every one has probeTokens. */
  sides: Map<number, Rate>;
  /** Decided: the depth to draft at (0 = plain), until `until` requests have started (then measured again). */
  verdict?: number;
  until?: number;
  /** Requests to wait before the next re-measurement after an "off". */
  backoff: number;
}

/**
 * The depths a lane count's probe measures, then plain decoding (0): the
 * configured depth alone, or with --spec-adaptive that depth halved down to 1
 * (4 -> 4, 2, 1), the fastest of them kept.
 */
export function probeDepths(config: SpeculationConfig): number[] {
  const depths = [config.draftTokens];
  if (config.adaptive) for (let d = Math.floor(config.draftTokens / 2); d >= 1; d = Math.floor(d / 2)) depths.push(d);
  return [...depths, 0];
}

/**
 * How deep to draft this tick, per lane count (0 = not at all), and the
 * strategy-wide abandonment of the yield floor. The engine asks
 * `depth(lanes)` once a tick and reports the tick back with `observe`.
 */
export class SpeculationGates {
  private readonly counts = new Map<number, LaneCountVerdict>();
  private readonly depths: number[];
  private failedRequests = 0;
  private passedRequests = 0;
  /** Two failing requests and none passing: the strategy is abandoned for good. */
  abandoned = false;
  private requests = 0;

  constructor(private readonly config: SpeculationConfig) {
    this.depths = probeDepths(config);
  }

  /** A request started (re-measurement periods count requests). */
  requestStarted(): void {
    this.requests++;
  }

  /** A request's yield verdict (RequestYield.round). */
  judged(verdict: "pass" | "fail"): void {
    if (verdict === "pass") this.passedRequests++;
    else this.failedRequests++;
    if (this.failedRequests >= 2 && this.passedRequests === 0) this.abandoned = true;
  }

  /** The draft depth for this tick with `lanes` lanes decoding; 0 = decode plainly. */
  depth(lanes: number): number {
    if (this.abandoned) return 0;
    if (!this.config.throughputGate) return this.config.draftTokens;
    const state = this.state(lanes);
    if (state.verdict !== undefined) {
      if (state.until === undefined || this.requests < state.until) return state.verdict;
      // Time to measure again.
      delete state.verdict;
      state.sides.clear();
    }
    // Measuring: probeTokens steps at each depth in turn, plain last.
    return this.depths.find((d) => (state.sides.get(d)?.ticks ?? 0) < this.config.probeTokens) ?? 0;
  }

  /**
   * A pure decode tick with `lanes` lanes decoding, asked to draft `depth` deep (0: plain), emitted `tokens` tokens in
   * `ms`.
   */
  observe(lanes: number, depth: number, tokens: number, ms: number): void {
    if (!this.config.throughputGate || this.abandoned || tokens === 0) return;
    const state = this.state(lanes);
    if (state.verdict !== undefined) return;
    let side = state.sides.get(depth);
    if (!side) state.sides.set(depth, (side = { ticks: 0, tokens: 0, ms: 0 }));
    side.ticks++;
    side.tokens += tokens;
    side.ms += ms;
    const p = this.config.probeTokens;
    if (this.depths.some((d) => (state.sides.get(d)?.ticks ?? 0) < p)) return;
    const rate = (d: number) => state.sides.get(d)!.tokens / state.sides.get(d)!.ms;
    const best = this.depths.filter((d) => d > 0).reduce((a, b) => (rate(b) > rate(a) ? b : a));
    if (rate(best) >= this.config.minSpeedup * rate(0)) {
      state.verdict = best;
      delete state.until;
      state.backoff = this.config.reprobe;
    } else {
      state.verdict = 0;
      if (this.config.reprobe > 0) {
        state.until = this.requests + state.backoff;
        state.backoff = Math.min(state.backoff * 2, this.config.reprobeMax);
      }
    }
  }

  private state(lanes: number): LaneCountVerdict {
    let state = this.counts.get(lanes);
    if (!state) {
      state = { sides: new Map(), backoff: Math.max(1, this.config.reprobe) };
      this.counts.set(lanes, state);
    }
    return state;
  }
}
