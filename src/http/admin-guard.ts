// Admin actions (loading models and adapters: they read any path the
// server's user can; docs/api/security.md#admin-routes). With keys, they need
// the global --api-key or a policy key with `admin: true`; without keys, they
// answer clients on this machine only. Anything else is 403 `admin_required`.
import { principalOf } from "./auth/principal.ts";
import { RequestError } from "../daemon/request-error.ts";
import { peerAddress } from "./listener.ts";
import { isLoopbackName } from "./host-names.ts";

/** The TCP peer is loopback (an IPv4 peer on a dual-stack socket reads `::ffff:a.b.c.d`). */
function isLoopbackPeer(address: string): boolean {
  return isLoopbackName(address.replace(/^::ffff:/i, ""));
}

/** Refuses the request unless it may take admin actions; `action` names what it asked for. */
export function requireAdmin(request: Request, action: string): void {
  const principal = principalOf(request);
  if (principal) {
    if (principal.admin) return;
    throw new RequestError(
      403,
      `${action} is an admin action: the key '${principal.name}' is not an admin key`,
      "admin_required",
    );
  }
  if (!isLoopbackPeer(peerAddress(request))) {
    throw new RequestError(
      403,
      `${action} is an admin action, open only to clients on this machine (loopback) on a server without API keys`,
      "admin_required",
    );
  }
}
