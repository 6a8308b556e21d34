// The continuous-batching executor: lanes over KV sequences, one llama_decode
// per tick carrying every decoding lane's next token plus a budgeted chunk of
// pending prompt, then one sample per lane from its own sampler chain.
//
// Which request runs when (QoS, preemption, deadlines) is decided with
// scheduler.ts; where its KV lives, with kv-pool.ts. On a shared pool the
// engine also keeps the lanes within its cells: a request starts only when
// its prompt fits beside what the live lanes hold, and a tick that finds too
// few free cells first moves cached prefixes to the host tier, then pauses
// the least urgent lane, before it decodes.
import type { Pointer } from "bun:ffi";
import type { KvTypes } from "../gguf/kv-type.ts";
import { DecodeError, LlamaContext } from "./context.ts";
import type { LlamaModel } from "./model.ts";
import { positionLogprobs } from "./logprobs.ts";
import type { EngineSnapshot, FinishReason, GenerateJob, TickEvents } from "./jobs.ts";
import { KvPool, sequencesFor, type KvSequence } from "./kv-pool.ts";
import { GrammarError, SamplerChain } from "./sampling.ts";
import { commonPrefix } from "./token-prefix.ts";
import { modelIdentity, openPark, sealPark } from "./park.ts";
import { lookupDraft, RequestYield, SpeculationGates, type SpeculationConfig } from "./speculation.ts";
import { ModelDrafter, type DraftRequest } from "./draft-model.ts";
import {
  ClassQueues,
  DEFAULT_QOS,
  PrefillBudget,
  preempts,
  QOS,
  QOS_NAMES,
  type ClassLanes,
  type QosClass,
} from "./scheduler.ts";

export interface EngineOptions {
  lanes: number;
  /** The KV of offloaded layers on their device (default); false keeps it on the host (--no-kv-offload). */
  kvOffload?: boolean;
  /** The KV cache's element types, of the model's context and the draft's (f16 unless said). */
  kvTypes?: KvTypes;
  /** Per-lane layout: each sequence's own buffer, and the window (ignored with sharedCells). */
  cellsPerSequence: number;
  /** Shared layout: one pool of this many cells all sequences draw from (kv-sizing.ts). */
  sharedCells?: number;
  /** Shared layout: the most tokens one conversation may hold (default: the whole pool). */
  window?: number;
  threads: number;
  /**
   * Prompt tokens per tick across lanes (64-4096), or 0 for the adaptive controller (docs/design.md#prefill-budget).
   */
  prefillBudget: number;
  /** Lane caps per class (--class-lanes). */
  classLanes?: ClassLanes;
  /** Queue-aging period and starvation bound in ticks (--starvation-ticks, default 8; 0 = no aging). */
  starvationTicks?: number;
  batchSize?: number;
  microBatchSize?: number;
  /**
   * Bytes of host memory for prefixes that leave the pool; 0 = none (default:
   * host tier off). A function is asked once the context (and its KV) exists.
   */
  hostCacheBytes?: number | (() => number);
  /** KV occupancy (0-1) that makes cached prefixes leave the pool (--pressure-high, default 0.85). */
  pressureHigh?: number;
  /** The occupancy eviction brings it down to (--pressure-low, default 0.70). */
  pressureLow?: number;
  /** Shared prompt tokens that make a queued request wait for a lane prefilling them (default 1024). */
  coalesceMin?: number;
  /** Percent of the pool's cells pinned prefixes may hold (--pin-budget-pct, default 50; 0 = pins protect nothing). */
  pinBudgetPct?: number;
  /** Clock for pin expiry in milliseconds (default Date.now; tests pass their own). */
  now?: () => number;
  /** Speculative decoding (--speculate); off when absent. */
  speculation?: SpeculationConfig;
  /** The draft model of the "draft-model" strategy (same vocabulary; the caller owns and frees it). */
  draftModel?: LlamaModel;
}

/** A LoRA adapter as the engine applies it: libllama's handle and its scale. */
export interface AdapterBinding {
  handle: Pointer;
  scale: number;
}

/** An adapter set as a comparable key (handles and scales, in order). */
function adapterKey(set: readonly AdapterBinding[]): string {
  return set.map((a) => `${a.handle}:${a.scale}`).join(",");
}

/** Recent ticks the rates in snapshot() are measured over. */
const RATE_WINDOW = 64;

interface Lane {
  job: GenerateJob;
  qos: QosClass;
  /**
   * The tokens its KV must hold before the next sample: the prompt, or after a preemption the prompt and the reply so
   * far.
   */
  target: number[];
  /** Tick of its last prefill chunk, for the starvation rule. */
  prefilledAt: number;
  /**
   * No preemption takes it before this tick: it was started or resumed this
   * tick, or got its lane by aging (then it keeps it for one aging period, so
   * it makes progress instead of being paused again at once).
   */
  protectedUntil: number;
  seq: KvSequence;
  chain: SamplerChain;
  cachedTokens: number;
  /** Of cachedTokens, those restored from a park artifact (GenerateJob.resume). */
  resumedTokens?: number;
  generated: number;
  limit: number;
  /** Next token to feed while decoding; undefined while the prompt is still prefilling. */
  next?: number;
  cancelled: boolean;
  /** Admission order (latest is paused first when a shared pool runs out of cells). */
  order: number;
  /** Its drafting record, when speculation is on and the request may draft (no grammar, logit_bias or logprobs). */
  drafts?: RequestYield;
}

/**
 * A lane's place in a staged batch: its first output row, what its KV held before, and the draft staged after its next
 * token.
 */
interface StagedLane {
  lane: Lane;
  row: number;
  before: number;
  draft: number[];
}

/**
 * Shared prompt tokens that make a queued request wait for another lane's prefill (docs/design.md#burst-coalescing).
 */
const COALESCE_MIN = 1024;

/** Queue-aging period in ticks (--starvation-ticks). */
const STARVATION_TICKS = 8;

/**
 * Tick lengths the adaptive prefill budget aims at on llama.cpp: a lane free, every lane busy
 * (docs/design.md#prefill-budget).
 */
const TICK_TARGET_FREE_MS = 50;
const TICK_TARGET_BUSY_MS = 250;

/** The request a job is a choice of: its group, else the job alone (GenerateJob.group). */
const groupOf = (job: GenerateJob): string => job.group ?? job.id;

/** A queued request: new, or paused by a preemption with its lane kept whole. */
interface Queued {
  job: GenerateJob;
  paused?: Lane;
}

/**
 * Cells kept free per live lane (plus one) before a new request may start on a
 * shared pool: room for the lanes to grow some ticks before relief is needed.
 */
const HEADROOM_PER_LANE = 16;

/** Default pressure watermarks, as fractions of the pool's cells (docs/design.md#memory-pressure). */
const PRESSURE_HIGH = 0.85;
const PRESSURE_LOW = 0.7;

/** Default share of the pool's cells pinned prefixes may hold, percent (docs/design.md#pinned-prefixes). */
const PIN_BUDGET_PCT = 50;

/**
 * The most cells a draft model's own KV pool takes (its lanes share it; one that overflows just drafts nothing that
 * tick).
 */
const DRAFT_POOL_MAX = 262144;

/** Most pins one request may carry (Anthropic allows 4 cache breakpoints). */
const MAX_PINS = 4;

export { sequencesFor } from "./kv-pool.ts";
export type { EngineSnapshot, FinishEvent, FinishReason, GenerateJob, TickEvents, TokenEvent } from "./jobs.ts";

export class Engine {
  readonly context: LlamaContext;
  /** The most tokens one conversation (prompt and reply) may hold. */
  readonly window: number;
  private readonly pool: KvPool;
  private readonly lanes = new Set<Lane>();
  private readonly queue: ClassQueues<Queued>;
  private readonly prefill: PrefillBudget;
  private readonly cancelledQueued = new Set<string>();
  /** [decoded, prefilled, milliseconds] of the recent ticks, oldest first. */
  private readonly recent: [number, number, number][] = [];
  private readonly counters = {
    ticks: 0,
    decodedTokens: 0,
    generatedTokens: 0,
    prefilledTokens: 0,
    coalesced: 0,
    preemptions: 0,
    resumes: 0,
    starvationGrants: 0,
    expired: 0,
    spacePauses: 0,
    adapterSwitches: 0,
    specProposed: 0,
    specAccepted: 0,
    parks: 0,
    parkResumes: 0,
  };
  /**
   * Where a tick's wall time goes, summed (milliseconds, ticks that decoded):
   * the whole tick, llama_decode, sampling, and the time between one busy
   * tick's end and the next one's start (the worker's IPC send and event-loop
   * turn). bench/tick-profile.ts reads them through /slots.
   */
  private readonly timing = { ticks: 0, tickMs: 0, decodeMs: 0, sampleMs: 0, betweenMs: 0 };
  /** When the last tick that left lanes busy ended (undefined: the engine went idle since). */
  private busyTickEnded?: number;
  /** modelIdentity() of the model, for park artifacts (computed at the first park or resume). */
  private parkIdentity?: string;
  /** Speculation's gates, when it is on. */
  private readonly gates?: SpeculationGates;
  /** The draft model's drafter, under the "draft-model" strategy; prompt lookup otherwise. */
  private readonly drafter?: ModelDrafter;
  private admissions = 0;
  /** Queued requests that have waited for a shared prefill (counted once each in stats.coalesced). */
  private readonly waiting = new Set<string>();
  /** The LoRA set decodes apply now, as adapterKey() gives it ("" = none). */
  private adapterKey = "";
  /** A LoRA set waiting for the lanes under the current one to finish (setAdapters), and who waits for it. */
  private pendingAdapters?: { set: AdapterBinding[]; applied: (() => void)[] };

  constructor(
    readonly model: LlamaModel,
    readonly opts: EngineOptions,
  ) {
    const sequences = sequencesFor(opts.lanes);
    if (opts.speculation) this.gates = new SpeculationGates(opts.speculation);
    this.queue = new ClassQueues(opts.starvationTicks ?? STARVATION_TICKS);
    this.prefill = new PrefillBudget({
      budget: opts.prefillBudget,
      targetFreeMs: TICK_TARGET_FREE_MS,
      targetBusyMs: TICK_TARGET_BUSY_MS,
    });
    this.context = new LlamaContext(model, {
      sequences,
      cellsPerSequence: opts.cellsPerSequence,
      ...(opts.sharedCells === undefined ? {} : { sharedCells: opts.sharedCells }),
      batchSize: opts.batchSize ?? 2048,
      microBatchSize: opts.microBatchSize ?? 512,
      threads: opts.threads,
      ...(opts.kvOffload === undefined ? {} : { kvOffload: opts.kvOffload }),
      ...(opts.kvTypes ? { kvTypes: opts.kvTypes } : {}),
    });
    if (opts.speculation?.strategy === "draft-model") {
      try {
        if (!opts.draftModel) throw new Error("the draft-model strategy needs its draft model");
        // One thread: a second pool of spinning threads beside the model's would slow every decode of both.
        this.drafter = new ModelDrafter(opts.draftModel, {
          sequences,
          cells: Math.min(this.context.poolCells, DRAFT_POOL_MAX),
          threads: 1,
          ...(opts.kvTypes ? { kvTypes: opts.kvTypes } : {}),
        });
      } catch (err) {
        this.context.free();
        throw err;
      }
    }
    this.window = this.context.shared
      ? Math.min(opts.window ?? this.context.poolCells, this.context.poolCells)
      : this.context.cellsPerSequence;
    this.pool = new KvPool(this.context, {
      hostCacheBytes: typeof opts.hostCacheBytes === "function" ? opts.hostCacheBytes() : (opts.hostCacheBytes ?? 0),
      pressureHigh: opts.pressureHigh ?? PRESSURE_HIGH,
      pressureLow: opts.pressureLow ?? PRESSURE_LOW,
      lanes: opts.lanes,
      pinBudgetPct: opts.pinBudgetPct ?? PIN_BUDGET_PCT,
      ...(opts.now ? { now: opts.now } : {}),
    });
  }

  /** Running totals, for /slots and tests. */
  get stats() {
    return { ...this.counters, ...this.pool.stats };
  }

  /** A snapshot for /slots. */
  snapshot(): EngineSnapshot {
    return {
      lanes: this.opts.lanes,
      activeLanes: this.lanes.size,
      queued: this.queue.size,
      prefilling: [...this.lanes].filter((l) => l.next === undefined).length,
      sequences: this.pool.sequences.length,
      layout: this.pool.shared ? "shared" : "per-lane",
      cellsPerSequence: this.window,
      poolCells: this.pool.capacity,
      cellsUsed: this.pool.cellsUsed,
      liveSequences: [...this.lanes].map((l) => l.seq.index).sort((a, b) => a - b),
      prefillBudget: Math.min(this.prefill.next(this.newcomerCouldStart()), this.context.microBatchSize),
      ...(this.prefill.msPerToken === undefined ? {} : { msPerPromptToken: this.prefill.msPerToken }),
      queueDepths: this.queue.depths(),
      classLanes: this.laneCounts(),
      paused: this.queue.items().filter((q) => q.paused).length,
      ...this.stats,
      prefixCache: {
        poolEntries: this.pool.cache.poolEntryCount,
        hostEntries: this.pool.cache.hostEntries,
        hostBytes: this.pool.cache.hostBytes,
        hostBudgetBytes: this.pool.cache.hostLimits.bytes,
        ...this.pool.cache.stats,
      },
      pins: this.pool.pins.summary(),
      ...this.rates(),
      timing: { ...this.timing },
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
    return this.queue.size;
  }

  hasWork(): boolean {
    return this.lanes.size > 0 || this.queue.size > 0 || this.pendingAdapters !== undefined;
  }

  /**
   * Changes the LoRA adapter set (docs/api/lora.md). One llama_context applies
   * one set to every sequence of a decode, so lanes under two sets cannot
   * share a tick: the change waits until every request running (or paused by
   * a preemption) under the current set has finished, requests submitted
   * after it wait behind it, and it is applied between ticks, at once when
   * nothing runs. A new set empties the prefix cache (KvPool.forgetCached):
   * KV computed under one set is never served under another. `applied` runs
   * once the context no longer uses the previous set, so an adapter left out
   * may then be freed. A later call before this one applied replaces its set.
   */
  setAdapters(set: readonly AdapterBinding[], applied?: () => void): void {
    const pending = this.pendingAdapters ?? { set: [], applied: [] };
    pending.set = set.slice();
    if (applied) pending.applied.push(applied);
    this.pendingAdapters = pending;
    this.applyAdapters();
  }

  /** Applies a pending adapter set once no lane runs and no paused lane waits under the current one. */
  private applyAdapters(): void {
    const pending = this.pendingAdapters;
    if (!pending || this.lanes.size > 0 || this.queue.items().some((q) => q.paused)) return;
    this.pendingAdapters = undefined;
    const key = adapterKey(pending.set);
    if (key !== this.adapterKey) {
      this.context.setAdapters(pending.set);
      this.adapterKey = key;
      this.pool.forgetCached();
      this.counters.adapterSwitches++;
    }
    for (const done of pending.applied) done();
  }

  submit(job: GenerateJob): void {
    this.queue.push({ job }, job.qos ?? DEFAULT_QOS, this.counters.ticks);
  }

  /** Marks a request cancelled; it is retired at the start of the next tick. */
  cancel(id: string): void {
    for (const lane of this.lanes) if (lane.job.id === id) lane.cancelled = true;
    if (this.queue.items().some((q) => q.job.id === id)) this.cancelledQueued.add(id);
  }

  /** A request arriving now could start after this tick: a lane is free, or one an interactive request may preempt. */
  private newcomerCouldStart(): boolean {
    if (this.lanes.size < this.opts.lanes) return true;
    for (const lane of this.lanes) if (lane.qos > QOS.interactive) return true;
    return false;
  }

  private laneCounts(): [number, number, number, number] {
    const counts: [number, number, number, number] = [0, 0, 0, 0];
    for (const lane of this.lanes) counts[lane.qos]++;
    return counts;
  }

  /** Runs one tick: retire cancelled lanes, admit queued jobs, one decode, one sample per lane. */
  tick(): TickEvents {
    const entered = performance.now();
    const between = this.busyTickEnded === undefined ? undefined : entered - this.busyTickEnded;
    this.busyTickEnded = undefined;
    this.counters.ticks++;
    const events: TickEvents = { admitted: [], tokens: [], finished: [] };
    this.retireCancelled(events);
    this.applyAdapters();
    this.admit(events);
    if (this.lanes.size === 0) return events;
    const before = [this.counters.decodedTokens, this.counters.prefilledTokens];
    let outputs: ReturnType<Engine["stageBatch"]>;
    let started: number;
    // The throughput gate's clock starts before staging: a draft model decodes there.
    const staging = performance.now();
    for (;;) {
      outputs = this.stageBatch();
      started = performance.now();
      // A shared pool too full for this tick is relieved first rather than have llama_decode
      // refuse. Staging already put the batch's tokens in their sequences, so its cells are
      // counted in use: the batch fits while the count stays within the pool.
      if (this.pool.freeCells >= 0) {
        try {
          this.context.decode(outputs.staged);
          break;
        } catch (err) {
          // No slot on a shared pool: nothing of the batch was applied (llama.cpp places
          // every micro-batch before computing any), so relieve it and try again.
          if (!(err instanceof DecodeError && err.noSlot && this.pool.shared)) {
            this.failAll(events, outputs, (err as Error).message);
            return events;
          }
        }
      }
      this.unstage(outputs, before);
      this.makeRoom(events, outputs.staged);
      if (this.lanes.size === 0) return events;
    }
    const decodedAt = performance.now();
    const tickMs = decodedAt - started;
    this.sampleOutputs(events, outputs.sampled);
    const sampledAt = performance.now();
    // After sampling: accepted draft tokens count as decoded (the rates and the budget see them).
    const decoded = this.counters.decodedTokens - before[0]!;
    const prefilled = this.counters.prefilledTokens - before[1]!;
    this.recent.push([decoded, prefilled, tickMs]);
    this.prefill.observe(prefilled, decoded, tickMs);
    if (this.recent.length > RATE_WINDOW) this.recent.shift();
    // The throughput gate compares pure decode ticks only (a prompt chunk would weigh on either side).
    // Sampling counts too: a draft's positions are each sampled.
    if (prefilled === 0)
      this.gates?.observe(outputs.decoding, outputs.depth, events.tokens.length, performance.now() - staging);
    this.pool.relievePressure();
    const ended = performance.now();
    const t = this.timing;
    t.ticks++;
    t.tickMs += ended - entered;
    t.decodeMs += tickMs;
    t.sampleMs += sampledAt - decodedAt;
    if (between !== undefined) t.betweenMs += between;
    if (this.lanes.size > 0) this.busyTickEnded = ended;
    return events;
  }

  /** Frees native resources. */
  close(): void {
    this.drafter?.close();
    for (const lane of this.lanes) lane.chain.free();
    for (const q of this.queue.items()) q.paused?.chain.free();
    this.lanes.clear();
    this.context.free();
  }

  private finish(events: TickEvents, lane: Lane, reason: FinishReason, error?: string, clientError = false): void {
    const parked = reason === "stop" || reason === "length" || reason === "cancelled" ? this.seal(lane) : undefined;
    this.lanes.delete(lane);
    this.pool.release(lane.seq);
    lane.chain.free();
    events.finished.push({
      id: lane.job.id,
      reason,
      promptTokens: lane.job.prompt.length,
      cachedTokens: lane.cachedTokens,
      completionTokens: lane.generated,
      ...(error ? { error } : {}),
      ...(clientError ? { clientError } : {}),
      ...(lane.drafts && lane.drafts.proposed > 0
        ? { spec: { proposed: lane.drafts.proposed, accepted: lane.drafts.accepted } }
        : {}),
      ...(parked ? { parked } : {}),
      ...(lane.resumedTokens !== undefined ? { resumedTokens: lane.resumedTokens } : {}),
    });
  }

  private retireCancelled(events: TickEvents): void {
    for (const lane of [...this.lanes]) if (lane.cancelled) this.finish(events, lane, "cancelled");
    if (this.cancelledQueued.size === 0) return;
    for (const q of this.queue.items()) {
      if (!this.cancelledQueued.has(q.job.id)) continue;
      this.queue.remove(q);
      this.waiting.delete(q.job.id);
      this.retireQueued(events, q, "cancelled");
    }
    this.cancelledQueued.clear();
  }

  /** Ends a request that is queued, not running (cancelled, or past its start deadline). */
  private retireQueued(events: TickEvents, q: Queued, reason: FinishReason): void {
    const paused = q.paused;
    paused?.chain.free();
    events.finished.push({
      id: q.job.id,
      reason,
      promptTokens: q.job.prompt.length,
      cachedTokens: paused?.cachedTokens ?? 0,
      completionTokens: paused?.generated ?? 0,
      ...(paused?.resumedTokens !== undefined ? { resumedTokens: paused.resumedTokens } : {}),
    });
  }

  /**
   * Admission (docs/design.md#qos-scheduling): queued work in class order (aging
   * included), each class within its lane cap, a request at its fair share
   * after the others (docs/design.md#fair-share); then, while every lane is
   * busy, a waiting interactive or completion request takes the lowest-class
   * lane below it, and a waiting request under its fair share a lane of its
   * class's request furthest over it. The lane taken is paused and requeued
   * at the head of its class.
   */
  private admit(events: TickEvents): void {
    this.expireQueued(events);
    if (this.queue.size === 0) return;
    const tick = this.counters.ticks;
    const shares = this.fairShares();
    if (this.lanes.size < this.opts.lanes) {
      const atShare: { item: Queued; qos: QosClass; effective: number }[] = [];
      for (const entry of this.queue.ordered(tick)) {
        if (this.lanes.size >= this.opts.lanes) break;
        if (!this.admissible(entry.item, entry.qos)) continue;
        if (shares.atShare(entry.item.job, entry.qos)) {
          atShare.push(entry);
          continue;
        }
        // Waiting for cells keeps its place: nothing behind it overtakes it.
        if (!this.fits(entry.item)) break;
        shares.took(this.take(events, entry.item, entry.qos, entry.effective));
      }
      // Lanes left over go to requests at their share: no lane idles while work waits.
      for (const { item, qos, effective } of atShare) {
        if (this.lanes.size >= this.opts.lanes || !this.fits(item)) break;
        if (this.admissible(item, qos)) shares.took(this.take(events, item, qos, effective));
      }
      if (this.lanes.size < this.opts.lanes) return;
    }
    // Every lane busy: waiting work gets in only by preemption.
    for (const { item, qos, effective } of this.queue.ordered(tick)) {
      if (this.lanes.size >= this.opts.lanes) {
        // The victim is found before the (dearer) admissibility check: most queued work has none.
        const victim = (preempts(qos) ? this.victimFor(qos) : undefined) ?? shares.victimFor(item.job, qos);
        if (!victim || !this.admissible(item, qos)) continue;
        this.pause(victim);
        shares.left(victim);
      } else if (!this.admissible(item, qos)) continue;
      shares.took(this.take(events, item, qos, effective));
    }
  }

  /**
   * Fair share (docs/design.md#fair-share): the lanes of a class (its
   * --class-lanes cap, else all) divided evenly among the requests of that
   * class running or queued, at least one each. A request's choices beyond
   * its share wait while another request of its class does.
   */
  private fairShares() {
    const held = new Map<string, number>();
    const groups: Set<string>[] = [new Set(), new Set(), new Set(), new Set()];
    for (const lane of this.lanes) {
      const g = groupOf(lane.job);
      held.set(g, (held.get(g) ?? 0) + 1);
      groups[lane.qos]!.add(g);
    }
    for (const { item, qos } of this.queue.classed()) groups[qos]!.add(groupOf(item.job));
    const share = groups.map((set, qos) => {
      const lanes = this.opts.classLanes?.[QOS_NAMES[qos]!] ?? this.opts.lanes;
      return Math.max(1, Math.floor(lanes / Math.max(1, set.size)));
    });
    const count = (job: GenerateJob) => held.get(groupOf(job)) ?? 0;
    const add = (job: GenerateJob, n: number) => held.set(groupOf(job), count(job) + n);
    return {
      /** Its request already holds its share of the class's lanes. */
      atShare: (job: GenerateJob, qos: QosClass) => count(job) >= share[qos]!,
      took: (lane: Lane | undefined) => lane && add(lane.job, 1),
      left: (lane: Lane) => add(lane.job, -1),
      /**
       * For a request under its share: a lane of its class from the request
       * furthest over its share (decoding before prefilling, then the one
       * admitted last), never a lane protected this tick.
       */
      victimFor: (job: GenerateJob, qos: QosClass): Lane | undefined => {
        if (count(job) >= share[qos]!) return undefined;
        // Ranked by lanes over the share, then decoding, then admission order: the highest is taken.
        const rank = (lane: Lane) => [count(lane.job) - share[qos]!, lane.next !== undefined ? 1 : 0, lane.order];
        const before = (a: number[], b: number[]) => a[0]! - b[0]! || a[1]! - b[1]! || a[2]! - b[2]!;
        let victim: Lane | undefined;
        for (const lane of this.lanes) {
          if (lane.qos !== qos || lane.cancelled || this.counters.ticks < lane.protectedUntil || rank(lane)[0]! <= 0)
            continue;
          if (!victim || before(rank(lane), rank(victim)) > 0) victim = lane;
        }
        return victim;
      },
    };
  }

  /**
   * A shared pool has cells for the item's prompt (or, paused, its prompt and
   * reply so far) beside what the live lanes hold, with some headroom for
   * their growth. Always true with no lane running: a window fits the pool.
   */
  private fits(item: Queued): boolean {
    if (!this.pool.shared || this.lanes.size === 0) return true;
    const target = item.paused?.target ?? item.job.prompt;
    const headroom = HEADROOM_PER_LANE * (this.lanes.size + 1);
    return this.pool.liveCells + this.pool.cellsToSeat(target) + headroom <= this.pool.capacity;
  }

  /**
   * A queued item may start now: its class is under its lane cap, it is not waiting for a shared prefill, and no new
   * adapter set waits.
   */
  private admissible(item: Queued, qos: QosClass): boolean {
    // A new adapter set waits for the requests under the current one; only those (paused ones) may start.
    if (this.pendingAdapters && !item.paused) return false;
    const cap = this.opts.classLanes?.[QOS_NAMES[qos]];
    if (cap !== undefined && this.laneCounts()[qos] >= cap) return false;
    if (!item.paused && this.awaitsSharedPrefill(item.job)) {
      this.waiting.add(item.job.id);
      return false;
    }
    return true;
  }

  /** Starts or resumes a queued item on a lane; undefined when it ended at its start (an error). */
  private take(events: TickEvents, item: Queued, qos: QosClass, effective: number): Lane | undefined {
    this.queue.remove(item);
    const aged = effective < qos;
    if (aged) this.counters.starvationGrants++;
    const lane = item.paused ? this.resume(item.paused) : this.start(events, item.job, qos);
    if (!lane) return undefined;
    lane.protectedUntil = this.counters.ticks + (aged ? (this.opts.starvationTicks ?? STARVATION_TICKS) : 1);
    lane.order = ++this.admissions;
    return lane;
  }

  /** Requests still queued past their start deadline expire (docs/design.md#deadlines-and-cancellation). */
  private expireQueued(events: TickEvents): void {
    const now = Date.now();
    for (const q of this.queue.items()) {
      if (q.paused || q.job.startBy === undefined || now <= q.job.startBy) continue;
      this.queue.remove(q);
      this.waiting.delete(q.job.id);
      this.counters.expired++;
      this.retireQueued(events, q, "expired");
    }
  }

  private start(events: TickEvents, job: GenerateJob, qos: QosClass): Lane | undefined {
    if (this.waiting.delete(job.id)) this.counters.coalesced++;
    const room = this.window;
    if (job.prompt.length === 0 || job.prompt.length >= room) {
      const error =
        job.prompt.length === 0 ? "empty prompt" : `prompt of ${job.prompt.length} tokens does not fit ${room} cells`;
      events.finished.push({
        id: job.id,
        reason: "error",
        promptTokens: job.prompt.length,
        cachedTokens: 0,
        completionTokens: 0,
        error,
        clientError: true,
      });
      return undefined;
    }
    let chain: SamplerChain;
    try {
      // ignore_eos never samples an end-of-generation token (as llama.cpp does), except
      // under a grammar, whose only way to finish is one.
      const banned = [
        ...(job.ignoreEos && job.grammar === undefined ? this.model.vocabInfo.eog : []),
        ...(job.bannedTokens ?? []),
      ];
      const grammar = job.grammar === undefined ? undefined : { gbnf: job.grammar, trigger: job.grammarTrigger };
      chain = new SamplerChain(this.model, job.sampling, job.prompt, grammar, banned, job.positionSeeded ?? false);
    } catch (err) {
      const clientError = err instanceof GrammarError;
      events.finished.push({
        id: job.id,
        reason: "error",
        promptTokens: job.prompt.length,
        cachedTokens: 0,
        completionTokens: 0,
        error: (err as Error).message,
        clientError,
      });
      return undefined;
    }
    this.pin(job);
    const resumed = this.seatParked(job);
    const { seq, cached } = resumed ?? this.pool.seat(job.prompt);
    const lane: Lane = {
      job,
      qos,
      target: job.prompt,
      prefilledAt: this.counters.ticks,
      protectedUntil: this.counters.ticks + 1,
      seq,
      chain,
      cachedTokens: cached,
      ...(resumed ? { resumedTokens: cached } : {}),
      generated: 0,
      limit: Math.min(job.maxTokens, room - job.prompt.length),
      cancelled: false,
      order: 0,
    };
    if (
      this.opts.speculation &&
      job.grammar === undefined &&
      job.logprobs === undefined &&
      Object.keys(job.sampling.logitBias ?? {}).length === 0
    ) {
      lane.drafts = new RequestYield(this.opts.speculation);
      this.gates!.requestStarted();
    }
    this.lanes.add(lane);
    events.admitted.push({ id: job.id, cachedTokens: cached, ...(resumed ? { resumedTokens: cached } : {}) });
    return lane;
  }

  /**
   * Parking's restore (docs/cli.md#parking): seats the job on its park
   * artifact when it covers more of the prompt than the prefix cache would
   * give. Anything else (no artifact, another model or history, a corrupt
   * file, llama.cpp refusing the export, a LoRA set applied) leaves the job
   * to the usual seating: cold or from the cache, never wrong.
   */
  private seatParked(job: GenerateJob): { seq: KvSequence; cached: number } | undefined {
    // KV computed under an adapter set is not the base model's; the envelope cannot tell them apart.
    if (job.resume === undefined || this.adapterKey !== "") return undefined;
    const found = openPark(job.resume, this.identity(), job.prompt, this.pool.seatableLength(job.prompt));
    if (!found.ok) return undefined;
    const seq = this.pool.seatImported(found.blob, job.prompt.slice(0, found.tokens));
    if (!seq) return undefined;
    // The last prompt token is always prefilled: sampling needs its logits.
    if (seq.tokens.length >= job.prompt.length) this.pool.cutTo(seq, job.prompt.length - 1);
    if (seq.tokens.length === 0) {
      seq.live = false;
      return undefined;
    }
    this.counters.parkResumes++;
    return { seq, cached: seq.tokens.length };
  }

  private identity(): string {
    return (this.parkIdentity ??= modelIdentity(this.model));
  }

  /**
   * Parking's seal: the lane's KV (exactly the tokens decoded into it; the
   * token sampled last is usually not) to the job's park file. Synchronous: a
   * tick's lanes wait for the write. A failed write leaves no artifact (and
   * any older one in place, which the next resume checks by digest).
   */
  private seal(lane: Lane): { tokens: number; bytes: number } | undefined {
    const path = lane.job.park;
    const tokens = lane.seq.tokens;
    if (path === undefined || tokens.length === 0 || this.adapterKey !== "") return undefined;
    const blob = this.context.exportSequence(lane.seq.index);
    if (!blob) return undefined;
    try {
      const bytes = sealPark(path, this.identity(), tokens, blob);
      this.counters.parks++;
      return { tokens: tokens.length, bytes };
    } catch {
      return undefined;
    }
  }

  /**
   * Registers a starting job's pinned prefixes (docs/design.md#pinned-prefixes), before
   * it is seated so a refreshed pin already counts when a sequence is chosen.
   * A pin reaches at most the prompt's last token but one: a later prompt
   * reuses at most that much of its own.
   */
  private pin(job: GenerateJob): void {
    for (const { length, ttlMs } of job.pins?.slice(0, MAX_PINS) ?? []) {
      const n = Math.min(Math.floor(length), job.prompt.length - 1);
      if (n > 0) this.pool.pins.add(job.prompt.slice(0, n), ttlMs);
    }
  }

  /**
   * The lane an urgent request of class `qos` takes over: the lowest class
   * below it, a decoding lane before a prefilling one (docs/design.md#preemption), then
   * the one admitted last.
   */
  private victimFor(qos: QosClass): Lane | undefined {
    let victim: Lane | undefined;
    for (const lane of this.lanes) {
      if (lane.qos <= qos || lane.cancelled || this.counters.ticks < lane.protectedUntil) continue;
      if (
        !victim ||
        lane.qos > victim.qos ||
        (lane.qos === victim.qos && (lane.next !== undefined) > (victim.next !== undefined)) ||
        (lane.qos === victim.qos &&
          (lane.next !== undefined) === (victim.next !== undefined) &&
          lane.prefilledAt >= victim.prefilledAt)
      ) {
        victim = lane;
      }
    }
    return victim;
  }

  /**
   * Preemption: the lane stops and goes back to the head of its class with
   * its sampler chain (so its random stream and penalty window go on where
   * they were). Its KV stays behind as a cache entry, so resuming finds it in
   * place or in the host tier; the token sampled last, already delivered but
   * not yet decoded, becomes the end of what must be prefilled before the
   * next sample. Its client's stream just pauses.
   */
  private pause(lane: Lane): void {
    this.lanes.delete(lane);
    if (lane.next !== undefined) {
      lane.target = [...lane.seq.tokens, lane.next];
      lane.next = undefined;
    }
    this.pool.release(lane.seq);
    this.counters.preemptions++;
    this.queue.pushFront({ job: lane.job, paused: lane }, lane.qos, this.counters.ticks);
  }

  private resume(lane: Lane): Lane {
    lane.seq = this.pool.seat(lane.target).seq;
    lane.prefilledAt = this.counters.ticks;
    this.lanes.add(lane);
    this.counters.resumes++;
    return lane;
  }

  /**
   * Burst coalescing (docs/design.md#burst-coalescing): a prompt that shares at least
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
      return this.pool.cachedLength(job.prompt, reusable) < shared;
    }
    return false;
  }

  /**
   * Plans the tick (every decoding lane's next token, then prompt chunks
   * shortest-remaining-first within the budget) and stages it in ascending
   * sequence order: llama.cpp splits a batch whose sequences come out of order
   * into more steps (8 decode tokens on sequences 7..0 took 23 ms against
   * 14.5 ms for 0..7, measured here).
   */
  private stageBatch(): {
    staged: number;
    sampled: StagedLane[];
    rollback: [KvSequence, number][];
    depth: number;
    decoding: number;
  } {
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
    // One engine step per tick: at most one micro-batch of prompt, so a cancel
    // or an urgent request is seen at the next step (docs/design.md#the-engine-tick:
    // the worker reads its messages between ticks).
    let budget = Math.min(
      this.prefill.next(this.newcomerCouldStart()),
      this.context.microBatchSize,
      this.context.batchSize - decoding,
    );
    const tick = this.counters.ticks;
    const starving = (l: Lane) => tick - l.prefilledAt >= (this.opts.starvationTicks ?? STARVATION_TICKS);
    const remaining = (l: Lane) => l.target.length - l.seq.tokens.length;
    // Starving lanes first, then by class, then shortest remaining prompt first (docs/design.md#prefill-budget).
    prefilling.sort(
      (a, b) => Number(starving(b)) - Number(starving(a)) || a.qos - b.qos || remaining(a) - remaining(b),
    );
    for (const lane of prefilling) {
      if (budget <= 0) break;
      const take = Math.min(budget, remaining(lane));
      chunk.set(lane, take);
      budget -= take;
    }
    // Rule 2: in a tick where an interactive or completion prompt finishes
    // prefilling, nothing of a lower class is prefilled beside it.
    let finishing = Infinity;
    for (const lane of prefilling)
      if (preempts(lane.qos) && chunk.get(lane) === remaining(lane)) finishing = Math.min(finishing, lane.qos);
    // A starving lane keeps its chunk (else rule 2 could hold it back for ever).
    if (finishing !== Infinity)
      for (const lane of prefilling) if (lane.qos > finishing && !starving(lane)) chunk.delete(lane);
    const ctx = this.context;
    let planned = 0;
    for (const count of chunk.values()) planned += count;
    // The gates' depth for this many decoding lanes (0: plain): what the tick is measured as.
    const depth = decoding > 0 ? (this.gates?.depth(decoding) ?? 0) : 0;
    const drafts = this.planDrafts(depth, planned);
    const sampled: StagedLane[] = [];
    const rollback: [KvSequence, number][] = [];
    let n = 0;
    for (const [lane, count] of [...chunk].sort(([a], [b]) => a.seq.index - b.seq.index)) {
      const seq = lane.seq;
      rollback.push([seq, seq.tokens.length]);
      if (lane.next !== undefined) {
        const draft = drafts.get(lane) ?? [];
        sampled.push({ lane, row: n, before: seq.tokens.length, draft });
        // The next token and its draft, every position with its logits: each is sampled in turn.
        for (const token of [lane.next, ...draft]) {
          ctx.stage(n++, token, seq.tokens.length, seq.index, true);
          seq.tokens.push(token);
        }
        this.counters.decodedTokens++;
        continue;
      }
      const prompt = lane.target;
      lane.prefilledAt = this.counters.ticks;
      for (let k = 0; k < count; k++) {
        const pos = seq.tokens.length;
        const last = pos === prompt.length - 1;
        ctx.stage(n, prompt[pos]!, pos, seq.index, last);
        seq.tokens.push(prompt[pos]!);
        if (last) sampled.push({ lane, row: n, before: pos, draft: [] });
        n++;
      }
      this.counters.prefilledTokens += count;
    }
    return { staged: n, sampled, rollback, depth, decoding };
  }

  /**
   * This tick's drafts for the decoding lanes, from prompt lookup
   * (src/engine/speculation.ts) or the draft model (./draft-model.ts), at most
   * `depthCap` deep (the gates' depth; 0: none): within the batch's room after
   * the `planned` tokens, each lane's window and the tokens it may still
   * generate, and on a shared pool the cells free beyond the lanes' headroom
   * (a draft never makes a tick pause a lane for space).
   */
  private planDrafts(depthCap: number, planned: number): Map<Lane, number[]> {
    const drafts = new Map<Lane, number[]>();
    if (depthCap === 0) return drafts;
    // One micro-batch still, as without drafts.
    let room = Math.min(this.context.batchSize, this.context.microBatchSize) - planned;
    if (this.pool.shared) room = Math.min(room, this.pool.freeCells - planned - HEADROOM_PER_LANE * this.lanes.size);
    const asks: [Lane, DraftRequest][] = [];
    for (const lane of this.lanes) {
      if (room <= 0) break;
      if (lane.next === undefined || !lane.drafts || lane.drafts.stopped) continue;
      const depth = Math.min(depthCap, room, lane.limit - lane.generated - 1, this.window - lane.seq.tokens.length - 1);
      if (depth <= 0) continue;
      if (this.drafter) {
        asks.push([lane, { seq: lane.seq.index, held: lane.seq.tokens, next: lane.next, depth }]);
        room -= depth;
        continue;
      }
      const draft = lookupDraft(lane.seq.tokens, lane.next, depth);
      if (draft.length === 0) continue;
      drafts.set(lane, draft);
      room -= draft.length;
    }
    if (asks.length > 0) {
      const proposed = this.drafter!.propose(asks.map(([, ask]) => ask));
      for (const [lane] of asks) {
        const draft = proposed.get(lane.seq.index);
        if (draft && draft.length > 0) drafts.set(lane, draft);
      }
    }
    return drafts;
  }

  /**
   * One sample per lane, or with a draft one per position in turn while the
   * samples equal the draft (src/engine/speculation.ts): the tokens that
   * came out are the lane's, the first that differs from its draft (or the
   * one after the whole draft) is its next input, and the cells of the rest
   * of the draft leave its KV before anything else (a finish publishes the
   * sequence to the prefix cache).
   */
  private sampleOutputs(events: TickEvents, sampled: StagedLane[]): void {
    const vocab = this.model;
    for (const { lane, row, before, draft } of sampled) {
      const out: number[] = [];
      let end: { reason: FinishReason; error?: string; clientError?: boolean } | undefined;
      for (let j = 0; j <= draft.length; j++) {
        let token: number;
        try {
          // Its stream position: the prompt, the tokens generated before this tick, and those before it in this one.
          token = lane.chain.sample(this.context.handle, row + j, lane.job.prompt.length + lane.generated + out.length);
        } catch (err) {
          // One lane's sampling failure (a grammar with no way forward) ends that lane only.
          end = { reason: "error", error: (err as Error).message, clientError: err instanceof GrammarError };
          break;
        }
        if ((!lane.job.ignoreEos || lane.job.grammar !== undefined) && vocab.isEog(token)) {
          end = { reason: "stop" };
          break;
        }
        out.push(token);
        if (lane.generated + out.length >= lane.limit) end = { reason: "length" };
        if (end || token !== draft[j]) break;
      }
      if (draft.length > 0) {
        let accepted = 0;
        while (accepted < draft.length && accepted < out.length && out[accepted] === draft[accepted]) accepted++;
        this.counters.specProposed += draft.length;
        this.counters.specAccepted += accepted;
        // Tokens beyond the one per lane a plain tick gives.
        this.counters.decodedTokens += Math.max(0, out.length - 1);
        const verdict = lane.drafts!.round(draft.length, accepted);
        if (verdict) this.gates!.judged(verdict);
        // The KV keeps the inputs the emitted tokens were sampled after, never the lane's next input.
        this.pool.cutTo(lane.seq, before + Math.max(out.length, 1));
      }
      for (const token of out) {
        lane.generated++;
        this.counters.generatedTokens++;
        lane.next = token;
        if (lane.job.logprobs === undefined) events.tokens.push([lane.job.id, token]);
        else {
          const logits = this.context.logits(row);
          events.tokens.push([
            lane.job.id,
            token,
            positionLogprobs(logits, token, lane.job.logprobs, lane.job.sampling.logitBias, this.model.expSum()),
          ]);
        }
      }
      if (end) this.finish(events, lane, end.reason, end.error, end.clientError ?? false);
    }
  }

  /** Takes back a staged tick that was not decoded: the sequences and counters go back to what they were. */
  private unstage(staged: { rollback: [KvSequence, number][] }, before: number[]): void {
    for (const [seq, length] of staged.rollback) this.pool.cutTo(seq, length);
    this.counters.decodedTokens = before[0]!;
    this.counters.prefilledTokens = before[1]!;
  }

  /**
   * A shared pool has fewer free cells than a tick needs (docs/design.md#kv-layout):
   * cached prefixes go to the host tier first, least recently used first;
   * when none is left, the least urgent lane admitted last is paused the way
   * a preemption pauses it (requeued at the head of its class, sampler chain
   * intact) and its cells go to the host tier too, so it resumes from there
   * once its prompt fits again. A lane is never paused for space while it is
   * the only one: its window fits the pool by construction, so it fails only
   * if llama.cpp still finds no slot.
   */
  private makeRoom(events: TickEvents, need: number): void {
    if (this.pool.evictForSpace(need)) return;
    if (this.lanes.size <= 1) {
      for (const lane of [...this.lanes])
        this.finish(
          events,
          lane,
          "error",
          `the KV pool (${this.pool.capacity} cells) has no room for this request's next step`,
        );
      return;
    }
    let victim: Lane | undefined;
    for (const lane of this.lanes) {
      if (!victim || lane.qos > victim.qos || (lane.qos === victim.qos && lane.order > victim.order)) victim = lane;
    }
    const seq = victim!.seq;
    this.pause(victim!);
    this.pool.evictSequence(seq);
    this.counters.spacePauses++;
  }

  /** A failed decode fails its lanes; their sequences go back to what they held before. */
  private failAll(events: TickEvents, staged: { rollback: [KvSequence, number][] }, message: string): void {
    for (const [seq, length] of staged.rollback) this.pool.cutTo(seq, length);
    for (const lane of [...this.lanes]) this.finish(events, lane, "error", message);
  }
}
