// Several `superfluid serve` processes on loopback behind a real HAProxy
// (docs/guides/scale-out.md): replicas that can be killed and restarted on
// the same port and sessions folder, and the router's own view of them read
// from its stats socket, so a test waits for HAProxy to mark a server down or
// up instead of sleeping.
import type { Subprocess } from "bun";
import { existsSync, writeFileSync } from "node:fs";
import { createConnection } from "node:net";
import { join } from "node:path";
import type { FixtureKind } from "../../src/fixtures/index.ts";
import { ServerProcess } from "../scenarios/support.ts";

/** HAProxy's path, when Debian's package (or any) is installed; /usr/sbin is off a non-root PATH. */
export const HAPROXY = Bun.which("haproxy") ?? (existsSync("/usr/sbin/haproxy") ? "/usr/sbin/haproxy" : null);

export interface Replica {
  readonly id: string;
  readonly port: number;
  readonly url: string;
  readonly sessions: string;
  readonly server: ServerProcess;
  /** The startup's session-log line: sessions and records replayed from `<sessions>/wal.log`. */
  recovered: { sessions: number; records: number };
}

/** Starts `superfluid serve` on `fixture` as replica `id` on `port`, and resolves once /health answers. */
export async function startReplica(
  id: string,
  port: number,
  sessions: string,
  fixture: FixtureKind,
  extra: string[] = [],
): Promise<Replica> {
  const server = await ServerProcess.spawn(
    ["--no-tui", "--sessions", sessions, "--replica-id", id, "--drain-timeout", "60", ...extra],
    port,
    fixture,
  );
  // A hang guard only: the replica is started once /health says so.
  const state = await server.waitHealthy(600_000);
  if (state !== "healthy") throw new Error(`replica ${id} did not start (${state}):\n${server.stderr}`);
  const m = /session log .*\(epoch \d+; (\d+) sessions, (\d+) records replayed/.exec(server.stderr);
  return {
    id,
    port,
    url: server.url,
    sessions,
    server,
    recovered: m ? { sessions: Number(m[1]), records: Number(m[2]) } : { sessions: -1, records: -1 },
  };
}

/** Kills a replica the hard way (SIGKILL, its engine worker too: no drain, no flush beyond each synced request). */
export function killReplica(r: Replica): Promise<void> {
  return r.server.killHard();
}

/** Stops a replica as an orchestrator does (SIGTERM: drain, exit 0); returns its exit code. */
export async function stopReplica(r: Replica): Promise<number> {
  const proc = r.server.proc;
  if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode ?? -1;
  proc.kill("SIGTERM");
  return proc.exited;
}

export type Balance = "hdr(x-superfluid-session-key)" | "roundrobin" | "leastconn";

export interface Frontend {
  name: string;
  port: number;
  balance: Balance;
}

/**
 * HAProxy's configuration: one frontend and backend per balance mode, all
 * over the same replicas. Health checks read /health/ready; a request whose
 * replica refused the connection or closed it without a reply is retried on
 * another (retry-on + redispatch; the body is buffered so it can be sent
 * again). A request carrying `x-pin` goes to the first replica whatever the
 * mode: how a test makes one replica busy in HAProxy's own connection counts.
 */
export function haproxyConfig(dir: string, frontends: Frontend[], replicas: { id: string; port: number }[]): string {
  const lines = [
    "global",
    `  stats socket ${join(dir, "admin.sock")} mode 600 level admin`,
    // A whole agent turn (a 2k-token prompt and its history) fits the buffer, so it can be retried.
    "  tune.bufsize 262144",
    "defaults",
    "  mode http",
    "  timeout connect 2s",
    "  timeout client 600s",
    "  timeout server 600s",
    "  timeout queue 600s",
    "  retries 3",
    "  option redispatch 1",
    "  retry-on conn-failure empty-response",
    "  option http-buffer-request",
  ];
  for (const f of frontends) {
    lines.push(`frontend ${f.name}`, `  bind 127.0.0.1:${f.port}`, `  default_backend ${f.name}`);
    lines.push(`backend ${f.name}`, `  balance ${f.balance}`);
    if (f.balance.startsWith("hdr(")) lines.push("  hash-type consistent");
    lines.push("  option httpchk GET /health/ready", `  use-server ${replicas[0]!.id} if { req.hdr(x-pin) -m found }`);
    for (const r of replicas)
      lines.push(`  server ${r.id} 127.0.0.1:${r.port} check inter 200ms fall 1 rise 1 maxconn 64`);
  }
  return `${lines.join("\n")}\n`;
}

export interface Router {
  proc: Subprocess<"ignore", "ignore", "pipe">;
  /** Each server's status as HAProxy sees it in `backend`: UP, DOWN, ... */
  states(backend: string): Promise<Map<string, string>>;
  /** Resolves once every backend shows `server` in `status` (a hang guard fails the test instead). */
  waitFor(server: string, status: "UP" | "DOWN"): Promise<void>;
  stop(): Promise<void>;
}

function statsCommand(socket: string, command: string): Promise<string> {
  return new Promise((done, fail) => {
    const conn = createConnection(socket);
    let out = "";
    conn.on("data", (d) => (out += d.toString()));
    conn.on("end", () => done(out));
    conn.on("error", fail);
    conn.write(`${command}\n`);
  });
}

/** Starts HAProxy on `config` in the foreground and waits for its stats socket. */
export async function startRouter(dir: string, config: string, backends: string[]): Promise<Router> {
  if (!HAPROXY) throw new Error("haproxy is not installed");
  const cfg = join(dir, "haproxy.cfg");
  writeFileSync(cfg, config);
  const proc = Bun.spawn([HAPROXY, "-db", "-f", cfg], { stdin: "ignore", stdout: "ignore", stderr: "pipe" });
  const socket = join(dir, "admin.sock");
  const states = async (backend: string) => {
    const csv = await statsCommand(socket, "show stat");
    const header = csv.split("\n")[0]!.replace(/^# /, "").split(",");
    const [px, sv, st] = ["pxname", "svname", "status"].map((k) => header.indexOf(k));
    const out = new Map<string, string>();
    for (const row of csv.split("\n").slice(1)) {
      const f = row.split(",");
      if (f[px!] === backend && f[sv!] !== "BACKEND" && f[sv!] !== "FRONTEND") out.set(f[sv!]!, f[st!]!);
    }
    return out;
  };
  const waitFor = async (server: string, status: "UP" | "DOWN") => {
    const started = performance.now();
    for (;;) {
      const all = await Promise.all(backends.map(states));
      if (all.every((m) => m.get(server)?.startsWith(status))) return;
      if (performance.now() - started > 120_000) throw new Error(`haproxy never showed ${server} ${status}`);
      await Bun.sleep(50);
    }
  };
  const started = performance.now();
  for (;;) {
    try {
      await states(backends[0]!);
      break;
    } catch {
      if (proc.exitCode !== null) throw new Error(`haproxy exited: ${await new Response(proc.stderr).text()}`);
      if (performance.now() - started > 60_000) throw new Error("haproxy's stats socket never answered");
      await Bun.sleep(50);
    }
  }
  return {
    proc,
    states,
    waitFor,
    stop: async () => {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}
