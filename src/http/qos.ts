// QoS over HTTP (docs/api/openai.md#qos-classes): the class a request runs in, from the
// x-superfluid-qos header (unless the operator turned it off) or
// --http-default-qos, and the batch-invariant header's permission check. The
// engine knows its classes by their own names only; the aliases and numbers
// clients (and the serve flags) may use instead are read here.
import { DEFAULT_QOS, parseLaneCaps, QOS_NAMES, type ClassLanes, type QosClass } from "../engine/scheduler.ts";
import { principalOf } from "./auth/principal.ts";
import { RequestError } from "../daemon/request-error.ts";

export const QOS_HEADER = "x-superfluid-qos";
export const BATCH_INVARIANT_HEADER = "x-superfluid-batch-invariant";

/** The operator's QoS trust settings (docs/cli.md#http-policy-flags). */
export interface QosPolicy {
  /** --http-default-qos: the class of a request that names none. */
  defaultQos: QosClass;
  /** false under --no-http-qos-header. */
  honourHeader: boolean;
  /** --http-allow-batch-invariant. */
  allowBatchInvariant: boolean;
}

const ALIASES: Record<string, QosClass> = {
  interactive: 0,
  "interactive-chat": 0,
  "0": 0,
  completion: 1,
  "inline-completion": 1,
  "1": 1,
  agent: 2,
  foreground: 2,
  "foreground-agent": 2,
  "2": 2,
  background: 3,
  "background-agent": 3,
  "3": 3,
};

/** A class from its name, alias or number (case-insensitive); undefined when it names none. */
export function parseQos(raw: string): QosClass | undefined {
  return ALIASES[raw.trim().toLowerCase()];
}

/**
 * --class-lanes as an operator writes it (`background=2,foreground=4`): names, aliases or numbers, each cap
 * 1..maxBatch.
 */
export function parseClassLanes(raw: string, maxBatch: number): ClassLanes {
  return parseLaneCaps(raw, maxBatch, parseQos);
}

export const DEFAULT_QOS_POLICY: QosPolicy = {
  defaultQos: DEFAULT_QOS,
  honourHeader: true,
  allowBatchInvariant: false,
};

const ACCEPTED = `${QOS_NAMES.map((n, i) => `${n} (${i})`).join(", ")}, or the aliases interactive-chat, inline-completion, foreground, foreground-agent, background-agent`;

/**
 * The class of a generation request: the x-superfluid-qos header, bounded by
 * the key's `max_class` (asking for better is 403 `admin_required`); else the
 * key's `class`; else --http-default-qos. An unknown header value is a 400
 * naming the header and what it accepts; under --no-http-qos-header the header
 * is not read at all (not even to refuse it).
 */
export function requestQos(policy: QosPolicy, request: Request): QosClass {
  const principal = principalOf(request);
  const raw = policy.honourHeader ? request.headers.get(QOS_HEADER) : null;
  if (raw === null) return principal?.qosClass ?? policy.defaultQos;
  const qos = parseQos(raw);
  if (qos === undefined) {
    throw new RequestError(400, `${QOS_HEADER}: '${raw}' is not a QoS class; accepted: ${ACCEPTED}`, null, QOS_HEADER);
  }
  if (principal?.maxClass !== undefined && qos < principal.maxClass) {
    throw new RequestError(
      403,
      `${QOS_HEADER}: the key '${principal.name}' may ask for ${QOS_NAMES[principal.maxClass]} at best, not ${QOS_NAMES[qos]}`,
      "admin_required",
      QOS_HEADER,
    );
  }
  return qos;
}

/** docs/api/openai.md#headers: `true` or `1`, case-insensitive, turns it on; anything else (or nothing) is off. */
export function wantsBatchInvariant(headers: Headers): boolean {
  const raw = headers.get(BATCH_INVARIANT_HEADER)?.trim().toLowerCase();
  return raw === "true" || raw === "1";
}

/**
 * Refuses a batch-invariant request unless it is allowed: a policy key by its
 * own `batch_invariant`, any other request by --http-allow-batch-invariant;
 * 403 with `admin_required` (docs/api/openai.md#error-codes). When allowed the request is accepted and run
 * like any other: llama.cpp has no batch-invariant kernels, so a lane that
 * ticks alone would give the same numbers as one that shares its batch only
 * by accident, and this runtime does not pretend to isolate it
 * (docs/api/openai.md#headers).
 */
export function checkBatchInvariant(policy: QosPolicy, request: Request): void {
  if (!wantsBatchInvariant(request.headers)) return;
  const principal = principalOf(request);
  if (principal?.batchInvariant ?? policy.allowBatchInvariant) return;
  const how = principal?.fromPolicy
    ? `the key '${principal.name}' may not (its policy entry has no batch_invariant)`
    : "this server does not allow (start it with --http-allow-batch-invariant)";
  throw new RequestError(
    403,
    `${BATCH_INVARIANT_HEADER} asks for a lane that ticks alone, which ${how}`,
    "admin_required",
    BATCH_INVARIANT_HEADER,
  );
}
