// What `superfluid top` shows for one node, computed from its recent scrapes
// of /metrics (docs/api/metrics.md): gauges from the newest scrape, rates from
// counter deltas, TTFT percentiles from the histogram buckets' deltas. Pure
// functions, so the numbers can be checked without a terminal.
import type { Sample } from "./top-parse.ts";

export interface Scrape {
  /** When the scrape was answered (ms, monotonic enough for rates). */
  at: number;
  samples: Sample[];
}

export const QOS_CLASSES = ["interactive", "completion", "agent", "background"] as const;

export interface NodeStats {
  host?: string;
  models: string[];
  lanesActive: number;
  /** Lane capacity, when the server exposes `superfluid_lanes_total`. */
  lanesTotal?: number;
  queue: Record<(typeof QOS_CLASSES)[number], number>;
  /** Tokens a second since the previous scrape (undefined on the first). */
  decodeRate?: number;
  prefillRate?: number;
  /** Seconds, over the window's observations (undefined when none). */
  ttftP50?: number;
  ttftP95?: number;
  /** Warm prefix tokens / prompt tokens the engine took in (0-1). */
  prefixHitRate?: number;
  kvUsed: number;
  kvTotal: number;
  preemptions: number;
  /** Speculative draft tokens accepted / proposed (0-1); undefined when none were proposed. */
  specAcceptRate?: number;
  /** Each GPU a model's layers went to: layers and bytes placed there, and the device's total memory. */
  gpus: { device: string; layers: number; bytes: number; totalBytes?: number }[];
}

const key = (s: Sample) => s.name + JSON.stringify(s.labels);

function matches(s: Sample, name: string, match: Record<string, string>): boolean {
  return s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v);
}

function total(scrape: Scrape, name: string, match: Record<string, string> = {}): number {
  let n = 0;
  for (const s of scrape.samples) if (matches(s, name, match)) n += s.value;
  return n;
}

function has(scrape: Scrape, name: string): boolean {
  return scrape.samples.some((s) => s.name === name);
}

/**
 * How far a counter moved between two scrapes, summed over its series. A
 * series that went down was reset (its model was unloaded and loaded again,
 * docs/api/metrics.md#conventions): as Prometheus does, its whole new value
 * counts as the move.
 */
export function counterDelta(from: Scrape, to: Scrape, name: string, match: Record<string, string> = {}): number {
  const before = new Map<string, number>();
  for (const s of from.samples) if (matches(s, name, match)) before.set(key(s), s.value);
  let delta = 0;
  for (const s of to.samples) {
    if (!matches(s, name, match)) continue;
    const prev = before.get(key(s)) ?? 0;
    delta += s.value >= prev ? s.value - prev : s.value;
  }
  return delta;
}

/**
 * The q-quantile of the observations that landed in the histogram's buckets
 * between two scrapes, interpolated linearly inside the bucket as
 * Prometheus's histogram_quantile does. Buckets of every model are added.
 */
export function histogramQuantile(from: Scrape, to: Scrape, name: string, q: number): number | undefined {
  const bucket = `${name}_bucket`;
  const bounds = new Set<string>();
  for (const s of to.samples) if (s.name === bucket && s.labels.le !== undefined) bounds.add(s.labels.le);
  const cumulative = [...bounds]
    .map((le) => ({ le: le === "+Inf" ? Infinity : Number(le), count: counterDelta(from, to, bucket, { le }) }))
    .sort((a, b) => a.le - b.le);
  const count = cumulative.at(-1)?.count ?? 0;
  if (count <= 0) return undefined;
  const rank = q * count;
  let lower = 0;
  let below = 0;
  for (const b of cumulative) {
    if (b.count >= rank) {
      // Past the last finite bound nothing is known but the bound itself.
      if (b.le === Infinity) return lower;
      const inBucket = b.count - below;
      return inBucket > 0 ? lower + (b.le - lower) * ((rank - below) / inBucket) : b.le;
    }
    lower = b.le;
    below = b.count;
  }
  return lower;
}

/** How long the TTFT percentiles and the hit rate look back. */
export const WINDOW_MS = 10_000;

/** The stats of one node from its scrapes, oldest first (at least one). */
export function nodeStats(history: Scrape[]): NodeStats {
  const now = history.at(-1)!;
  const prev = history.length > 1 ? history.at(-2)! : undefined;
  const oldest = history.find((s) => now.at - s.at <= WINDOW_MS) ?? now;
  const models = new Set<string>();
  for (const s of now.samples)
    if (s.name === "superfluid_pool_blocks_total" && s.labels.model) models.add(s.labels.model);
  const queue = Object.fromEntries(
    QOS_CLASSES.map((c) => [c, total(now, "superfluid_queue_depth", { class: c })]),
  ) as NodeStats["queue"];
  const stats: NodeStats = {
    host: now.samples.find((s) => s.name === "superfluid_node_info")?.labels.host,
    models: [...models],
    lanesActive: total(now, "superfluid_lanes_active"),
    lanesTotal: has(now, "superfluid_lanes_total") ? total(now, "superfluid_lanes_total") : undefined,
    queue,
    kvUsed: total(now, "superfluid_pool_blocks_used"),
    kvTotal: total(now, "superfluid_pool_blocks_total"),
    preemptions: total(now, "superfluid_preemptions_total"),
    gpus: [
      ...new Set(now.samples.filter((s) => s.name === "superfluid_device_layers").map((s) => s.labels.device!)),
    ].map((device) => {
      const memory = now.samples.find(
        (s) => matches(s, "superfluid_device_memory_bytes", { device, kind: "total" }) && s.labels.type !== "cpu",
      );
      return {
        device,
        layers: total(now, "superfluid_device_layers", { device }),
        bytes: total(now, "superfluid_device_model_bytes", { device }),
        ...(memory ? { totalBytes: memory.value } : {}),
      };
    }),
  };
  if (prev && now.at > prev.at) {
    const seconds = (now.at - prev.at) / 1000;
    stats.decodeRate = counterDelta(prev, now, "superfluid_decode_tokens_total") / seconds;
    stats.prefillRate = counterDelta(prev, now, "superfluid_prefill_tokens_total") / seconds;
  }
  if (oldest !== now) {
    stats.ttftP50 = histogramQuantile(oldest, now, "superfluid_ttft_seconds", 0.5);
    stats.ttftP95 = histogramQuantile(oldest, now, "superfluid_ttft_seconds", 0.95);
  }
  // The engine takes a prompt in as warm prefix tokens (seeded from the
  // cache) plus prefilled ones; over the window when prompts arrived in it,
  // else since the server started, so an idle node still shows its record.
  const hit = (from: Scrape | undefined) => {
    const warm = from
      ? counterDelta(from, now, "superfluid_warm_prefix_tokens_total")
      : total(now, "superfluid_warm_prefix_tokens_total");
    const cold = from
      ? counterDelta(from, now, "superfluid_prefill_tokens_total")
      : total(now, "superfluid_prefill_tokens_total");
    return warm + cold > 0 ? warm / (warm + cold) : undefined;
  };
  stats.prefixHitRate = (oldest !== now ? hit(oldest) : undefined) ?? hit(undefined);
  // Speculation's acceptance the same way: over the window when drafts were proposed in it, else since the start.
  const accept = (from: Scrape | undefined) => {
    const proposed = from
      ? counterDelta(from, now, "superfluid_spec_proposed_total")
      : total(now, "superfluid_spec_proposed_total");
    const accepted = from
      ? counterDelta(from, now, "superfluid_spec_accepted_total")
      : total(now, "superfluid_spec_accepted_total");
    return proposed > 0 ? accepted / proposed : undefined;
  };
  stats.specAcceptRate = (oldest !== now ? accept(oldest) : undefined) ?? accept(undefined);
  return stats;
}

/** A file being pulled from the Hub, as /health lists it while the server starts (docs/api/openai.md#health). */
export interface PullFile {
  /** The reference pulled (`org/repo:TAG`). */
  model: string;
  file: string;
  state: string;
  done: number;
  total: number;
}

/** One /health answer while the server starts: when, and the files it was pulling. */
export interface PullScrape {
  at: number;
  files: PullFile[];
}

export interface PullRow extends PullFile {
  /** Bytes a second over the window (undefined until two answers saw the file). */
  rate?: number;
  /** Seconds left at that rate. */
  eta?: number;
}

/**
 * The files being pulled in the newest answer (`history` oldest first, at least one), each with its rate: the
 * bytes it gained since the oldest answer in the window that saw it, over the time between.
 */
export function pullRows(history: PullScrape[]): PullRow[] {
  const now = history.at(-1)!;
  const same = (a: PullFile, b: PullFile) => a.model === b.model && a.file === b.file;
  return now.files.map((f) => {
    const from = history.find((s) => s !== now && now.at - s.at <= WINDOW_MS && s.files.some((g) => same(f, g)));
    const before = from?.files.find((g) => same(f, g));
    if (!from || !before || now.at <= from.at || f.done < before.done) return { ...f };
    const rate = (f.done - before.done) / ((now.at - from.at) / 1000);
    return rate > 0 ? { ...f, rate, eta: Math.max(0, f.total - f.done) / rate } : { ...f, rate };
  });
}
