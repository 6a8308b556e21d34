// Scheduling policy (docs/design.md#qos-scheduling): QoS classes with one FIFO
// each, aging, per-class lane caps, and the per-tick prefill budget. The
// engine asks it what to admit, whom to preempt and how much to prefill; it
// holds no KV and calls nothing native.

/** 0 interactive, 1 completion, 2 agent, 3 background: lower is more urgent. */
export type QosClass = 0 | 1 | 2 | 3;

export const QOS_NAMES = ["interactive", "completion", "agent", "background"] as const;
export type QosName = (typeof QOS_NAMES)[number];

/** Each class by name. */
export const QOS = { interactive: 0, completion: 1, agent: 2, background: 3 } as const satisfies Record<
  QosName,
  QosClass
>;

/** The class of a request that names none (docs/api/openai.md#qos-classes). */
export const DEFAULT_QOS: QosClass = QOS.agent;

/**
 * A class from its own name (case-insensitive); undefined when it names none. Aliases are the HTTP layer's
 * (src/http/qos.ts).
 */
export function qosByName(name: string): QosClass | undefined {
  const i = QOS_NAMES.indexOf(name.trim().toLowerCase() as QosName);
  return i < 0 ? undefined : (i as QosClass);
}

/** Classes that may preempt a running lane of a lower class (docs/design.md#preemption). */
export function preempts(qos: QosClass): boolean {
  return qos <= QOS.completion;
}

interface Entry<T> {
  item: T;
  qos: QosClass;
  /** Place within its competing class: the tick it arrived, or just ahead of its class for work put back. */
  rank: number;
  /** Tie-break among equal ranks: lower first (work put back at the head of its class is negative). */
  order: number;
  /** Tick at which it was (re)queued, for aging. */
  since: number;
}

/**
 * One FIFO per class. The admission order is the effective class (a job that
 * has waited `starvationTicks` ticks moves up one class for each such
 * period), then place in its queue. Preempted work goes back at the head of
 * its class.
 */
export class ClassQueues<T> {
  private readonly entries: Entry<T>[] = [];
  private tail = 0;
  private head = 0;

  constructor(private readonly starvationTicks: number) {}

  get size(): number {
    return this.entries.length;
  }

  /** Queued items per class. */
  depths(): [number, number, number, number] {
    const d: [number, number, number, number] = [0, 0, 0, 0];
    for (const e of this.entries) d[e.qos]++;
    return d;
  }

  push(item: T, qos: QosClass, tick: number): void {
    this.entries.push({ item, qos, rank: tick, order: ++this.tail, since: tick });
  }

  /** Requeues at the head of its class (preempted work): ahead of everything of its class queued now. */
  pushFront(item: T, qos: QosClass, tick: number): void {
    let rank = tick;
    for (const e of this.entries) if (e.qos === qos) rank = Math.min(rank, e.rank);
    this.entries.push({ item, qos, rank: rank - 0.5, order: -++this.head, since: tick });
  }

  /** The class an entry competes in at `tick`, after aging. */
  effectiveClass(qos: QosClass, since: number, tick: number): number {
    if (this.starvationTicks <= 0) return qos;
    return Math.max(0, qos - Math.floor((tick - since) / this.starvationTicks));
  }

  /**
   * Items in admission order at `tick`, each with its own class and the
   * class it competes in. Within a competing class the longest waiting goes
   * first, whatever its own class: a job aged up to a class ties with that
   * class's own work and wins by having waited longer, so a steady stream of
   * better-class work cannot hold it back for ever.
   */
  ordered(tick: number): { item: T; qos: QosClass; effective: number }[] {
    return this.entries
      .map((e) => ({ e, effective: this.effectiveClass(e.qos, e.since, tick) }))
      .sort((a, b) => a.effective - b.effective || a.e.rank - b.e.rank || a.e.order - b.e.order)
      .map(({ e, effective }) => ({ item: e.item, qos: e.qos, effective }));
  }

  remove(item: T): boolean {
    const i = this.entries.findIndex((e) => e.item === item);
    if (i < 0) return false;
    this.entries.splice(i, 1);
    return true;
  }

  items(): T[] {
    return this.entries.map((e) => e.item);
  }

  /** Each item with its own class, in no particular order. */
  classed(): { item: T; qos: QosClass }[] {
    return this.entries.map((e) => ({ item: e.item, qos: e.qos }));
  }
}

/** Lane caps per class (--class-lanes); a class without one is capped only by the lane count. */
export type ClassLanes = Partial<Record<QosName, number>>;

/**
 * Parses `background=2,agent=6`, each cap 1..maxBatch. `classOf` reads a class
 * name: the classes' own names by default (what the daemon passes a worker);
 * the serve flag also takes the aliases (src/http/qos.ts).
 */
export function parseLaneCaps(
  raw: string,
  maxBatch: number,
  classOf: (name: string) => QosClass | undefined = qosByName,
): ClassLanes {
  const caps: ClassLanes = {};
  for (const part of raw.split(",")) {
    const m = /^\s*([\w-]+)\s*=\s*(\d+)\s*$/.exec(part);
    const qos = m ? classOf(m[1]!) : undefined;
    if (!m || qos === undefined)
      throw new Error(`--class-lanes expects class=N[,class=N...] with classes ${QOS_NAMES.join(", ")}; got '${part}'`);
    const n = Number(m[2]);
    if (n < 1 || n > maxBatch)
      throw new Error(`--class-lanes ${QOS_NAMES[qos]}=${n}: each cap must be between 1 and --max-batch (${maxBatch})`);
    caps[QOS_NAMES[qos]] = n;
  }
  return caps;
}

/** Prompt tokens a tick may take, per docs/design.md#prefill-budget. */
export interface PrefillPolicy {
  /** --prefill-budget: tokens per tick (64-4096), or 0 for the adaptive controller. */
  budget: number;
  /** Tick length aimed at by the adaptive controller while a lane is free, and while every lane is busy. */
  targetFreeMs: number;
  targetBusyMs: number;
}

/** Work one tick may hold while a newcomer could be admitted after it, and otherwise (rules 3 and 4). */
const NEWCOMER_CAP_MS = 500;
const BUSY_CAP_MS = 8000;
/** Prefill chunk granularity: whole 512-token chunks, or 128-token steps on a slow model (rule 3). */
const CHUNK = 512;
const STEP = 128;

/**
 * Learns what a prompt token costs (milliseconds of decode call per token,
 * an exponential average over ticks that were mostly prefill) and sizes each
 * tick's prefill from it.
 */
export class PrefillBudget {
  /** Milliseconds per prompt token; undefined until a prefill tick has been seen. */
  msPerToken?: number;

  constructor(private readonly policy: PrefillPolicy) {}

  /** Records a tick that prefilled `tokens` (beside `decoded` decode tokens) in `ms`. */
  observe(tokens: number, decoded: number, ms: number): void {
    if (tokens < 32 || tokens < decoded * 4) return; // mostly decode: says little about prefill
    const sample = ms / tokens;
    this.msPerToken = this.msPerToken === undefined ? sample : 0.7 * this.msPerToken + 0.3 * sample;
  }

  /** Prompt tokens for the next tick; `laneFree` when a newcomer could be admitted after it. */
  next(laneFree: boolean): number {
    // An unknown or degenerate cost (a 0 ms tick) says nothing: fall back to the plain budget.
    const cost =
      this.msPerToken !== undefined && this.msPerToken > 0 && Number.isFinite(this.msPerToken)
        ? this.msPerToken
        : undefined;
    if (this.policy.budget === 0) {
      const target = laneFree ? this.policy.targetFreeMs : this.policy.targetBusyMs;
      return cost === undefined ? 512 : clamp(Math.floor(target / cost), 256, 4096);
    }
    if (cost === undefined) return this.policy.budget;
    const fits = Math.floor((laneFree ? NEWCOMER_CAP_MS : BUSY_CAP_MS) / cost);
    const capped = fits >= CHUNK ? fits - (fits % CHUNK) : Math.max(STEP, fits - (fits % STEP));
    return Math.min(this.policy.budget, capped);
  }
}

function clamp(n: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, n));
}
