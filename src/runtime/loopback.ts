// Which names and addresses are this machine's loopback: the one check behind the
// listener's Origin and Host checks, the admin routes, the --web listener and
// rpc-worker's listen address.
import { isIP } from "node:net";

/** 127.0.0.0/8, ::1, or an IPv4-mapped ::ffff:127.x.y.z (as a dual-stack socket reports a peer); bracketed or not. */
export function isLoopbackAddress(address: string): boolean {
  const a = address.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  const v4 = a.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, "");
  return (isIP(v4) === 4 && v4.startsWith("127.")) || (isIP(a) === 6 && a === "::1");
}

/** localhost, or a loopback address (isLoopbackAddress); any case. */
export function isLoopbackName(host: string): boolean {
  const h = host.toLowerCase();
  return h === "localhost" || isLoopbackAddress(h);
}
