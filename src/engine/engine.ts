// The continuous-batching executor: lanes over KV sequences, one llama_decode
// per tick carrying every decoding lane's next token plus a budgeted chunk of
// pending prompt, then one sample per lane from its own sampler chain.
//
// KV layout (features.md 2.1): lanes + 2 sequences, each its own buffer of
// max-context cells. A sequence keeps the tokens of its last request after the
// lane retires (the prefix cache), so a later prompt that shares a prefix
// reuses those cells in place, copies them (llama_memory_seq_cp) from a
// sequence a live lane holds, or imports them from the host tier, where
// prefixes go when their cells are needed for something else.
import { LlamaContext } from "./context.ts";
import type { LlamaModel } from "./model.ts";
import { positionLogprobs, type TokenLogprob } from "./logprobs.ts";
import { PrefixCache } from "./prefix-cache.ts";
import { GrammarError, SamplerChain, type SamplingSpec } from "./sampling.ts";

export interface GenerateJob {
  id: string;
  prompt: number[];
  sampling: SamplingSpec;
  /** Most tokens to generate; the context window caps it further. */
  maxTokens: number;
  /** Decode to maxTokens even past end-of-generation tokens. */
  ignoreEos: boolean;
  /** Report each token's logprob and this many alternatives (0-20); off when undefined. */
  logprobs?: number;
  /** GBNF (root rule `root`) the reply must match. */
  grammar?: string;
  /**
   * Makes the grammar lazy: free text until this marker appears, the grammar from
   * the marker on (tool_choice "auto": a call that starts is held to its schema).
   */
  grammarTrigger?: string;
}

export type FinishReason = "stop" | "length" | "cancelled" | "error";

export interface FinishEvent {
  id: string;
  reason: FinishReason;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  error?: string;
  /** The error is the request's own fault (a grammar that cannot go on, a prompt that cannot fit). */
  clientError?: boolean;
}

export type TokenEvent = [id: string, token: number, logprobs?: TokenLogprob];

export interface TickEvents {
  /** Requests that got a lane this tick, with how many prompt tokens their KV already held. */
  admitted: { id: string; cachedTokens: number }[];
  /** [request id, token, logprobs when asked] in generation order. */
  tokens: TokenEvent[];
  finished: FinishEvent[];
}

export interface EngineOptions {
  lanes: number;
  cellsPerSequence: number;
  threads: number;
  /** Prompt tokens per tick across lanes. */
  prefillBudget: number;
  batchSize?: number;
  microBatchSize?: number;
  /** Bytes of host memory for prefixes that leave the pool; 0 = none (default: host tier off). */
  hostCacheBytes?: number;
  /** KV occupancy (0-1) that makes cached prefixes leave the pool (--pressure-high, default 0.85). */
  pressureHigh?: number;
  /** The occupancy eviction brings it down to (--pressure-low, default 0.70). */
  pressureLow?: number;
  /** Shared prompt tokens that make a queued request wait for a lane prefilling them (default 1024). */
  coalesceMin?: number;
}

export interface EngineSnapshot {
  lanes: number;
  activeLanes: number;
  queued: number;
  prefilling: number;
  sequences: number;
  cellsPerSequence: number;
  cellsUsed: number;
  /** The sequences (KV buffers) live lanes sit on, ascending. */
  liveSequences: number[];
  prefillBudget: number;
  ticks: number;
  decodedTokens: number;
  prefilledTokens: number;
  reusedTokens: number;
  prefixCopies: number;
  /** Queued requests that waited for another lane's prefill of their prefix instead of prefilling it too. */
  coalesced: number;
  /** Cached prefixes moved out of the pool because KV occupancy crossed the high watermark. */
  pressureEvictions: number;
  prefixCache: {
    poolEntries: number;
    hostEntries: number;
    hostBytes: number;
    hostBudgetBytes: number;
    spills: number;
    imports: number;
    importFailures: number;
    hostEvictions: number;
  };
  /** Tokens per second of engine time over the recent ticks. */
  decodeRate: number;
  prefillRate: number;
}

/** Recent ticks the rates in snapshot() are measured over. */
const RATE_WINDOW = 64;

interface KvSequence {
  index: number;
  /** The tokens whose KV this sequence holds, in position order. */
  tokens: number[];
  lane?: Lane;
}

interface Lane {
  job: GenerateJob;
  seq: KvSequence;
  chain: SamplerChain;
  cachedTokens: number;
  generated: number;
  limit: number;
  /** Next token to feed while decoding; undefined while the prompt is still prefilling. */
  next?: number;
  cancelled: boolean;
}

/** Shorter shared prefixes than this do not decide where a prompt runs (they save too little). */
const MIN_PREFIX_REUSE = 16;

/** Shared prompt tokens that make a queued request wait for another lane's prefill (features.md 5.5). */
const COALESCE_MIN = 1024;

/** Default pressure watermarks, as fractions of the pool's cells (features.md 4.7). */
const PRESSURE_HIGH = 0.85;
const PRESSURE_LOW = 0.7;

/** Sequence count for a lane count (features.md 2.1: lanes + 2, within [4, 256]). */
export function sequencesFor(lanes: number): number {
  return Math.min(256, Math.max(4, lanes + 2));
}

function commonPrefix(a: number[], b: number[], max: number): number {
  const n = Math.min(a.length, b.length, max);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

export class Engine {
  readonly context: LlamaContext;
  private readonly sequences: KvSequence[];
  private readonly lanes = new Set<Lane>();
  private readonly queue: GenerateJob[] = [];
  private readonly cancelledQueued = new Set<string>();
  /** [decoded, prefilled, milliseconds] of the recent ticks, oldest first. */
  private readonly recent: [number, number, number][] = [];
  /** Running totals, for /slots and tests. */
  readonly stats = { ticks: 0, decodedTokens: 0, prefilledTokens: 0, reusedTokens: 0, prefixCopies: 0, coalesced: 0, pressureEvictions: 0 };
  private readonly cache: PrefixCache;
  /** Queued requests that have waited for a shared prefill (counted once each in stats.coalesced). */
  private readonly waiting = new Set<string>();

  constructor(
    readonly model: LlamaModel,
    readonly opts: EngineOptions,
  ) {
    const sequences = sequencesFor(opts.lanes);
    this.context = new LlamaContext(model, {
      sequences,
      cellsPerSequence: opts.cellsPerSequence,
      batchSize: opts.batchSize ?? 2048,
      microBatchSize: opts.microBatchSize ?? 512,
      threads: opts.threads,
    });
    this.sequences = Array.from({ length: this.context.sequences }, (_, index) => ({ index, tokens: [] }));
    this.cache = new PrefixCache(this.context, {
      bytes: opts.hostCacheBytes ?? 0,
      tokens: this.context.sequences * this.context.cellsPerSequence,
    });
  }

  /** A snapshot for /slots. */
  snapshot(): EngineSnapshot {
    return {
      lanes: this.opts.lanes,
      activeLanes: this.lanes.size,
      queued: this.queue.length,
      prefilling: [...this.lanes].filter((l) => l.next === undefined).length,
      sequences: this.sequences.length,
      cellsPerSequence: this.context.cellsPerSequence,
      cellsUsed: this.sequences.reduce((n, s) => n + s.tokens.length, 0),
      liveSequences: [...this.lanes].map((l) => l.seq.index).sort((a, b) => a - b),
      prefillBudget: this.opts.prefillBudget,
      ...this.stats,
      prefixCache: {
        poolEntries: this.cache.poolByAge().length,
        hostEntries: this.cache.hostEntries,
        hostBytes: this.cache.hostBytes,
        hostBudgetBytes: this.cache.hostLimits.bytes,
        ...this.cache.stats,
      },
      ...this.rates(),
    };
  }

  private rates(): { decodeRate: number; prefillRate: number } {
    let decoded = 0;
    let prefilled = 0;
    for (const [d, p] of this.recent) {
      decoded += d;
      prefilled += p;
    }
    // A tick carries both kinds of work; each rate is its tokens over the time of ticks that did it.
    const decodeMs = this.recent.filter(([d]) => d > 0).reduce((n, [, , t]) => n + t, 0);
    const prefillMs = this.recent.filter(([, p]) => p > 0).reduce((n, [, , t]) => n + t, 0);
    return {
      decodeRate: decodeMs > 0 ? (decoded * 1000) / decodeMs : 0,
      prefillRate: prefillMs > 0 ? (prefilled * 1000) / prefillMs : 0,
    };
  }

  get activeLanes(): number {
    return this.lanes.size;
  }

  get queued(): number {
    return this.queue.length;
  }

  hasWork(): boolean {
    return this.lanes.size > 0 || this.queue.length > 0;
  }

  submit(job: GenerateJob): void {
    this.queue.push(job);
  }

  /** Marks a request cancelled; it is retired at the start of the next tick. */
  cancel(id: string): void {
    for (const lane of this.lanes) if (lane.job.id === id) lane.cancelled = true;
    if (this.queue.some((j) => j.id === id)) this.cancelledQueued.add(id);
  }

  /** Runs one tick: retire cancelled lanes, admit queued jobs, one decode, one sample per lane. */
  tick(): TickEvents {
    this.stats.ticks++;
    const events: TickEvents = { admitted: [], tokens: [], finished: [] };
    this.retireCancelled(events);
    this.admit(events);
    if (this.lanes.size === 0) return events;
    const before = [this.stats.decodedTokens, this.stats.prefilledTokens];
    const outputs = this.stageBatch();
    const started = performance.now();
    try {
      this.context.decode(outputs.staged);
    } catch (err) {
      this.failAll(events, outputs, (err as Error).message);
      return events;
    }
    this.recent.push([this.stats.decodedTokens - before[0]!, this.stats.prefilledTokens - before[1]!, performance.now() - started]);
    if (this.recent.length > RATE_WINDOW) this.recent.shift();
    this.sampleOutputs(events, outputs.sampled);
    this.relievePressure();
    return events;
  }

  /** Frees native resources. */
  close(): void {
    for (const lane of this.lanes) lane.chain.free();
    this.lanes.clear();
    this.context.free();
  }

  private finish(events: TickEvents, lane: Lane, reason: FinishReason, error?: string, clientError = false): void {
    this.lanes.delete(lane);
    lane.seq.lane = undefined;
    this.cache.publish(lane.seq);
    lane.chain.free();
    events.finished.push({
      id: lane.job.id,
      reason,
      promptTokens: lane.job.prompt.length,
      cachedTokens: lane.cachedTokens,
      completionTokens: lane.generated,
      ...(error ? { error } : {}),
      ...(clientError ? { clientError } : {}),
    });
  }

  private retireCancelled(events: TickEvents): void {
    for (const lane of [...this.lanes]) if (lane.cancelled) this.finish(events, lane, "cancelled");
    if (this.cancelledQueued.size === 0) return;
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const job = this.queue[i]!;
      if (!this.cancelledQueued.has(job.id)) continue;
      this.queue.splice(i, 1);
      this.waiting.delete(job.id);
      events.finished.push({ id: job.id, reason: "cancelled", promptTokens: job.prompt.length, cachedTokens: 0, completionTokens: 0 });
    }
    this.cancelledQueued.clear();
  }

  private admit(events: TickEvents): void {
    for (let i = 0; i < this.queue.length && this.lanes.size < this.opts.lanes; ) {
      const job = this.queue[i]!;
      if (this.awaitsSharedPrefill(job)) {
        this.waiting.add(job.id);
        i++;
        continue;
      }
      this.queue.splice(i, 1);
      if (this.waiting.delete(job.id)) this.stats.coalesced++;
      const room = this.context.cellsPerSequence;
      if (job.prompt.length === 0 || job.prompt.length >= room) {
        const error = job.prompt.length === 0 ? "empty prompt" : `prompt of ${job.prompt.length} tokens does not fit ${room} cells`;
        events.finished.push({ id: job.id, reason: "error", promptTokens: job.prompt.length, cachedTokens: 0, completionTokens: 0, error, clientError: true });
        continue;
      }
      let chain: SamplerChain;
      try {
        // ignore_eos never samples an end-of-generation token (as llama.cpp does), except
        // under a grammar, whose only way to finish is one.
        const banned = job.ignoreEos && job.grammar === undefined ? this.model.vocabInfo.eog : [];
        const grammar = job.grammar === undefined ? undefined : { gbnf: job.grammar, trigger: job.grammarTrigger };
        chain = new SamplerChain(this.model, job.sampling, job.prompt, grammar, banned);
      } catch (err) {
        const clientError = err instanceof GrammarError;
        events.finished.push({ id: job.id, reason: "error", promptTokens: job.prompt.length, cachedTokens: 0, completionTokens: 0, error: (err as Error).message, clientError });
        continue;
      }
      const { seq, cached } = this.seatFor(job.prompt);
      const lane: Lane = {
        job,
        seq,
        chain,
        cachedTokens: cached,
        generated: 0,
        limit: Math.min(job.maxTokens, room - job.prompt.length),
        cancelled: false,
      };
      seq.lane = lane;
      this.lanes.add(lane);
      events.admitted.push({ id: job.id, cachedTokens: cached });
    }
  }

  /**
   * Burst coalescing (features.md 5.5): a prompt that shares at least
   * coalesceMin tokens with a prompt a lane is still prefilling waits until
   * that lane has them in its KV, then copies them, instead of prefilling the
   * same tokens again beside it. Nothing waits for what the cache already holds.
   */
  private awaitsSharedPrefill(job: GenerateJob): boolean {
    const reusable = job.prompt.length - 1;
    const least = this.opts.coalesceMin ?? COALESCE_MIN;
    if (reusable < least) return false;
    for (const lane of this.lanes) {
      if (lane.next !== undefined) continue; // decoding: its whole prompt is in its KV
      const shared = commonPrefix(lane.job.prompt, job.prompt, reusable);
      if (shared < least || lane.seq.tokens.length >= shared) continue;
      const cached = this.cache.lookup(job.prompt, reusable);
      return Math.max(cached.pool?.length ?? 0, cached.host?.length ?? 0) < shared;
    }
    return false;
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
  private seatFor(prompt: number[]): { seq: KvSequence; cached: number } {
    const reusable = prompt.length - 1;
    const worth = (len: number) => (len >= MIN_PREFIX_REUSE ? len : 0);
    const found = this.cache.lookup(prompt, reusable);
    let donor: KvSequence | undefined;
    let donorLen = 0;
    for (const s of this.sequences) {
      if (!s.lane) continue;
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
        this.keepOnly(seq, 0);
        const entry = found.host!.entry;
        if (this.cache.restore(entry, seq)) {
          seq.tokens = entry.tokens.slice();
          this.cutTo(seq, inHost);
        }
      } else if (live > 0) {
        this.keepOnly(seq, 0);
        const copied = this.context.copyPrefix(donor!.index, seq.index, donorLen);
        seq.tokens = copied ? donor!.tokens.slice(0, donorLen) : [];
        if (copied) this.stats.prefixCopies++;
      } else {
        this.keepOnly(seq, commonPrefix(seq.tokens, prompt, reusable));
      }
    }
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
      if (!s.lane) continue;
      lo = Math.min(lo, s.index);
      hi = Math.max(hi, s.index);
    }
    const age = new Map(this.cache.poolByAge().map((s, i) => [s.index, i]));
    const cost = (s: KvSequence): number[] => [
      Math.max(hi, s.index) - Math.min(lo, s.index),
      s.tokens.length === 0 ? -1 : (age.get(s.index) ?? -1),
      s.index,
    ];
    let best: KvSequence | undefined;
    let bestCost: number[] = [];
    for (const s of this.sequences) {
      if (s.lane) continue;
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
   * The pressure watermarks (features.md 4.7): once the pool's occupancy
   * reaches the high mark, cached prefixes leave it, least recently used
   * first, for the host tier, until it is down to the low mark. Live lanes
   * are never touched.
   */
  private relievePressure(): void {
    const total = this.sequences.length * this.context.cellsPerSequence;
    let used = 0;
    for (const s of this.sequences) used += s.tokens.length;
    if (used < (this.opts.pressureHigh ?? PRESSURE_HIGH) * total) return;
    const low = (this.opts.pressureLow ?? PRESSURE_LOW) * total;
    for (const cached of this.cache.poolByAge()) {
      if (used <= low) break;
      const seq = this.sequences[cached.index]!;
      used -= seq.tokens.length;
      this.keepOnly(seq, 0);
      this.stats.pressureEvictions++;
    }
  }

  /** Cuts a sequence back to `length` tokens; a memory that cannot cut mid-sequence (recurrent, hybrid) is emptied. */
  private cutTo(seq: KvSequence, length: number): void {
    if (this.context.truncate(seq.index, length)) seq.tokens.length = length;
    else {
      this.context.truncate(seq.index, 0);
      seq.tokens = [];
    }
  }

  /**
   * Plans the tick (every decoding lane's next token, then prompt chunks
   * shortest-remaining-first within the budget) and stages it in ascending
   * sequence order: llama.cpp splits a batch whose sequences come out of order
   * into more steps (8 decode tokens on sequences 7..0 took 23 ms against
   * 14.5 ms for 0..7, measured here).
   */
  private stageBatch(): { staged: number; sampled: [Lane, number][]; rollback: [KvSequence, number][] } {
    const chunk = new Map<Lane, number>(); // tokens each lane puts in this tick
    const prefilling: Lane[] = [];
    let decoding = 0;
    for (const lane of this.lanes) {
      if (lane.next === undefined) prefilling.push(lane);
      else {
        chunk.set(lane, 1);
        decoding++;
      }
    }
    let budget = Math.min(this.opts.prefillBudget, this.context.batchSize - decoding);
    const remaining = (l: Lane) => l.job.prompt.length - l.seq.tokens.length;
    prefilling.sort((a, b) => remaining(a) - remaining(b));
    for (const lane of prefilling) {
      if (budget <= 0) break;
      const take = Math.min(budget, remaining(lane));
      chunk.set(lane, take);
      budget -= take;
    }
    const ctx = this.context;
    const sampled: [Lane, number][] = [];
    const rollback: [KvSequence, number][] = [];
    let n = 0;
    for (const [lane, count] of [...chunk].sort(([a], [b]) => a.seq.index - b.seq.index)) {
      const seq = lane.seq;
      rollback.push([seq, seq.tokens.length]);
      if (lane.next !== undefined) {
        ctx.stage(n, lane.next, seq.tokens.length, seq.index, true);
        seq.tokens.push(lane.next);
        sampled.push([lane, n++]);
        this.stats.decodedTokens++;
        continue;
      }
      const prompt = lane.job.prompt;
      for (let k = 0; k < count; k++) {
        const pos = seq.tokens.length;
        const last = pos === prompt.length - 1;
        ctx.stage(n, prompt[pos]!, pos, seq.index, last);
        seq.tokens.push(prompt[pos]!);
        if (last) sampled.push([lane, n]);
        n++;
      }
      this.stats.prefilledTokens += count;
    }
    return { staged: n, sampled, rollback };
  }

  private sampleOutputs(events: TickEvents, sampled: [Lane, number][]): void {
    const vocab = this.model;
    for (const [lane, index] of sampled) {
      let token: number;
      try {
        token = lane.chain.sample(this.context.handle, index);
      } catch (err) {
        // One lane's sampling failure (a grammar with no way forward) ends that lane only.
        this.finish(events, lane, "error", (err as Error).message, err instanceof GrammarError);
        continue;
      }
      if ((!lane.job.ignoreEos || lane.job.grammar !== undefined) && vocab.isEog(token)) {
        this.finish(events, lane, "stop");
        continue;
      }
      lane.generated++;
      lane.next = token;
      if (lane.job.logprobs === undefined) events.tokens.push([lane.job.id, token]);
      else {
        const row = this.context.logits(index);
        events.tokens.push([lane.job.id, token, positionLogprobs(row, token, lane.job.logprobs, lane.job.sampling.logitBias)]);
      }
      if (lane.generated >= lane.limit) this.finish(events, lane, "length");
    }
  }

  /** A failed decode fails its lanes; their sequences go back to what they held before. */
  private failAll(events: TickEvents, staged: { rollback: [KvSequence, number][] }, message: string): void {
    for (const [seq, length] of staged.rollback) this.cutTo(seq, length);
    for (const lane of [...this.lanes]) this.finish(events, lane, "error", message);
  }
}
