// What the HTTP routes share: the served models, the operator's defaults and
// policies (serve flags), and request ids.
import type { PullPolicy, PullStatus } from "../daemon/model-pull.ts";
import type { BatchService } from "../batches/service.ts";
import type { ModelRegistry } from "../daemon/registry.ts";
import type { FileStore } from "../files/store.ts";
import type { GenerationDefaults } from "../pipeline/engine-request.ts";
import type { ResponseStore } from "../response-store/store.ts";
import type { QosPolicy } from "./qos.ts";
import type { TokenBuckets } from "./rate-limit.ts";
import { KEEPALIVE_INTERVAL_MS } from "./stream.ts";

/** Fill-in-the-middle settings (docs/api/openai.md#fill-in-the-middle). */
export interface FimPolicy {
  /** --completion-deadline-ms: a completion not started by then expires; 0 = none. */
  deadlineMs: number;
  /** The per-client bucket (--completion-rate, --completion-burst). */
  buckets: TokenBuckets;
}

export interface ServerContext extends GenerationDefaults {
  registry: ModelRegistry;
  /** QoS trust (--http-default-qos, --no-http-qos-header, --http-allow-batch-invariant). */
  qos: QosPolicy;
  /** --nonstream-keepalive in seconds (0 = off); also the stream keep-alive period when set. */
  keepaliveSec: number;
  fim: FimPolicy;
  /** The /v1/files store, under <sessions>/files/ (docs/api/files.md). */
  files: FileStore;
  /** Stored responses, under <sessions>/responses/ (docs/api/responses.md#conversation-state). */
  responses: ResponseStore;
  /** The Batches API, its state under <sessions>/batches/ (docs/api/batches.md). */
  batches: BatchService;
  /** Counter behind `chatcmpl-superfluid-<n>` ids. */
  nextId(): number;
  /** True while `serve` is still starting: the listener is up before the models named have loaded. */
  starting?(): boolean;
  /** True once a stop signal began the drain (docs/cli.md#startup-and-shutdown): readiness answers 503. */
  draining?(): boolean;
  /** Files being pulled from the Hugging Face Hub now (docs/cli.md#pulling-models), shown by /health while loading. */
  pulling?(): PullStatus[];
  /** How a reference is pulled here (offline, projector, progress to the log): POST /api/pull; absent, nothing is. */
  pullPolicy?(reference: string): PullPolicy;
}

/** The stream comment period: the --nonstream-keepalive interval when set, else 15 s. */
export function streamKeepaliveMs(ctx: ServerContext): number {
  return ctx.keepaliveSec > 0 ? ctx.keepaliveSec * 1000 : KEEPALIVE_INTERVAL_MS;
}
