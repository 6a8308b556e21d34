// What the daemon counts for one served model's worker (docs/api/metrics.md):
// the engine's counters carried across worker respawns, and what only the
// daemon sees (cold admissions, fill-in-the-middle results, time to first
// token). A WorkerClient owns one; /metrics reads it.
import type { EngineSnapshot, FinishReason } from "../engine/jobs.ts";

/**
 * The snapshot counters /metrics exposes. Each restarts at 0 in a new worker
 * process, so the daemon adds a dead worker's last seen values to a base.
 */
export const ENGINE_COUNTERS = {
  ticks: (s: EngineSnapshot) => s.ticks,
  prefilledTokens: (s: EngineSnapshot) => s.prefilledTokens,
  decodedTokens: (s: EngineSnapshot) => s.decodedTokens,
  generatedTokens: (s: EngineSnapshot) => s.generatedTokens,
  reusedTokens: (s: EngineSnapshot) => s.reusedTokens,
  preemptions: (s: EngineSnapshot) => s.preemptions,
  starvationGrants: (s: EngineSnapshot) => s.starvationGrants,
  pressureEvictions: (s: EngineSnapshot) => s.pressureEvictions,
  pinsYielded: (s: EngineSnapshot) => s.pins.yielded,
  specProposed: (s: EngineSnapshot) => s.specProposed,
  specAccepted: (s: EngineSnapshot) => s.specAccepted,
  parks: (s: EngineSnapshot) => s.parks,
  parkResumes: (s: EngineSnapshot) => s.parkResumes,
};

export type EngineCounterName = keyof typeof ENGINE_COUNTERS;
export type EngineCounters = Record<EngineCounterName, number>;

const NAMES = Object.keys(ENGINE_COUNTERS) as EngineCounterName[];

function zero(): EngineCounters {
  return Object.fromEntries(NAMES.map((n) => [n, 0])) as EngineCounters;
}

/**
 * Listeners for each generation's time to first token, in seconds, with the
 * tally of the worker that produced it. Process-wide: each server's /metrics
 * keeps the observations of its own models' tallies.
 */
export type TtftObserver = (tally: WorkerTally, seconds: number) => void;
const ttftObservers = new Set<TtftObserver>();

/** Subscribes to time-to-first-token observations; returns the unsubscribe. */
export function observeTtft(observer: TtftObserver): () => void {
  ttftObservers.add(observer);
  return () => ttftObservers.delete(observer);
}

export class WorkerTally {
  /** Counters of the workers that were replaced, summed. */
  private base = zero();
  /** The live worker's counters as last seen (a stats answer); lost counts since are never recovered. */
  private last = zero();
  /** Admissions whose prompt had nothing in the KV already (no prefix reused). */
  coldAdmissions = 0;
  /** Fill-in-the-middle generations (docs/api/openai.md#fill-in-the-middle) by how they ended. */
  readonly fim = { generated: 0, expired: 0 };

  /** A stats snapshot from the live worker. */
  seen(snapshot: EngineSnapshot): void {
    for (const name of NAMES) this.last[name] = ENGINE_COUNTERS[name](snapshot);
  }

  /** The worker process is gone: what it counted moves into the base. */
  workerGone(): void {
    for (const name of NAMES) this.base[name] += this.last[name];
    this.last = zero();
  }

  /** Counters since the daemon started this model: never smaller than at an earlier read. */
  engineTotals(): EngineCounters {
    const totals = zero();
    for (const name of NAMES) totals[name] = this.base[name] + this.last[name];
    return totals;
  }

  admitted(cachedTokens: number): void {
    if (cachedTokens === 0) this.coldAdmissions++;
  }

  firstToken(seconds: number): void {
    for (const observer of ttftObservers) observer(this, seconds);
  }

  /** A generation ended; `fim` marks a fill-in-the-middle one (the only generations kept out of the session log). */
  finished(reason: FinishReason, fim: boolean): void {
    if (!fim) return;
    if (reason === "expired") this.fim.expired++;
    else if (reason === "stop" || reason === "length") this.fim.generated++;
  }
}
