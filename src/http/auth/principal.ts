// Who sent a request (docs/api/security.md#keys): the key it presented, as
// the gate identified it before any route ran. Routes read it here to scope
// stored objects (files, batches, responses), to bound the QoS class and to
// allow admin actions; logs and metrics name keys by `name`, never by secret.
import { AsyncLocalStorage } from "node:async_hooks";
import type { QosClass } from "../../engine/scheduler.ts";

export interface Principal {
  /** The name logs and metrics show: the policy entry's `name`, or `api-key` for a global --api-key. */
  name: string;
  /** True for a --key-policy entry; false for a global --api-key. */
  fromPolicy: boolean;
  /**
   * Whose files, batches and stored responses the request sees: the policy
   * entry's name. Undefined for a global --api-key, which shares them with a
   * server that has no keys (docs/api/security.md#scoping).
   */
  scope: string | undefined;
  /** May use the admin routes (model and adapter load/unload). */
  admin: boolean;
  /** The class of a request that sends no QoS header; undefined = --http-default-qos. */
  qosClass?: QosClass;
  /** The best class the QoS header may ask for (0 = interactive); undefined = any. */
  maxClass?: QosClass;
  /** May ask for a batch-invariant lane; undefined = as --http-allow-batch-invariant says. */
  batchInvariant?: boolean;
  /** Requests per minute from this key's own bucket (0 = none; then the per-IP --rate-limit applies). */
  rateLimitRpm: number;
  /** Requests in flight at once (0 = unlimited). */
  maxConcurrent: number;
}

const principals = new WeakMap<Request, Principal>();

/** Records who sent `request` (the gate calls this once a key matched). */
export function setPrincipal(request: Request, principal: Principal): void {
  principals.set(request, principal);
}

/** The key that sent `request`; undefined when the server has no keys. */
export function principalOf(request: Request): Principal | undefined {
  return principals.get(request);
}

/** The owner stored objects made by `request` get, and the only owner whose objects it sees. */
export function scopeOf(request: Request): string | undefined {
  return principals.get(request)?.scope;
}

/** The key a request's handler runs under, for records made deep in its call chain (the access log's `key`). */
const running = new AsyncLocalStorage<Principal>();

/** Runs a request's handler under its key (a server without keys runs it as is). */
export function runAs<T>(principal: Principal | undefined, handler: () => T): T {
  return principal ? running.run(principal, handler) : handler();
}

/**
 * The name of the key the current request's handler runs under; undefined on a server without keys and outside requests
 * (batch lines).
 */
export function runningKeyName(): string | undefined {
  return running.getStore()?.name;
}
