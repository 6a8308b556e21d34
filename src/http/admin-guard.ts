// Admin actions (loading models and adapters: they read any path the
// server's user can; docs/api/security.md#admin-routes). With keys, they need
// the global --api-key or a policy key with `admin: true`; without keys, they
// answer clients on this machine only. Anything else is 403 `admin_required`.
import { principalOf } from "./auth/principal.ts";
import { RequestError } from "../daemon/request-error.ts";
import { peerAddress } from "./listener.ts";
import { isLoopbackAddress } from "../runtime/loopback.ts";

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
  if (!isLoopbackAddress(peerAddress(request))) {
    throw new RequestError(
      403,
      `${action} is an admin action, open only to clients on this machine (loopback) on a server without API keys`,
      "admin_required",
    );
  }
}
