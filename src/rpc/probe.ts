// Asks an RPC worker its protocol version and devices over a plain socket,
// before libllama's RPC client is let near it: that client aborts the whole
// process when a worker cannot be reached or its handshake fails (GGML_ABORT
// in ggml-rpc.cpp), and a worker serving another client answers nobody else
// until that one leaves. The probe has a timeout and says which it met.
//
// Wire format (ggml-rpc.cpp, protocol 7): a request is a command byte, a u64
// size and that many bytes; a reply is a u64 size and that many bytes, all
// little-endian. HELLO (14) sends 24 bytes of transport capabilities (zero:
// plain TCP) and gets major, minor, patch, a pad byte and 24 bytes back;
// DEVICE_COUNT (15) gets a u32; GET_DEVICE_MEMORY (11) sends a u32 device and
// gets u64 free and u64 total bytes.
import { connect, type Socket } from "node:net";
import { parseEndpoint } from "./endpoint.ts";

/**
 * The RPC protocol of the pinned llama.cpp (ggml-rpc.h's RPC_PROTO_*_VERSION): a worker and a server must speak the
 * same major version. A source build whose header says otherwise is refused (src/release/llama-from-source.ts).
 */
export const RPC_PROTOCOL = "7.0.0";

const HELLO = 14;
const DEVICE_COUNT = 15;
const GET_DEVICE_MEMORY = 11;
const CAPS = 24;

export interface RemoteDevice {
  freeBytes: number;
  totalBytes: number;
}

export type ProbeResult =
  | { ok: true; version: string; major: number; minor: number; devices: RemoteDevice[] }
  | { ok: false; reason: string };

/** Request/reply over one socket, each reply read whole before the next request. */
class Conversation {
  private buffered = Buffer.alloc(0);
  private wake?: () => void;
  private failure?: string;

  constructor(private readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      this.wake?.();
    });
    const fail = (why: string) => {
      this.failure ??= why;
      this.wake?.();
    };
    socket.once("error", (err: NodeJS.ErrnoException) =>
      fail(err.code === "ECONNREFUSED" ? "connection refused" : err.message),
    );
    socket.once("close", () => fail("it closed the connection"));
  }

  private async take(n: number): Promise<Buffer> {
    while (this.buffered.length < n) {
      if (this.failure) throw new Error(this.failure);
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
    const out = this.buffered.subarray(0, n);
    this.buffered = this.buffered.subarray(n);
    return out;
  }

  /** Sends a command and reads its reply, which must be `size` bytes. */
  async call(command: number, payload: Buffer, size: number): Promise<Buffer> {
    const head = Buffer.alloc(9);
    head[0] = command;
    head.writeBigUInt64LE(BigInt(payload.length), 1);
    this.socket.write(Buffer.concat([head, payload]));
    const got = Number((await this.take(8)).readBigUInt64LE(0));
    if (got !== size) throw new Error(`not an RPC worker of protocol 7 (a reply of ${got} bytes, not ${size})`);
    return this.take(size);
  }
}

/** Protocol version and devices of the worker at `endpoint` (HOST:PORT), or why there are none within `timeoutMs`. */
export function probeRpcWorker(endpoint: string, timeoutMs = 5000): Promise<ProbeResult> {
  const { host, port } = parseEndpoint(endpoint);
  const socket = connect({ host, port });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<ProbeResult>((resolve) => {
    timer = setTimeout(
      () =>
        resolve({
          ok: false,
          reason: socket.connecting
            ? `no connection within ${timeoutMs} ms`
            : `no answer within ${timeoutMs} ms (is it serving another client?)`,
        }),
      timeoutMs,
    );
  });
  const talk = (async (): Promise<ProbeResult> => {
    const c = new Conversation(socket);
    try {
      const hello = await c.call(HELLO, Buffer.alloc(CAPS), 4 + CAPS);
      const [major, minor, patch] = [hello[0]!, hello[1]!, hello[2]!];
      const count = (await c.call(DEVICE_COUNT, Buffer.alloc(0), 4)).readUInt32LE(0);
      const devices: RemoteDevice[] = [];
      for (let i = 0; i < count; i++) {
        const req = Buffer.alloc(4);
        req.writeUInt32LE(i, 0);
        const mem = await c.call(GET_DEVICE_MEMORY, req, 16);
        devices.push({ freeBytes: Number(mem.readBigUInt64LE(0)), totalBytes: Number(mem.readBigUInt64LE(8)) });
      }
      return { ok: true, version: `${major}.${minor}.${patch}`, major, minor, devices };
    } catch (err) {
      return { ok: false, reason: (err as Error).message };
    }
  })();
  return Promise.race([talk, timeout]).finally(() => {
    clearTimeout(timer);
    socket.destroy();
  });
}

/**
 * Whether a worker of `found` may serve a client of `ours` (`major.minor.patch`): the client's rule in
 * ggml-rpc.cpp, the same major and a minor no newer than the client's.
 */
export function compatibleProtocol(ours: string, found: { major: number; minor: number }): boolean {
  const [major, minor] = ours.split(".").map(Number);
  return found.major === major && found.minor <= minor!;
}

/** The worker at `endpoint` when it can serve a client of RPC_PROTOCOL; else throws a message naming it. */
export async function usableRpcWorker(
  endpoint: string,
  timeoutMs?: number,
): Promise<{ version: string; devices: RemoteDevice[] }> {
  const found = await probeRpcWorker(endpoint, timeoutMs);
  if (!found.ok) throw new Error(`the RPC worker at ${endpoint} cannot be used: ${found.reason}`);
  if (!compatibleProtocol(RPC_PROTOCOL, found))
    throw new Error(
      `the RPC worker at ${endpoint} speaks protocol ${found.version}, this server ${RPC_PROTOCOL}: ` +
        "run the same superfluid version on both",
    );
  return found;
}
