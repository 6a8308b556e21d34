// One model over two `superfluid rpc-worker`s on loopback
// (docs/guides/multi-machine.md): the same greedy reply as the model served
// alone; a worker unreachable at start stops the start naming it; a worker
// killed mid-run turns requests into 503 rpc_worker_unavailable naming it,
// and its return brings the model back, the server never restarted. Needs
// ggml's RPC backend (the release's, or `bun build.ts --rpc-backend` when
// running from source; .ci/run builds it): skipped without one. Events, not
// clocks: each step waits for a log line or a reply.
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
import { freePorts } from "../support/replica-fleet.ts";

const ROOT = resolve(import.meta.dir, "../..");
const work = mkdtempSync(join(tmpdir(), "sf-rpc-"));
const backend = rpcBackendFile(loadLlama());
const procs: Subprocess[] = [];
afterAll(async () => {
  for (const p of procs) p.kill("SIGKILL");
  await Promise.all(procs.map((p) => p.exited));
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

/** A process whose stderr is gathered; `until` waits for a pattern in it (or its exit). */
function spawnLogged(args: string[]) {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    env: { ...process.env, SUPERFLUID_QUIET: "1" },
    stdin: "ignore",
    stdout: "ignore",
    stderr: "pipe",
  });
  procs.push(proc);
  let log = "";
  const reader = proc.stderr.pipeThrough(new TextDecoderStream()).getReader();
  const pump = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      log += value;
    }
  })();
  const until = async (pattern: RegExp): Promise<RegExpExecArray> => {
    for (;;) {
      const m = pattern.exec(log);
      if (m) return m;
      if (proc.exitCode !== null) {
        await pump;
        throw new Error(`exited ${proc.exitCode} before ${pattern}:\n${log}`);
      }
      await Bun.sleep(20);
    }
  };
  const ended = async () => {
    await proc.exited;
    await pump;
    return log;
  };
  return { proc, until, log: () => log, ended };
}

async function startWorker(port: number) {
  const w = spawnLogged(["rpc-worker", "--threads", "1", "--listen", `127.0.0.1:${port}`]);
  await w.until(/protocol 7\.0\.0 on/);
  // It listens once llama.cpp's server is up: asked until it answers (a hang guard ends a worker that never does).
  for (let tries = 0; !(await probeRpcWorker(`127.0.0.1:${port}`, 2000)).ok; tries++) {
    if (tries > 500) throw new Error(`the RPC worker on ${port} never answered:\n${w.log()}`);
    await Bun.sleep(20);
  }
  return w;
}

async function startServe(model: string, sessions: string, extra: string[]) {
  const s = spawnLogged(
    ["serve", model, "--http", "127.0.0.1:0", "--no-tui", "--threads", "1", "--max-batch", "1"]
      .concat(["--max-context", "1024", "--sessions", join(work, sessions)])
      .concat(extra),
  );
  const url = (await s.until(/serving .* at (http:\/\/127\.0\.0\.1:\d+)\/v1/))[1]!;
  return { ...s, url };
}

const GREEDY = {
  messages: [{ role: "user", content: "tell me about the weather in the city today" }],
  max_tokens: 32,
  temperature: 0,
  ignore_eos: true,
};

async function chat(url: string) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "tiny-random-1-v2", ...GREEDY }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe.skipIf(!backend)("one model over two RPC workers on loopback", () => {
  let model = "";
  let ports: number[] = [];
  let workers: Awaited<ReturnType<typeof startWorker>>[] = [];
  beforeAll(async () => {
    model = await fixturePath("tiny-random");
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
    const alone = await startServe(model, "alone", []);
    const expected = await chat(alone.url);
    alone.proc.kill("SIGTERM");
    await alone.ended();
    expect(expected.status).toBe(200);

    const split = await startServe(model, "split", rpc());
    const log = split.log();
    expect(log).toContain(`RPC worker 127.0.0.1:${ports[0]}: protocol 7.0.0`);
    expect(log).toMatch(/offload: .*RPC\d \(127\.0\.0\.1:\d+\).*CPU: /);
    const got = await chat(split.url);
    expect(got.status).toBe(200);
    expect(got.body.choices[0].message.content).toBe(expected.body.choices[0].message.content);
    expect(got.body.usage.completion_tokens).toBe(32);
    split.proc.kill("SIGTERM");
    expect(await split.proc.exited).toBe(0);
  });

  test("a worker that cannot be reached at start stops the start, named", async () => {
    const closed = `127.0.0.1:${ports[2]}`;
    const s = spawnLogged(
      [
        "serve",
        model,
        "--http",
        "127.0.0.1:0",
        "--no-tui",
        "--threads",
        "1",
        "--sessions",
        join(work, "unreachable"),
      ].concat(["--rpc", `127.0.0.1:${ports[0]},${closed}`]),
    );
    const log = await s.ended();
    expect(s.proc.exitCode).not.toBe(0);
    expect(log).toContain(`the RPC worker at ${closed} cannot be used: connection refused`);
  });

  test("a worker killed mid-run: 503 naming it while it is away, served again once it is back", async () => {
    const s = await startServe(model, "killed", rpc());
    expect((await chat(s.url)).status).toBe(200);
    workers[1]!.proc.kill("SIGKILL");
    await workers[1]!.proc.exited;
    // The engine worker dies with its connection (llama.cpp aborts on a lost RPC server); a request in flight then
    // may fail as that crash, and the ones after it meet the respawned worker's refusal.
    let away: { status: number; body: any } | undefined;
    for (let tries = 0; tries < 20 && !away; tries++) {
      const r = await chat(s.url);
      if (r.status === 503) away = r;
      else expect(r.status).toBe(500);
    }
    expect(away?.body.error.code).toBe("rpc_worker_unavailable");
    expect(away?.body.error.message).toContain(`the RPC worker at 127.0.0.1:${ports[1]} cannot be used`);
    expect((await fetch(`${s.url}/health`)).status).toBe(200);

    workers[1] = await startWorker(ports[1]!);
    const back = await chat(s.url);
    expect(back.status).toBe(200);
    expect(back.body.usage.completion_tokens).toBe(32);
    s.proc.kill("SIGTERM");
    expect(await s.proc.exited).toBe(0);
  });
});
