// One access-log record per generation (docs/cli.md#logging), handed to the
// sink the server installed (its logger: stderr, --log-file, --log-dir), or
// to stderr when none is. Its plain form:
// <-- 200 POST /v1/chat/completions model=m prompt=812 cached=640 completion=256
//     ttft=312ms prefill=551 tok/s decode=74.9 tok/s total=3792ms finish=stop
// Counts, times and names only: never a prompt's or a reply's content.
import type { ChoiceEnd } from "../pipeline/choice-stream.ts";
import { runningKeyName } from "./auth/principal.ts";
import { asRequestError } from "../pipeline/request-failure.ts";
import { runningSessionKey } from "./replica.ts";

export class RequestTimer {
  readonly started = performance.now();
  /** The name of the key the request came with (never its secret), when the server has keys. */
  readonly key = runningKeyName();
  /** The x-superfluid-session-key the request came with (replica.ts). */
  readonly session = runningSessionKey();
  firstToken?: number;
  lastToken?: number;
  /** When the generation got a lane (the verbose line's admission wait). */
  admittedAt?: number;
  /** Its line is written: one per generation, whichever path ends it. */
  logged = false;

  tokenDelivered(): void {
    const now = performance.now();
    this.firstToken ??= now;
    this.lastToken = now;
  }

  /** An admission callback that notes the time, then calls `then`. */
  onAdmitted(then?: (cachedTokens: number) => void): (cachedTokens: number) => void {
    return (cachedTokens) => {
      this.admittedAt ??= performance.now();
      then?.(cachedTokens);
    };
  }
}

export interface AccessRecord {
  status: number;
  route: string;
  model: string;
  prompt: number;
  cached: number;
  completion: number;
  /** stop, length, tool_calls; cancelled, expired or error when the generation did not end by itself (finishOf). */
  finish: string;
  /** The reply's id (chatcmpl-…, msg_…), in verbose lines and the JSON log. */
  id?: string;
  /** The key's name, when the server has keys. */
  key?: string;
  /** The request's x-superfluid-session-key, when it sent one. */
  session?: string;
}

/**
 * A record with its times worked out, as sinks get it: ms and tok/s, rounded as the line shows them, absent where there
 * are none.
 */
export interface AccessEntry extends AccessRecord {
  ttftMs?: number;
  prefillTps?: number;
  decodeTps?: number;
  totalMs: number;
  /** From the timer's start to a lane: the time queued. */
  waitMs?: number;
}

/** The finish a line shows: the reply's finish_reason, or why the generation did not end by itself. */
export function finishOf(end: ChoiceEnd): string {
  // A stop string also cancels the generation; choiceText reports that as stop_sequence, so it stays `stop`.
  return end.reason === "cancelled" || end.reason === "expired" ? end.reason : end.finishReason;
}

export function accessEntry(r: AccessRecord, t: RequestTimer): AccessEntry {
  const totalMs = Math.round(performance.now() - t.started);
  const ttft = t.firstToken === undefined ? undefined : t.firstToken - t.started;
  const cold = r.prompt - r.cached;
  const span = t.firstToken !== undefined && t.lastToken !== undefined ? t.lastToken - t.firstToken : 0;
  return {
    ...r,
    ...(t.key === undefined ? {} : { key: t.key }),
    ...(t.session === undefined ? {} : { session: t.session }),
    ...(ttft === undefined ? {} : { ttftMs: Math.round(ttft) }),
    ...(ttft && cold > 0 ? { prefillTps: Math.round((cold * 1000) / ttft) } : {}),
    ...(span > 0 && r.completion > 1 ? { decodeTps: Math.round(((r.completion - 1) * 10_000) / span) / 10 } : {}),
    totalMs,
    ...(t.admittedAt === undefined ? {} : { waitMs: Math.round(t.admittedAt - t.started) }),
  };
}

/** The plain line; `verbose` (-v) adds the reply's id and the admission wait. */
export function formatAccess(e: AccessEntry, verbose = false): string {
  const rate = (v: number | undefined, digits: number) => (v === undefined ? "-" : `${v.toFixed(digits)} tok/s`);
  const line =
    `<-- ${e.status} POST ${e.route} model=${e.model} prompt=${e.prompt} cached=${e.cached} completion=${e.completion} ` +
    `ttft=${e.ttftMs === undefined ? "-" : `${e.ttftMs}ms`} prefill=${rate(e.prefillTps, 0)} decode=${rate(e.decodeTps, 1)} total=${e.totalMs}ms finish=${e.finish}` +
    (e.key === undefined ? "" : ` key=${e.key}`) +
    (e.session === undefined ? "" : ` session=${e.session}`);
  return verbose ? `${line} id=${e.id ?? "-"} wait=${e.waitMs === undefined ? "-" : `${e.waitMs}ms`}` : line;
}

/** The JSON log's object for an entry (--log-dir). */
export function accessJson(e: AccessEntry): Record<string, unknown> {
  return {
    status: e.status,
    method: "POST",
    route: e.route,
    model: e.model,
    ...(e.id === undefined ? {} : { id: e.id }),
    ...(e.key === undefined ? {} : { key: e.key }),
    ...(e.session === undefined ? {} : { session: e.session }),
    prompt: e.prompt,
    cached: e.cached,
    completion: e.completion,
    ttft_ms: e.ttftMs ?? null,
    prefill_tps: e.prefillTps ?? null,
    decode_tps: e.decodeTps ?? null,
    total_ms: e.totalMs,
    wait_ms: e.waitMs ?? null,
    finish: e.finish,
  };
}

export type AccessSink = (entry: AccessEntry) => void;

const stderrSink: AccessSink = (e) => {
  if (process.env.SUPERFLUID_QUIET !== "1") console.error(formatAccess(e));
};
/** Installed sinks, the newest last: it gets the records. */
const sinks: AccessSink[] = [];

/**
 * Sends every record to `next` (the server's logger, a test's list) until
 * the returned undo, which takes out `next` whatever was installed after it.
 * Process-wide: one server per process writes the log.
 */
export function setAccessSink(next: AccessSink): () => void {
  const entry: AccessSink = (e) => next(e);
  sinks.push(entry);
  return () => {
    const at = sinks.indexOf(entry);
    if (at >= 0) sinks.splice(at, 1);
  };
}

const accessObservers = new Set<AccessSink>();

/**
 * Also hands every record to `observer` (beside the sink, whichever it is):
 * /metrics counts requests and tokens from them. Returns the unsubscribe.
 */
export function observeAccess(observer: AccessSink): () => void {
  accessObservers.add(observer);
  return () => accessObservers.delete(observer);
}

export function accessLine(r: AccessRecord, t: RequestTimer): string {
  return formatAccess(accessEntry(r, t));
}

/** The generation's one record; a second call for the same request (a failure after its end was logged) is ignored. */
export function logAccess(r: AccessRecord, t: RequestTimer): void {
  if (t.logged) return;
  t.logged = true;
  const entry = accessEntry(r, t);
  (sinks.at(-1) ?? stderrSink)(entry);
  for (const observer of accessObservers) observer(entry);
}

/** The record of a generation that failed: the error's status, or 200 when a stream's headers had gone out. */
export function logFailure(
  r: Pick<AccessRecord, "route" | "model" | "prompt" | "id">,
  t: RequestTimer,
  err: unknown,
  streamed = false,
): void {
  logAccess(
    { ...r, status: streamed ? 200 : asRequestError(err).status, cached: 0, completion: 0, finish: "error" },
    t,
  );
}

type AccessBase = Parameters<typeof logFailure>[0];

/** A rejection handler that logs the failure, then rethrows it: `.catch(failedAccess(base, timer))`. */
export function failedAccess(r: AccessBase, t: RequestTimer): (err: unknown) => never {
  return (err) => {
    logFailure(r, t, err);
    throw err;
  };
}
