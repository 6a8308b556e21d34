// Admin actions (loading models and adapters: they read any path the
// server's user can) answer clients on this machine only until API keys
// exist: 403 `admin_required` for any other TCP peer.
import { RequestError } from "./errors.ts";
import { peerAddress } from "./listener.ts";
import { isLoopbackName } from "./origin-guard.ts";

/** The TCP peer is loopback (an IPv4 peer on a dual-stack socket reads `::ffff:a.b.c.d`). */
function isLoopbackPeer(address: string): boolean {
  return isLoopbackName(address.replace(/^::ffff:/i, ""));
}

/** Refuses the request unless its peer is on this machine; `action` names what it asked for. */
export function requireAdmin(request: Request, action: string): void {
  if (!isLoopbackPeer(peerAddress(request))) {
    throw new RequestError(403, `${action} is an admin action, open only to clients on this machine (loopback)`, "admin_required");
  }
}
