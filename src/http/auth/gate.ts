// The checks every request passes before a route runs, after Origin and Host
// (docs/api/security.md): the key (401 invalid_api_key), the request-rate
// buckets (per key when the key has one, else per client IP; 429
// rate_limit_exceeded) and the key's concurrency slots (429
// concurrency_limit_exceeded). It also keeps the per-key counts /metrics shows.
import { RequestError } from "../../daemon/request-error.ts";
import { peerAddress } from "../listener.ts";
import { TokenBuckets } from "../rate-limit.ts";
import type { KeyRing } from "./keyring.ts";
import { setPrincipal, type Principal } from "./principal.ts";

/** Never authenticated, never metered: the liveness and readiness probes (a kubelet sends no key). */
const OPEN_PATHS = new Set(["/health", "/health/ready"]);
/** Open too under --public-metrics: a router's metrics scraper (the Inference Extension's picker) sends no key. */
const METRICS_PATHS = new Set(["/metrics", "/v1/metrics"]);
/** Authenticated but never metered, and holding no slot: scrapes. */
const UNMETERED_PATHS = new Set([...OPEN_PATHS, ...METRICS_PATHS]);

/**
 * A refusal, or the admission: `release`, when the request holds a slot, gives it back (call it when the reply has
 * ended).
 */
export type Admission = { refusal: RequestError } | { release?: () => void };

/** What /metrics shows of one policy key. */
export interface KeyStats {
  requests: number;
  /** Refusals by code: rate_limit_exceeded, concurrency_limit_exceeded, admin_required. */
  rejected: Map<string, number>;
  inFlight: number;
}

/**
 * Whether a request holds one of its key's slots while it runs: the requests
 * that make work (generations, uploads, batch and model creation). Reads,
 * deletes and cancels do not, so a key at its limit can still list, fetch
 * and cancel what it made.
 */
function takesSlot(method: string, path: string): boolean {
  if (method === "GET" || method === "HEAD" || method === "DELETE" || method === "OPTIONS") return false;
  return !UNMETERED_PATHS.has(path) && !path.endsWith("/cancel");
}

/**
 * The 401 of a request without a valid key; `headers` undefined when the request could not be read far enough to look.
 */
export function unauthenticated(headers?: Headers): RequestError {
  const sent = headers !== undefined && (headers.has("authorization") || headers.has("x-api-key"));
  const message = sent
    ? "the API key is not valid for this server"
    : headers === undefined
      ? "this server needs an API key, and this request could not be read far enough to find one"
      : "this server needs an API key: send it as 'Authorization: Bearer <key>' or 'X-Api-Key: <key>'";
  return new RequestError(401, message, "invalid_api_key");
}

/**
 * A bucket of `rpm` requests a minute: capacity rpm, refilled at rpm/60 a second (docs/api/security.md#rate-limits).
 */
const perMinute = (rpm: number, now?: () => number) => new TokenBuckets(rpm / 60, rpm, now);

export class RequestGate {
  private readonly perIp: TokenBuckets;
  private readonly perKey = new Map<string, TokenBuckets>();
  private readonly stats = new Map<string, KeyStats>();

  constructor(
    private readonly keys: KeyRing,
    /** --rate-limit: requests a minute per client IP (0 = off). */
    rateLimitRpm: number,
    private readonly now?: () => number,
    /** --public-metrics: GET /metrics needs no key. */
    private readonly publicMetrics = false,
  ) {
    this.perIp = perMinute(rateLimitRpm, now);
    for (const name of keys.policyNames) this.stats.set(name, { requests: 0, rejected: new Map(), inFlight: 0 });
  }

  /** Requests need a key. */
  get authenticating(): boolean {
    return this.keys.enabled;
  }

  /** Policy keys' counts by name (empty without --key-policy). */
  keyStats(): ReadonlyMap<string, KeyStats> {
    return this.stats;
  }

  /** Counts a refusal a route made for a policy key (admin_required). */
  noteRejection(principal: Principal | undefined, code: string): void {
    const s = principal?.fromPolicy ? this.stats.get(principal.name) : undefined;
    if (s) s.rejected.set(code, (s.rejected.get(code) ?? 0) + 1);
  }

  admit(request: Request, path: string): Admission {
    const method = request.method;
    if (OPEN_PATHS.has(path) && method === "GET") return {};
    // A public scrape (--public-metrics) without a valid key is let in as nobody's: it is shown no key's series.
    const publicScrape = this.publicMetrics && method === "GET" && METRICS_PATHS.has(path);
    let principal: Principal | undefined;
    if (this.keys.enabled) {
      principal = this.keys.identify(request.headers);
      if (!principal && publicScrape) return {};
      // A wrong key still takes from its client's --rate-limit bucket, so keys cannot be guessed at line rate.
      if (!principal)
        return {
          refusal: (!UNMETERED_PATHS.has(path) && this.meter(request, undefined)) || unauthenticated(request.headers),
        };
      setPrincipal(request, principal);
      if (principal.fromPolicy) this.stats.get(principal.name)!.requests++;
    }
    if (!UNMETERED_PATHS.has(path)) {
      const refusal = this.meter(request, principal);
      if (refusal) return this.reject(principal, refusal);
    }
    if (!principal || principal.maxConcurrent === 0 || !takesSlot(method, path)) return {};
    return this.takeSlot(principal);
  }

  /** The request's rate bucket: its key's own, else its client IP's. */
  private meter(request: Request, principal: Principal | undefined): RequestError | undefined {
    let buckets: TokenBuckets;
    let subject: string;
    if (principal && principal.rateLimitRpm > 0) {
      buckets = this.perKey.get(principal.name) ?? perMinute(principal.rateLimitRpm, this.now);
      this.perKey.set(principal.name, buckets);
      subject = principal.name;
    } else {
      buckets = this.perIp;
      subject = peerAddress(request);
    }
    const taken = buckets.take(subject);
    if (taken.ok) return undefined;
    const whose = buckets === this.perIp ? "this client address" : `the key '${subject}'`;
    return new RequestError(
      429,
      `${whose} is over its rate limit of ${Math.round(buckets.rate * 60)} requests a minute; retry after ${taken.retryAfter} s`,
      "rate_limit_exceeded",
      null,
      { "retry-after": String(taken.retryAfter) },
    );
  }

  private takeSlot(principal: Principal): Admission {
    // Only policy keys have max_concurrent, and each has its counts from the start.
    const s = this.stats.get(principal.name)!;
    if (s.inFlight >= principal.maxConcurrent) {
      return this.reject(
        principal,
        new RequestError(
          429,
          `the key '${principal.name}' already has ${principal.maxConcurrent} requests in flight, its limit; retry once one has finished`,
          "concurrency_limit_exceeded",
          null,
          // No bucket says when: a slot frees when some reply ends.
          { "retry-after": "1" },
        ),
      );
    }
    s.inFlight++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        s.inFlight--;
      },
    };
  }

  private reject(principal: Principal | undefined, refusal: RequestError): Admission {
    if (refusal.code) this.noteRejection(principal, refusal.code);
    return { refusal };
  }
}
