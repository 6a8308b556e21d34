// Origin and Host checks on every request (docs/api/openai.md#request-checks): a page from anywhere
// but this machine may not drive the server through a visitor's browser
// (Origin), and neither may a name an attacker's DNS points here (Host, the
// DNS-rebinding defence).
import { isIP } from "node:net";
import { hostname } from "node:os";
import { RequestError } from "../daemon/request-error.ts";

export interface HostPolicy {
  /** The address the listener is bound to. */
  bind: string;
  /** A key is required on requests (then any Host is accepted off loopback). */
  authenticated: boolean;
  /** --web-origin: page origins (`scheme://host[:port]`) let in besides this machine's. */
  origins?: readonly string[];
  /** --allow-host: names a Host may carry besides those the bind allows (lowercase; `*` = any). */
  hosts?: readonly string[];
}

function isLoopbackAddress(address: string): boolean {
  const a = address.replace(/^\[(.*)\]$/, "$1");
  return (isIP(a) === 4 && a.startsWith("127.")) || (isIP(a) === 6 && a === "::1");
}

/** localhost, 127.0.0.0/8 or ::1 (bracketed or not). */
export function isLoopbackName(host: string): boolean {
  const h = host.toLowerCase();
  return h === "localhost" || isLoopbackAddress(h);
}

/** The name in a Host value ("name", "name:port", "[v6]:port"); undefined when it is not that shape. */
export function hostName(value: string): string | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^[\]:/@\s]+)(?::\d{1,5})?$/.exec(value.trim());
  return m?.[1];
}

/** The Host table of docs/api/openai.md#request-checks. */
function hostAccepted(value: string, policy: HostPolicy): boolean {
  const name = hostName(value)?.toLowerCase();
  if (name === undefined) return false;
  if (policy.hosts?.includes("*") || policy.hosts?.includes(name)) return true;
  if (isLoopbackName(policy.bind)) return isLoopbackName(name);
  if (policy.authenticated) return true;
  const machine = hostname().toLowerCase();
  return (
    isIP(name.replace(/^\[(.*)\]$/, "$1")) !== 0 ||
    name === "localhost" ||
    name === machine ||
    name === `${machine}.local`
  );
}

/** An Origin that names a page on this machine (http(s) on a loopback name, any port), or one --web-origin lets in. */
function isAllowedOrigin(origin: string, allowed: readonly string[]): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // "null" (sandboxed or file pages) and anything unparsable
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return false;
  return isLoopbackName(url.hostname) || allowed.includes(url.origin);
}

/** The 403 a request gets before any route runs, or undefined when it may go on. */
export function foreignRequestRefusal(request: Request, policy: HostPolicy): RequestError | undefined {
  const origin = request.headers.get("origin");
  if (origin !== null && !isAllowedOrigin(origin, policy.origins ?? [])) {
    const also = policy.origins?.length ? ` and the origins --web-origin names` : "";
    return new RequestError(
      403,
      `requests from the page origin '${origin}' are refused: only pages on this machine${also} may call this server`,
      "origin_refused",
    );
  }
  // A request with no Host (HTTP/1.0) did not come from a browser.
  const host = request.headers.get("host");
  if (host !== null && !hostAccepted(host, policy)) {
    const where = isLoopbackName(policy.bind)
      ? "this server listens on loopback and answers only loopback names"
      : "this server answers only its own names and IP addresses";
    return new RequestError(403, `the Host '${host}' is refused: ${where}`, "origin_refused");
  }
  return undefined;
}
