// Host names and addresses as the listener's checks read them: which name a
// Host header carries, and which names and addresses are this machine's
// loopback (the Origin and Host checks, the admin routes, the --web listener).
import { isIP } from "node:net";

export function isLoopbackAddress(address: string): boolean {
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
