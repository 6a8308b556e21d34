// Running as one replica of several behind a router (docs/guides/scale-out.md):
// every reply names the replica that served it (`x-superfluid-replica`, from
// --replica-id), and a client may send `x-superfluid-session-key`, one value
// per conversation, for the router to hash so that a conversation's turns
// reach the replica that holds its prefix in its KV cache. The server itself
// routes nothing by it: it checks it, echoes it on the reply and writes it in
// the access log, so an operator can follow one conversation across replicas.
import { AsyncLocalStorage } from "node:async_hooks";
import { hostname } from "node:os";
import { RequestError } from "../daemon/request-error.ts";

export const REPLICA_HEADER = "x-superfluid-replica";
export const SESSION_KEY_HEADER = "x-superfluid-session-key";

/** The longest session key taken: it goes into every access-log line of its conversation. */
export const SESSION_KEY_MAX = 256;

// A header-safe token: letters, digits and . _ : - (host names and pod names fit).
const REPLICA_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
// Visible ASCII without spaces: a key is written as one field of a log line.
const SESSION_KEY = /^[\x21-\x7e]+$/;

/** Whether `id` may name a replica (--replica-id). */
export function isReplicaId(id: string): boolean {
  return REPLICA_ID.test(id);
}

/** --replica-id's default: this machine's host name (a Kubernetes pod's name), or `superfluid` when it is not a token. */
export function defaultReplicaId(host = hostname()): string {
  return isReplicaId(host) ? host : "superfluid";
}

/**
 * The request's session key; undefined when it sends none. A key that is
 * empty, too long, or holds spaces or non-ASCII is refused (400): the router
 * hashed it already, so a bad one is the client's to fix.
 */
export function sessionKeyOf(request: Request): string | undefined {
  const key = request.headers.get(SESSION_KEY_HEADER);
  if (key === null) return undefined;
  if (key.length > SESSION_KEY_MAX || !SESSION_KEY.test(key))
    throw new RequestError(
      400,
      `${SESSION_KEY_HEADER} must be 1 to ${SESSION_KEY_MAX} visible ASCII characters without spaces`,
      "invalid_session_key",
    );
  return key;
}

const running = new AsyncLocalStorage<string>();

/** Runs a request's handler with its session key, for records made deep in its call chain (the access log). */
export function runWithSessionKey<T>(key: string | undefined, handler: () => T): T {
  return key === undefined ? handler() : running.run(key, handler);
}

/** The session key of the request whose handler is running; undefined when it sent none, and outside requests. */
export function runningSessionKey(): string | undefined {
  return running.getStore();
}
