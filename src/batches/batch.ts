// The batch object as OpenAI's Batches API shows it (docs/api/batches.md):
// its statuses, timestamps, request counts, usage and validation errors, and
// the moves between statuses. Every other module of src/batches changes a
// batch only through these functions, so the object on the wire and the one
// on disk are the same thing.
import { randomBytes } from "node:crypto";

export type BatchStatus =
  | "validating"
  | "failed"
  | "in_progress"
  | "finalizing"
  | "completed"
  | "expired"
  | "cancelling"
  | "cancelled";

/** Statuses a batch never leaves. */
export const TERMINAL: ReadonlySet<BatchStatus> = new Set(["failed", "completed", "expired", "cancelled"]);

/** One problem with the input file (OpenAI's BatchError); `line` counts from 1. */
export interface BatchError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

export interface RequestCounts {
  total: number;
  completed: number;
  failed: number;
}

export interface BatchUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** The object GET /v1/batches/{id} answers; timestamps are Unix seconds, null until reached. */
export interface Batch {
  id: string;
  object: "batch";
  endpoint: string;
  model: string;
  errors: { object: "list"; data: BatchError[] } | null;
  input_file_id: string;
  completion_window: string;
  status: BatchStatus;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: number;
  in_progress_at: number | null;
  expires_at: number;
  finalizing_at: number | null;
  completed_at: number | null;
  failed_at: number | null;
  expired_at: number | null;
  cancelling_at: number | null;
  cancelled_at: number | null;
  request_counts: RequestCounts;
  usage: BatchUsage;
  metadata: Record<string, string> | null;
}

/** Unix seconds now. */
export const nowSec = (): number => Math.floor(Date.now() / 1000);

const hexId = (prefix: string) => `${prefix}${randomBytes(12).toString("hex")}`;

/** `batch_<hex>`. */
export const newBatchId = (): string => hexId("batch_");
/** An output line's id, `batch_req_<hex>`. */
export const newLineId = (): string => hexId("batch_req_");
/** A line's request id, `req_<hex>`. */
export const newRequestId = (): string => hexId("req_");

export function emptyUsage(): BatchUsage {
  return {
    input_tokens: 0,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: 0,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 0,
  };
}

export interface NewBatch {
  inputFileId: string;
  endpoint: string;
  completionWindow: string;
  /** The window in seconds: expires_at is created_at plus this. */
  windowSec: number;
  metadata: Record<string, string> | null;
  model: string;
  total: number;
}

export function newBatch(n: NewBatch): Batch {
  const created = nowSec();
  return {
    id: newBatchId(),
    object: "batch",
    endpoint: n.endpoint,
    model: n.model,
    errors: null,
    input_file_id: n.inputFileId,
    completion_window: n.completionWindow,
    status: "validating",
    output_file_id: null,
    error_file_id: null,
    created_at: created,
    in_progress_at: null,
    expires_at: created + n.windowSec,
    finalizing_at: null,
    completed_at: null,
    failed_at: null,
    expired_at: null,
    cancelling_at: null,
    cancelled_at: null,
    request_counts: { total: n.total, completed: 0, failed: 0 },
    usage: emptyUsage(),
    metadata: n.metadata,
  };
}

/** A file that failed validation: the batch fails at once with what was wrong. */
export function failValidation(b: Batch, errors: BatchError[]): void {
  b.status = "failed";
  b.failed_at = nowSec();
  b.errors = { object: "list", data: errors };
}

export function startProgress(b: Batch): void {
  b.status = "in_progress";
  b.in_progress_at ??= nowSec();
}

export function startFinalizing(b: Batch): void {
  b.status = "finalizing";
  b.finalizing_at ??= nowSec();
}

export function startCancelling(b: Batch): void {
  b.status = "cancelling";
  b.cancelling_at ??= nowSec();
}

/** The batch's last move: completed, cancelled or expired, with the files its results went to. */
export function finish(
  b: Batch,
  status: "completed" | "cancelled" | "expired",
  files: { output: string | null; error: string | null },
): void {
  b.status = status;
  const at = nowSec();
  if (status === "completed") b.completed_at = at;
  else if (status === "cancelled") b.cancelled_at = at;
  else b.expired_at = at;
  b.output_file_id = files.output;
  b.error_file_id = files.error;
}

/** Adds a successful line's token usage (a chat.completion's `usage`). */
export function addUsage(b: Batch, usage: unknown): void {
  const u = usage as {
    prompt_tokens?: unknown;
    completion_tokens?: unknown;
    prompt_tokens_details?: { cached_tokens?: unknown };
    completion_tokens_details?: { reasoning_tokens?: unknown };
  } | null;
  if (!u || typeof u !== "object") return;
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  b.usage.input_tokens += n(u.prompt_tokens);
  b.usage.input_tokens_details.cached_tokens += n(u.prompt_tokens_details?.cached_tokens);
  b.usage.output_tokens += n(u.completion_tokens);
  b.usage.output_tokens_details.reasoning_tokens += n(u.completion_tokens_details?.reasoning_tokens);
  b.usage.total_tokens = b.usage.input_tokens + b.usage.output_tokens;
}
