// RPC endpoints (docs/guides/multi-machine.md): `HOST:PORT` as llama.cpp's
// RPC backend takes them (an IPv4 address or a name; it splits at the first
// colon, so no IPv6 literals). Whether a listen address stays on this machine
// is src/runtime/loopback.ts.

export interface Endpoint {
  host: string;
  port: number;
}

/** The RPC worker's default listen address: llama.cpp's rpc-server's port, on loopback. */
export const DEFAULT_RPC_LISTEN = "127.0.0.1:50052";

/** One `HOST:PORT`; throws a message naming what is wrong. */
export function parseEndpoint(raw: string): Endpoint {
  const m = /^([A-Za-z0-9.-]+):(\d{1,5})$/.exec(raw.trim());
  const port = m ? Number(m[2]) : Number.NaN;
  if (!m || port < 1 || port > 65535)
    throw new Error(`'${raw}' is not HOST:PORT (an IPv4 address or a host name, and a port 1-65535)`);
  return { host: m[1]!, port };
}

/** `HOST:PORT[,HOST:PORT...]`, each once. */
export function parseEndpointList(raw: string): string[] {
  const list = raw.split(",").map((e) => e.trim());
  for (const e of list) parseEndpoint(e);
  const twice = list.find((e, i) => list.indexOf(e) !== i);
  if (twice !== undefined) throw new Error(`'${twice}' is named twice`);
  return list;
}
