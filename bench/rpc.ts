// One model over RPC workers against the same model served alone
// (docs/guides/multi-machine.md): load time, prefill and decode tok/s, and
// whether the greedy reply is the same, on loopback and over a simulated LAN.
//
//   bun bench/rpc.ts [--model PATH] [--passes 2] [--delays 0,1,5]
//
// The model (default: the large-vocabulary fixture) is split across this
// machine and two `superfluid rpc-worker`s, each with one thread, with
// `--gpu-layers 3 --tensor-split 1,1`. Delays are round-trip times in ms: 0
// is loopback; any other puts each worker in a network namespace of its own,
// joined to this one by a veth pair with `tc netem` adding half the RTT on
// each side (root only; the namespaces are created here and removed at exit,
// and no traffic leaves this machine). A kernel without netem (sch_netem)
// gets the delay from a relay in this process instead, which holds every
// chunk half the RTT each way; the table says which, and the round trip a
// HELLO measured through it. Configurations run in turn, pass after
// pass; each figure is the median over passes and requests. Figures from the
// server's own access log (prefill and decode tok/s) and startup log (load).
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { connect, createServer } from "node:net";
import { ensureFixture } from "../src/fixtures/index.ts";
import { probeRpcWorker } from "../src/rpc/probe.ts";
import { machineLine } from "./machine.ts";

const ROOT = resolve(import.meta.dir, "..");
const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const passes = Number(arg("--passes") ?? 2);
const delays = (arg("--delays") ?? "0,1,5").split(",").map(Number);
const model = arg("--model") ?? (await ensureFixture("large-vocab"));
const work = mkdtempSync(join(tmpdir(), "sf-bench-rpc-"));
const procs: Subprocess[] = [];
const namespaces: string[] = [];

function sh(cmd: string[]): void {
  const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`${cmd.join(" ")}: ${r.stderr.toString().trim()}`);
}

function cleanup(): void {
  for (const p of procs) p.kill("SIGKILL");
  for (const ns of namespaces) Bun.spawnSync(["ip", "netns", "del", ns]);
  for (const i of [1, 2]) Bun.spawnSync(["ip", "link", "del", `sfrpc${i}h`]);
  rmSync(work, { recursive: true, force: true });
}
process.on("SIGINT", () => {
  cleanup();
  process.exit(130);
});

/** A namespace `sfrpc<i>` reached at 10.231.<i>.2 from 10.231.<i>.1, with netem adding rttMs/2 each way. */
function lan(i: number, rttMs: number): string {
  const ns = `sfrpc${i}`;
  Bun.spawnSync(["ip", "netns", "del", ns]);
  Bun.spawnSync(["ip", "link", "del", `${ns}h`]);
  sh(["ip", "netns", "add", ns]);
  namespaces.push(ns);
  sh(["ip", "link", "add", `${ns}h`, "type", "veth", "peer", "name", `${ns}n`]);
  sh(["ip", "link", "set", `${ns}n`, "netns", ns]);
  sh(["ip", "addr", "add", `10.231.${i}.1/24`, "dev", `${ns}h`]);
  sh(["ip", "link", "set", `${ns}h`, "up"]);
  sh(["ip", "netns", "exec", ns, "ip", "addr", "add", `10.231.${i}.2/24`, "dev", `${ns}n`]);
  sh(["ip", "netns", "exec", ns, "ip", "link", "set", `${ns}n`, "up"]);
  sh(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
  const half = `${rttMs / 2}ms`;
  const host = Bun.spawnSync(["tc", "qdisc", "add", "dev", `${ns}h`, "root", "netem", "delay", half]);
  if (host.exitCode === 0) {
    sh(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", `${ns}n`, "root", "netem", "delay", half]);
    netem = true;
  } else netem = false;
  return ns;
}

/** Whether the kernel had netem (else the relay below adds the delay). */
let netem: boolean | undefined;

/** A TCP relay on loopback to `target` that holds each chunk `oneWayMs` in each direction. */
function delayRelay(
  target: { host: string; port: number },
  oneWayMs: number,
): Promise<{ port: number; close(): void }> {
  const server = createServer((client) => {
    const upstream = connect(target);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      from.on("data", (chunk) => setTimeout(() => to.destroyed || to.write(chunk), oneWayMs));
      from.once("close", () => setTimeout(end, oneWayMs));
      from.once("error", end);
    }
  });
  return new Promise((done) =>
    server.listen(0, "127.0.0.1", () =>
      done({ port: (server.address() as { port: number }).port, close: () => server.close() }),
    ),
  );
}

/** Median ms of a HELLO exchange (three request/replies) with `endpoint`. */
async function helloMs(endpoint: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    await probeRpcWorker(endpoint, 5000);
    times.push(performance.now() - t0);
  }
  return median(times);
}

function dropLan(ns: string): void {
  Bun.spawnSync(["ip", "netns", "del", ns]);
  Bun.spawnSync(["ip", "link", "del", `${ns}h`]);
  namespaces.splice(namespaces.indexOf(ns), 1);
}

function spawnLogged(cmd: string[]) {
  const proc = Bun.spawn(cmd, { stdin: "ignore", stdout: "ignore", stderr: "pipe" });
  procs.push(proc);
  let log = "";
  void (async () => {
    for await (const chunk of proc.stderr.pipeThrough(new TextDecoderStream())) log += chunk;
  })();
  const until = async (pattern: RegExp) => {
    for (;;) {
      const m = pattern.exec(log);
      if (m) return m;
      if (proc.exitCode !== null) throw new Error(`exited ${proc.exitCode}:\n${log}`);
      await Bun.sleep(20);
    }
  };
  return { proc, until, log: () => log };
}

async function stop(p: Subprocess): Promise<void> {
  p.kill("SIGTERM");
  await p.exited;
  procs.splice(procs.indexOf(p), 1);
}

/** Two workers (1 thread each); their endpoints. */
async function startWorkers(rttMs: number): Promise<{ endpoints: string[]; stopAll: () => Promise<void> }> {
  const made: { proc: Subprocess; ns?: string; relay?: { close(): void } }[] = [];
  const endpoints: string[] = [];
  for (const i of [1, 2]) {
    const ns = rttMs > 0 ? lan(i, rttMs) : undefined;
    const listen = ns ? `10.231.${i}.2:50052` : `127.0.0.1:${50600 + i}`;
    const base = [process.execPath, join(ROOT, "src/main.ts"), "rpc-worker", "--threads", "1", "--listen", listen];
    const cmd = ns ? ["ip", "netns", "exec", ns, ...base, "--allow-network"] : base;
    const w = spawnLogged(cmd);
    await w.until(/protocol \S+ on/);
    while (!(await probeRpcWorker(listen, 2000)).ok) await Bun.sleep(50);
    if (ns && !netem) {
      const relay = await delayRelay({ host: `10.231.${i}.2`, port: 50052 }, rttMs / 2);
      made.push({ proc: w.proc, ns, relay });
      endpoints.push(`127.0.0.1:${relay.port}`);
    } else {
      made.push({ proc: w.proc, ...(ns ? { ns } : {}) });
      endpoints.push(listen);
    }
  }
  return {
    endpoints,
    stopAll: async () => {
      for (const m of made) {
        m.relay?.close();
        await stop(m.proc);
        if (m.ns) dropLan(m.ns);
      }
    },
  };
}

interface Sample {
  loadS: number;
  prefill: number[];
  decode: number[];
  reply: string;
}

const words = "the of and to in is it you that was for on are with as his they be at one have this from".split(" ");
const prompt = (seed: number, n: number) =>
  Array.from({ length: n }, (_, k) => words[(seed * 31 + k * 7 + ((k * k) % 13)) % words.length]).join(" ");

async function measure(config: string, extra: string[], pass: number): Promise<Sample> {
  const s = spawnLogged(
    [process.execPath, join(ROOT, "src/main.ts"), "serve", model, "--http", "127.0.0.1:0", "--no-tui"]
      .concat(["--threads", "1", "--max-batch", "1", "--max-context", "2048"])
      .concat(["--sessions", join(work, `${config}-${pass}`)])
      .concat(extra),
  );
  const url = (await s.until(/serving .* at (http:\/\/127\.0\.0\.1:\d+)\/v1/))[1]!;
  const loadS = Number((await s.until(/ready in ([\d.]+) s/))[1]);
  const id = ((await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
  const ask = async (content: string, maxTokens: number) => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: id,
        messages: [{ role: "user", content }],
        max_tokens: maxTokens,
        temperature: 0,
        ignore_eos: true,
      }),
    });
    const body = (await res.json()) as { choices: { message: { content: string } }[] };
    return body.choices[0]!.message.content;
  };
  const sample: Sample = { loadS, prefill: [], decode: [], reply: "" };
  const access = () => [...s.log().matchAll(/prefill=([\d.]+) tok\/s decode=([\d.]+|-)/g)];
  for (let r = 0; r < 3; r++) {
    await ask(`${pass}-${r} ${prompt(r + 10 * pass, 1000)}`, 2);
    const seen = access().length;
    sample.reply = await ask(`weather report ${r}`, 128);
    while (access().length <= seen) await Bun.sleep(10);
    const all = access();
    sample.prefill.push(Number(all[all.length - 2]![1]));
    sample.decode.push(Number(all[all.length - 1]![2]));
  }
  await stop(s.proc);
  return sample;
}

const median = (v: number[]) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

try {
  if (!existsSync(model)) throw new Error(`no model at ${model}`);
  console.log(`# ${machineLine()}`);
  console.log(
    `# model ${model}; split: --gpu-layers 3 --tensor-split 1,1 over two workers of 1 thread; ${passes} passes`,
  );
  const configs = ["local", ...delays.map((d) => (d === 0 ? "rpc loopback" : `rpc ${d} ms RTT`))];
  const results = new Map<string, Sample[]>(configs.map((c) => [c, []]));
  const hello = new Map<string, number[]>();
  for (let pass = 0; pass < passes; pass++) {
    for (const config of configs) {
      if (config === "local") {
        results.get(config)!.push(await measure("local", [], pass));
        continue;
      }
      const rtt = config === "rpc loopback" ? 0 : Number(/rpc (\d+(?:\.\d+)?) ms/.exec(config)![1]);
      const workers = await startWorkers(rtt);
      hello.set(config, [...(hello.get(config) ?? []), await helloMs(workers.endpoints[0]!)]);
      const extra = ["--rpc", workers.endpoints.join(","), "--gpu-layers", "3", "--tensor-split", "1,1"];
      results.get(config)!.push(await measure(config.replace(/ /g, "-"), extra, pass));
      await workers.stopAll();
    }
  }
  const local = results.get("local")!;
  const delayBy =
    netem === undefined ? "" : netem ? " (delay: tc netem)" : " (delay: a relay in the bench; no netem in this kernel)";
  console.log(
    `\n| configuration${delayBy} | HELLO exchange (4 round trips) | load | prefill tok/s | decode tok/s | greedy reply as local |`,
  );
  console.log("|---|---:|---:|---:|---:|---|");
  for (const [config, samples] of results) {
    const load = median(samples.map((x) => x.loadS));
    const prefill = median(samples.flatMap((x) => x.prefill));
    const decode = median(samples.flatMap((x) => x.decode));
    const same = samples.every((x, i) => x.reply === local[i]!.reply);
    const rtt = hello.get(config);
    console.log(
      `| ${config} | ${rtt ? `${median(rtt).toFixed(1)} ms` : "-"} | ${load.toFixed(1)} s | ${prefill.toFixed(0)} | ` +
        `${decode.toFixed(1)} | ${same ? "yes" : "no"} |`,
    );
  }
} finally {
  cleanup();
}
