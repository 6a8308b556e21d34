// One model over two `superfluid rpc-worker`s on loopback
// (docs/guides/multi-machine.md): the same greedy reply as the model served
// alone; a worker unreachable at start stops the start naming it; a worker
// killed mid-run turns requests into 503 rpc_worker_unavailable naming it,
// and its return brings the model back, the server never restarted. Needs
// ggml's RPC backend (the release's, or `bun build.ts --rpc-backend` when
// running from source; .ci/run builds it): skipped without one. Events, not
// clocks: each step waits for a reply, /health, or a process's exit.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { loadLlama } from "../../ffi/llama.ts";
import { rpcBackendFile } from "../../ffi/rpc.ts";
import { MEMORY_REFUSAL, parseRpcWorkerArgs } from "../../src/cli/rpc-worker.ts";
import { probeRpcWorker } from "../../src/rpc/probe.ts";
import { fixturePath } from "../support/models.ts";
import { freePorts, postChat, ServerProcess } from "../scenarios/support.ts";

const ROOT = resolve(import.meta.dir, "../..");
const work = mkdtempSync(join(tmpdir(), "sf-rpc-"));
const backend = rpcBackendFile(loadLlama());
const procs: Subprocess[] = [];
const servers: ServerProcess[] = [];
afterAll(async () => {
  for (const p of procs) p.kill("SIGKILL");
  await Promise.all(procs.map((p) => p.exited));
  for (const server of servers) await server.killHard();
  rmSync(work, { recursive: true, force: true });
});

describe("rpc-worker's flags", () => {
  test("a non-loopback --listen needs --allow-network; --memory is refused by name", () => {
    const refused = parseRpcWorkerArgs(["--listen", "0.0.0.0:50052"]);
    expect("error" in refused && refused.error).toContain("--allow-network");
    expect(parseRpcWorkerArgs(["--listen", "0.0.0.0:50052", "--allow-network"])).toMatchObject({
      listen: "0.0.0.0:50052",
      allowNetwork: true,
    });
    expect(parseRpcWorkerArgs([])).toMatchObject({ listen: "127.0.0.1:50052", allowNetwork: false });
    expect(parseRpcWorkerArgs(["--memory", "8G"])).toEqual({ error: MEMORY_REFUSAL });
    expect(parseRpcWorkerArgs(["--listen", "[::1]:1"])).toMatchObject({ error: expect.stringContaining("HOST:PORT") });
  });

  test("the command refuses 0.0.0.0 without --allow-network, before it opens anything", async () => {
    const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), "rpc-worker", "--listen", "0.0.0.0:50052"], {
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(await proc.exited).toBe(2);
    expect(await new Response(proc.stderr).text()).toContain("is not a loopback address");
  });
});

test("without an RPC backend, serve --rpc and rpc-worker refuse by name", async () => {
  // An empty cache folder: no record of a backend built for running from source.
  const env = { ...process.env, SUPERFLUID_CACHE_DIR: join(work, "empty-cache"), SUPERFLUID_RPC_BACKEND: "" };
  if (rpcBackendFile(loadLlama(), env)) return; // this libllama carries one beside it (a release build)
  const model = await fixturePath("tiny-random");
  for (const args of [
    [
      "serve",
      model,
      "--http",
      "127.0.0.1:0",
      "--no-tui",
      "--sessions",
      join(work, "nobackend"),
      "--rpc",
      "127.0.0.1:1",
    ],
    ["rpc-worker", "--listen", "127.0.0.1:1"],
  ]) {
    const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), ...args], {
      env,
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(await proc.exited).toBe(1);
    expect(await new Response(proc.stderr).text()).toContain("this build has no RPC backend");
  }
});

/** An rpc-worker on `port`, once it answers a HELLO (a hang guard ends one that never does). */
async function startWorker(port: number): Promise<Subprocess<"ignore", "ignore", "pipe">> {
  const proc = Bun.spawn(
    [process.execPath, join(ROOT, "src/main.ts"), "rpc-worker", "--threads", "1", "--listen", `127.0.0.1:${port}`],
    { stdin: "ignore", stdout: "ignore", stderr: "pipe" },
  );
  procs.push(proc);
  for (let tries = 0; !(await probeRpcWorker(`127.0.0.1:${port}`, 2000)).ok; tries++) {
    if (proc.exitCode !== null)
      throw new Error(`the rpc-worker on ${port} exited: ${await new Response(proc.stderr).text()}`);
    if (tries > 500) throw new Error(`the rpc-worker on ${port} never answered`);
    await Bun.sleep(20);
  }
  return proc;
}

/** `superfluid serve` on tiny-random in its own process; `healthy` once /health answered (or it exited). */
async function startServe(sessions: string, extra: string[]) {
  const server = await ServerProcess.spawn(
    ["--no-tui", "--max-batch", "1", "--max-context", "1024", "--sessions", join(work, sessions), ...extra],
    undefined,
    "tiny-random",
  );
  servers.push(server);
  return { server, state: await server.waitHealthy(600_000) };
}

const GREEDY = {
  messages: [{ role: "user", content: "tell me about the weather in the city today" }],
  max_tokens: 32,
  temperature: 0,
  ignore_eos: true,
};

async function chat(url: string): Promise<{ status: number; body: any }> {
  const r = await postChat(url, { model: "tiny-random-1-v2", ...GREEDY });
  return { status: r.status, body: r.json };
}

describe.skipIf(!backend)("one model over two RPC workers on loopback", () => {
  let ports: number[] = [];
  let workers: Subprocess<"ignore", "ignore", "pipe">[] = [];
  beforeAll(async () => {
    ports = await freePorts(3);
    workers = [await startWorker(ports[0]!), await startWorker(ports[1]!)];
  });
  const rpc = () => [
    "--rpc",
    `127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}`,
    "--gpu-layers",
    "2",
    "--tensor-split",
    "1,1",
  ];

  test("split across this machine and both workers, the greedy reply is the one served alone", async () => {
    const alone = await startServe("alone", []);
    expect(alone.state).toBe("healthy");
    const expected = await chat(alone.server.url);
    alone.server.proc.kill("SIGTERM");
    await alone.server.proc.exited;
    expect(expected.status).toBe(200);

    const split = await startServe("split", rpc());
    expect(split.state).toBe("healthy");
    const log = split.server.stderr;
    expect(log).toContain(`RPC worker 127.0.0.1:${ports[0]}: protocol 7.0.0`);
    expect(log).toMatch(/offload: .*RPC\d \(127\.0\.0\.1:\d+\).*CPU: /);
    const got = await chat(split.server.url);
    expect(got.status).toBe(200);
    expect(got.body.choices[0].message.content).toBe(expected.body.choices[0].message.content);
    expect(got.body.usage.completion_tokens).toBe(32);
    split.server.proc.kill("SIGTERM");
    expect(await split.server.proc.exited).toBe(0);
  });

  test("a worker that cannot be reached at start stops the start, named", async () => {
    const closed = `127.0.0.1:${ports[2]}`;
    const { server, state } = await startServe("unreachable", ["--rpc", `127.0.0.1:${ports[0]},${closed}`]);
    expect(state).toBe("exited");
    expect(await server.proc.exited).not.toBe(0);
    expect(await server.stderrWith(closed)).toContain(`the RPC worker at ${closed} cannot be used: connection refused`);
  });

  test("a worker killed mid-run: 503 naming it while it is away, served again once it is back", async () => {
    const { server, state } = await startServe("killed", rpc());
    expect(state).toBe("healthy");
    expect((await chat(server.url)).status).toBe(200);
    workers[1]!.kill("SIGKILL");
    await workers[1]!.exited;
    // The engine worker dies with its connection (llama.cpp aborts on a lost RPC server); a request in flight then
    // may fail as that crash, and the ones after it meet the respawned worker's refusal.
    let away: { status: number; body: any } | undefined;
    for (let tries = 0; tries < 20 && !away; tries++) {
      const r = await chat(server.url);
      if (r.status === 503) away = r;
      else expect(r.status).toBe(500);
    }
    expect(away?.body.error.code).toBe("rpc_worker_unavailable");
    expect(away?.body.error.message).toContain(`the RPC worker at 127.0.0.1:${ports[1]} cannot be used`);
    expect((await fetch(`${server.url}/health`)).status).toBe(200);

    workers[1] = await startWorker(ports[1]!);
    const back = await chat(server.url);
    expect(back.status).toBe(200);
    expect(back.body.usage.completion_tokens).toBe(32);
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
  });
});
