// CORS for the page origins the server lets in (docs/api/security.md#cors): a
// browser app on another origin sends a preflight before any request with a JSON
// body or a key, and reads a reply only when it names the page's origin. Which
// origins is not decided here: the Origin check (origin-guard.ts) has refused the
// others with 403 before this runs, from the same list (allowed-origins.ts).
import type { AllowedOrigins } from "./allowed-origins.ts";

/** How long a browser may reuse a preflight's answer (Chromium caps it at 2 hours). */
export const PREFLIGHT_MAX_AGE_S = 7200;

/** The request headers the API families read, as a page's request may carry them. */
const READ_HEADERS = new Set([
  "authorization",
  "x-api-key",
  "content-type",
  "anthropic-version",
  "anthropic-beta",
  // @anthropic-ai/sdk's browser flag: the client sends it, the server has nothing to check in it.
  "anthropic-dangerous-direct-browser-access",
]);

/** Header families read as a whole: the official SDKs' client facts, and this server's own headers. */
const READ_PREFIXES = ["x-stainless-", "x-superfluid-"];

/**
 * The reply headers a page may read: this server's own, the request id and retry
 * hints the official SDKs read, and the rate-limit names OpenAI's API uses (this
 * server sends Retry-After; a gateway in front may add the others).
 */
export const EXPOSED_HEADERS = [
  "x-superfluid-warm",
  "x-superfluid-keepalive",
  "x-superfluid-replica",
  "x-superfluid-session-key",
  "x-superfluid-continued",
  "x-superfluid-ignored-tools",
  "x-request-id",
  "request-id",
  "retry-after",
  "retry-after-ms",
  "x-ratelimit-limit-requests",
  "x-ratelimit-limit-tokens",
  "x-ratelimit-remaining-requests",
  "x-ratelimit-remaining-tokens",
  "x-ratelimit-reset-requests",
  "x-ratelimit-reset-tokens",
].join(", ");

const isReadHeader = (name: string) => READ_HEADERS.has(name) || READ_PREFIXES.some((p) => name.startsWith(p));

/** A CORS preflight: an OPTIONS that carries an Origin and names the method it asks for. */
export function isPreflight(request: Request): boolean {
  return (
    request.method === "OPTIONS" &&
    request.headers.has("origin") &&
    request.headers.has("access-control-request-method")
  );
}

/**
 * The answer to a preflight on a route that takes `methods`: 204 naming them and
 * the headers asked for that the server reads. A header asked for and not named
 * makes the browser refuse the request, saying which.
 */
export function preflightReply(request: Request, methods: readonly string[]): Response {
  const asked = (request.headers.get("access-control-request-headers") ?? "")
    .split(",")
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== "");
  const headers = new Headers({
    "access-control-allow-methods": methods.join(", "),
    "access-control-max-age": String(PREFLIGHT_MAX_AGE_S),
    // What is allowed depends on what was asked: a cache must not hand one answer to another question.
    vary: "Access-Control-Request-Method, Access-Control-Request-Headers",
  });
  const allowed = [...new Set(asked.filter(isReadHeader))];
  if (allowed.length > 0) headers.set("access-control-allow-headers", allowed.join(", "));
  // Chromium's Private Network Access: a public site's page asks before it may reach this machine.
  if (request.headers.get("access-control-request-private-network") === "true")
    headers.set("access-control-allow-private-network", "true");
  return new Response(null, { status: 204, headers });
}

/** The request's Origin when the list allows it: the origin a reply's CORS headers name. */
export function corsOrigin(request: Request, origins: AllowedOrigins): string | undefined {
  const origin = request.headers.get("origin");
  return origin !== null && origins.allows(origin) ? origin : undefined;
}

function addVary(headers: Headers, name: string): void {
  const present = (headers.get("vary") ?? "").split(",").map((v) => v.trim().toLowerCase());
  if (!present.includes(name.toLowerCase())) headers.append("vary", name);
}

/**
 * The reply as a page on `origin` may read it: the origin named, the headers it may
 * read listed. `origin` is undefined for a request that carried none or one the
 * server refused: the reply only says it depends on the Origin.
 */
export function withCors(response: Response, origin: string | undefined): Response {
  addVary(response.headers, "Origin");
  if (origin === undefined) return response;
  response.headers.set("access-control-allow-origin", origin);
  response.headers.set("access-control-expose-headers", EXPOSED_HEADERS);
  return response;
}
