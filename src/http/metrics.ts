// GET /metrics and /v1/metrics (docs/api/metrics.md): Prometheus text
// exposition (0.0.4) written by prom-client. Engine counters and gauges are
// read at scrape time from each served model's worker (one stats round trip a
// model) and from what the daemon keeps for it (WorkerTally: counters carried
// across worker respawns, cold admissions, FIM results); requests and tokens
// are counted from access records and TTFT observed as first tokens arrive.
import { hostname } from "node:os";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { observeTtft, type EngineCounterName, type WorkerTally } from "../daemon/metrics-tally.ts";
import type { ModelRegistry } from "../daemon/registry.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import type { EngineSnapshot } from "../engine/jobs.ts";
import { QOS_NAMES } from "../engine/scheduler.ts";
import { observeAccess, type AccessEntry } from "./access-log.ts";
import { registerRouterGauges, type ModelScrape } from "./router-metrics.ts";
import type { RequestGate } from "./auth/gate.ts";
import type { Principal } from "./auth/principal.ts";
import type { RequestError } from "../daemon/request-error.ts";

/** TTFT bucket bounds in seconds, 5 ms to 40 s. */
export const TTFT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40];

/** Engine counters: exposed name, the tally's counter, help. */
const ENGINE: [string, EngineCounterName, string][] = [
  ["superfluid_ticks_total", "ticks", "Scheduler ticks."],
  ["superfluid_prefill_tokens_total", "prefilledTokens", "Prompt tokens prefilled."],
  // Generated tokens, as usage counts them: dashboards sum this to bill and
  // for tok/s. Decode steps (a reply's last token is never fed back) have
  // their own counter.
  ["superfluid_decode_tokens_total", "generatedTokens", "Tokens generated (the sum of usage.completion_tokens)."],
  [
    "superfluid_decode_steps_total",
    "decodedTokens",
    "Sampled tokens fed back through llama_decode (the last token of a reply never is).",
  ],
  [
    "superfluid_warm_prefix_tokens_total",
    "reusedTokens",
    "Prompt tokens served from the prefix cache instead of prefilled.",
  ],
  ["superfluid_preemptions_total", "preemptions", "Lanes preempted and requeued."],
  ["superfluid_starvation_grants_total", "starvationGrants", "Admissions of a job moved up a class by aging."],
  [
    "superfluid_pressure_evictions_total",
    "pressureEvictions",
    "Cached prefixes moved out of the KV pool above the high watermark.",
  ],
  ["superfluid_pins_yielded_total", "pinsYielded", "Pinned prefixes released for the pin budget or for space."],
  ["superfluid_spec_proposed_total", "specProposed", "Speculative draft tokens proposed (--speculate)."],
  ["superfluid_spec_accepted_total", "specAccepted", "Speculative draft tokens the model accepted."],
];

/**
 * Calls `handle` with `target` for each event until `target` is collected:
 * the process-wide hooks then drop the subscription on their next event.
 */
function subscribeWeakly<T extends object, A extends unknown[]>(
  target: T,
  subscribe: (listener: (...args: A) => void) => () => void,
  handle: (target: T, ...args: A) => void,
): void {
  const ref = new WeakRef(target);
  const unsubscribe = subscribe((...args) => {
    const live = ref.deref();
    if (live) handle(live, ...args);
    else unsubscribe();
  });
}

export class ServerMetrics {
  readonly registry = new Registry();
  private scraped: ModelScrape[] = [];
  /** Scrapes run one at a time: collectors read `scraped`. */
  private serial: Promise<unknown> = Promise.resolve();
  /** FIM requests refused by the per-client bucket (no model ran them). */
  private fimThrottled = 0;
  private readonly requests: Counter;
  private readonly promptTokens: Counter;
  private readonly cachedTokens: Counter;
  private readonly completionTokens: Counter;
  private readonly ttft: Histogram;

  constructor(
    private readonly models: ModelRegistry,
    gate?: RequestGate,
  ) {
    const metrics = this;
    const registers = [this.registry];
    const m = ["model"] as const;
    const perModel = (fill: (s: ModelScrape) => number | undefined) =>
      function (this: Gauge | Counter) {
        this.reset();
        for (const s of metrics.scraped) {
          const value = fill(s);
          if (value === undefined) continue;
          if (this instanceof Gauge) this.set({ model: s.model.id }, value);
          else this.inc({ model: s.model.id }, value);
        }
      };
    const gauge = (name: string, help: string, fill: (s: EngineSnapshot, model: ServedModel) => number) =>
      new Gauge({
        name,
        help,
        labelNames: m,
        registers,
        collect: perModel((s) => (s.snapshot ? fill(s.snapshot, s.model) : undefined)),
      });
    const counter = (name: string, help: string, fill: (model: ServedModel) => number) =>
      new Counter({ name, help, labelNames: m, registers, collect: perModel((s) => fill(s.model)) });

    for (const [name, key, help] of ENGINE) counter(name, help, (model) => model.worker.tally.engineTotals()[key]);
    counter(
      "superfluid_cold_admissions_total",
      "Admissions whose prompt had no prefix in the KV.",
      (model) => model.worker.tally.coldAdmissions,
    );
    counter(
      "superfluid_worker_respawns_total",
      "Worker processes replaced after dying.",
      (model) => model.worker.respawns,
    );
    new Counter({
      name: "superfluid_fim_completions_total",
      help: "Fill-in-the-middle completions by result: generated and expired per prompt, throttled per request (no model label).",
      labelNames: ["model", "result"],
      registers,
      collect(this: Counter) {
        this.reset();
        for (const { model } of metrics.scraped) {
          const fim: WorkerTally["fim"] = model.worker.tally.fim;
          this.inc({ model: model.id, result: "generated" }, fim.generated);
          this.inc({ model: model.id, result: "expired" }, fim.expired);
        }
        this.inc({ result: "throttled" }, metrics.fimThrottled);
      },
    });

    new Counter({
      name: "superfluid_parks_total",
      help: "Session KV sealed to a park artifact (--park), by encoding (llama.cpp: lossless only).",
      labelNames: ["model", "encoding"],
      registers,
      collect(this: Counter) {
        this.reset();
        for (const { model } of metrics.scraped)
          this.inc({ model: model.id, encoding: "lossless" }, model.worker.tally.engineTotals().parks);
      },
    });
    counter(
      "superfluid_resumes_total",
      "Generations seeded from a park artifact instead of prefilling (--park).",
      (model) => model.worker.tally.engineTotals().parkResumes,
    );

    gauge("superfluid_lanes_active", "Resident lanes.", (s) => s.activeLanes);
    gauge("superfluid_lanes_total", "Lanes the worker runs (--max-batch).", (_, model) => model.worker.info.lanes);
    gauge("superfluid_pool_blocks_used", "KV pool cells in use (a block is one cell).", (s) => s.cellsUsed);
    gauge("superfluid_pool_blocks_total", "KV pool cells.", (s) => s.poolCells);
    gauge("superfluid_prefill_budget_tokens", "Prompt tokens the next tick may prefill.", (s) => s.prefillBudget);
    gauge("superfluid_decode_grant_tokens", "Lanes decoding a token this tick.", (s) => s.activeLanes - s.prefilling);
    gauge("superfluid_pins_held", "Pinned prompt prefixes.", (s) => s.pins.count);
    gauge(
      "superfluid_pinned_bytes",
      "KV bytes the pinned prefixes hold.",
      (s, model) => s.pins.tokens * model.worker.info.kv.bytesPerToken,
    );
    new Gauge({
      name: "superfluid_queue_depth",
      help: "Queued jobs per QoS class.",
      labelNames: ["model", "class"],
      registers,
      collect(this: Gauge) {
        this.reset();
        for (const { model, snapshot } of metrics.scraped) {
          if (!snapshot) continue;
          QOS_NAMES.forEach((name, i) => this.set({ model: model.id, class: name }, snapshot.queueDepths[i] ?? 0));
        }
      },
    });
    // Devices as each model's worker saw them at load, and what its offload placed on each (docs/api/metrics.md).
    new Gauge({
      name: "superfluid_device_memory_bytes",
      help: "A device's memory when the model's worker loaded it, by kind (free, total); the CPU is a device too.",
      labelNames: ["model", "device", "type", "kind"],
      registers,
      collect(this: Gauge) {
        this.reset();
        for (const { model } of metrics.scraped)
          for (const d of model.worker.info.devices) {
            const labels = { model: model.id, device: d.name, type: d.type };
            this.set({ ...labels, kind: "free" }, d.freeBytes);
            this.set({ ...labels, kind: "total" }, d.totalBytes);
          }
      },
    });
    new Gauge({
      name: "superfluid_device_model_bytes",
      help: "Bytes the model's offload placed on a GPU, by kind (weights, kv).",
      labelNames: ["model", "device", "kind"],
      registers,
      collect(this: Gauge) {
        this.reset();
        for (const { model } of metrics.scraped)
          for (const d of model.worker.info.offload?.devices ?? []) {
            this.set({ model: model.id, device: d.name, kind: "weights" }, d.weightBytes);
            this.set({ model: model.id, device: d.name, kind: "kv" }, d.kvBytes);
          }
      },
    });
    new Gauge({
      name: "superfluid_device_layers",
      help: "Repeating layers of the model on each GPU (the rest run on the CPU).",
      labelNames: ["model", "device"],
      registers,
      collect(this: Gauge) {
        this.reset();
        for (const { model } of metrics.scraped)
          for (const d of model.worker.info.offload?.devices ?? [])
            this.set({ model: model.id, device: d.name }, d.layers);
      },
    });
    registerRouterGauges(this.registry, () => metrics.scraped);
    new Gauge({
      name: "superfluid_node_info",
      help: "Always 1; host is SUPERFLUID_NODE_NAME or the hostname.",
      labelNames: ["host"],
      registers,
    }).set({ host: process.env.SUPERFLUID_NODE_NAME || hostname() }, 1);

    if (gate) this.keyMetrics(gate);

    const routeModel = ["route", "model"] as const;
    this.requests = new Counter({
      name: "superfluid_requests_total",
      help: "Generation requests by route, model and finish (stop, length, tool_calls, cancelled, expired, error).",
      labelNames: ["route", "model", "finish"],
      registers,
    });
    this.promptTokens = new Counter({
      name: "superfluid_prompt_tokens_total",
      help: "Prompt tokens of generation requests (usage.prompt_tokens).",
      labelNames: routeModel,
      registers,
    });
    this.cachedTokens = new Counter({
      name: "superfluid_cached_prompt_tokens_total",
      help: "Prompt tokens served from the prefix cache (usage's cached tokens).",
      labelNames: routeModel,
      registers,
    });
    this.completionTokens = new Counter({
      name: "superfluid_completion_tokens_total",
      help: "Tokens generated (usage.completion_tokens).",
      labelNames: routeModel,
      registers,
    });
    this.ttft = new Histogram({
      name: "superfluid_ttft_seconds",
      help: "Seconds from admission (a lane) to the first token; the queue wait before admission is not included.",
      labelNames: m,
      buckets: TTFT_BUCKETS,
      registers,
    });

    subscribeWeakly(this, observeAccess, (self, entry: AccessEntry) => self.countRequest(entry));
    subscribeWeakly(this, observeTtft, (self, tally: WorkerTally, seconds: number) => {
      const model = self.served().find((s) => s.worker.tally === tally);
      if (model) self.ttft.observe({ model: model.id }, seconds);
    });
  }

  /**
   * The exposition, every served model's snapshot taken fresh. A policy key
   * without `admin` sees only its own superfluid_key_* rows
   * (docs/api/metrics.md#per-key-metrics).
   */
  async scrape(reader?: Principal, anonymous = false): Promise<string> {
    const run = this.serial.then(() => this.collect());
    this.serial = run.catch(() => {});
    const text = await run;
    // A scrape without a key on a keyed server (--public-metrics) sees no key's name.
    if (anonymous)
      return text
        .split("\n")
        .filter((line) => !/^(# (HELP|TYPE) )?superfluid_key_/.test(line))
        .join("\n");
    if (!reader?.fromPolicy || reader.admin) return text;
    const own = `key="${reader.name}"`;
    return text
      .split("\n")
      .filter((line) => !line.startsWith("superfluid_key_") || line.includes(own))
      .join("\n");
  }

  /** Requests, refusals and slots in use per --key-policy key, read from the gate at scrape time. */
  private keyMetrics(gate: RequestGate): void {
    const registers = [this.registry];
    new Counter({
      name: "superfluid_key_requests_total",
      help: "Requests per policy key (only with --key-policy).",
      labelNames: ["key"],
      registers,
      collect(this: Counter) {
        this.reset();
        for (const [key, s] of gate.keyStats()) this.inc({ key }, s.requests);
      },
    });
    new Counter({
      name: "superfluid_key_rejected_total",
      help: "Refusals per policy key by reason: rate_limit_exceeded, concurrency_limit_exceeded, admin_required.",
      labelNames: ["key", "reason"],
      registers,
      collect(this: Counter) {
        this.reset();
        for (const [key, s] of gate.keyStats()) for (const [reason, n] of s.rejected) this.inc({ key, reason }, n);
      },
    });
    new Gauge({
      name: "superfluid_key_in_flight",
      help: "Requests holding one of a policy key's max_concurrent slots.",
      labelNames: ["key"],
      registers,
      collect(this: Gauge) {
        this.reset();
        for (const [key, s] of gate.keyStats()) this.set({ key }, s.inFlight);
      },
    });
  }

  /** The content type of the exposition (text 0.0.4). */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** A request the app answered with an error: FIM throttles are counted here. */
  noteError(err: RequestError): void {
    if (err.code === "completion_rate_limited") this.fimThrottled++;
  }

  private countRequest(e: AccessEntry): void {
    if (!this.served().some((m) => m.id === e.model)) return; // another server's model in this process
    const labels = { route: e.route, model: e.model };
    this.requests.inc({ ...labels, finish: e.finish });
    this.promptTokens.inc(labels, e.prompt);
    this.cachedTokens.inc(labels, e.cached);
    this.completionTokens.inc(labels, e.completion);
  }

  /** Loaded models and their --fim-model workers, each once. */
  private served(): ServedModel[] {
    const all = new Set<ServedModel>();
    for (const model of this.models.all()) {
      all.add(model);
      if (model.fimModel) all.add(model.fimModel);
    }
    return [...all];
  }

  private async collect(): Promise<string> {
    const models = this.served();
    // A worker that does not answer (loading, stuck) still shows its counters, without gauges.
    const snapshots = await Promise.all(
      models.map((m) =>
        m.worker.stats().then(
          (a) => a.snapshot,
          () => undefined,
        ),
      ),
    );
    this.scraped = models.map((model, i) => ({ model, snapshot: snapshots[i] }));
    return this.registry.metrics();
  }
}
