// Origin and Host checks on every request (docs/api/openai.md#request-checks): a page
// the operator has not allowed may not drive the server through a visitor's browser
// (Origin; the allowed ones are answered with CORS, cors.ts), and neither may a name
// an attacker's DNS points here (Host, the DNS-rebinding defence).
import { isIP } from "node:net";
import { hostname } from "node:os";
import { RequestError } from "../daemon/request-error.ts";
import { AllowedOrigins } from "./allowed-origins.ts";
import { isLoopbackName } from "../runtime/loopback.ts";
import { hostName } from "./host-names.ts";

export interface HostPolicy {
  /** The address the listener is bound to. */
  bind: string;
  /** A key is required on requests (then any Host is accepted off loopback). */
  authenticated: boolean;
  /** The page origins let in (and answered with CORS); default: this machine's pages and the desktop shells. */
  origins?: AllowedOrigins;
  /** --allow-host: names a Host may carry besides those the bind allows (lowercase; `*` = any). */
  hosts?: readonly string[];
}

/** The list a policy without one gets. */
const DEFAULT_ORIGINS = new AllowedOrigins();

/** The page origins a policy lets in: the one list the Origin check and CORS both read. */
export function allowedOrigins(policy: HostPolicy): AllowedOrigins {
  return policy.origins ?? DEFAULT_ORIGINS;
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

/** The 403 a request gets before any route runs, or undefined when it may go on. */
export function foreignRequestRefusal(request: Request, policy: HostPolicy): RequestError | undefined {
  const origin = request.headers.get("origin");
  if (origin !== null && !allowedOrigins(policy).allows(origin)) {
    return new RequestError(
      403,
      `requests from the page origin '${origin}' are refused: only pages on this machine, local desktop apps ` +
        "and the origins --allow-origin names may call this server",
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
