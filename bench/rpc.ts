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
// HELLO measured through it. Configurations run in turn, pass after pass;
// each figure is the median over passes and requests, read from the server's
// JSON log (--log-dir): prefill and decode tok/s of its access records, the
// load from its "ready in" line.
import type { ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { join, resolve } from "node:path";
import { ensureFixture } from "../src/fixtures/index.ts";
import { probeRpcWorker } from "../src/rpc/probe.ts";
import { machineLine } from "./machine.ts";
import { median, parseOptions, scratchFolder, spawnGroup, startSuperfluid, stopGroup } from "./support.ts";

const USAGE = "usage: bun bench/rpc.ts [--model PATH] [--passes N] [--delays MS,MS,...]";
const { opts, int } = parseOptions(USAGE, ["model", "passes", "delays"]);
const ROOT = resolve(import.meta.dir, "..");
const passes = int("passes", 2, 1);
const delays = (opts.get("delays") ?? "0,1,5").split(",").map(Number);
const model = opts.get("model") ?? (await ensureFixture("large-vocab"));
const work = scratchFolder("sf-bench-rpc-");

const namespaces: string[] = [];
process.on("exit", () => {
  for (const ns of namespaces) dropLan(ns);
});

function sh(cmd: string[]): void {
  const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`${cmd.join(" ")}: ${r.stderr.toString().trim()}`);
}

/** Whether the kernel had netem (else the relay below adds the delay). */
let netem: boolean | undefined;

/** A namespace `sfrpc<i>` reached at 10.231.<i>.2 from 10.231.<i>.1, with netem adding rttMs/2 each way. */
function lan(i: number, rttMs: number): string {
  const ns = `sfrpc${i}`;
  dropLan(ns);
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

function dropLan(ns: string): void {
  Bun.spawnSync(["ip", "netns", "del", ns]);
  Bun.spawnSync(["ip", "link", "del", `${ns}h`]);
  const at = namespaces.indexOf(ns);
  if (at >= 0) namespaces.splice(at, 1);
}

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

/** Median ms of a HELLO exchange (connect and three request/replies) with `endpoint`. */
async function helloMs(endpoint: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    await probeRpcWorker(endpoint, 5000);
    times.push(performance.now() - t0);
  }
  return median(times);
}

/** Two workers (1 thread each); the endpoints the server is given. */
async function startWorkers(rttMs: number): Promise<{ endpoints: string[]; stopAll: () => Promise<void> }> {
  const made: { child: ChildProcess; ns?: string; relay?: { close(): void } }[] = [];
  const endpoints: string[] = [];
  for (const i of [1, 2]) {
    const ns = rttMs > 0 ? lan(i, rttMs) : undefined;
    const listen = ns ? `10.231.${i}.2:50052` : `127.0.0.1:${50600 + i}`;
    const worker = [process.execPath, join(ROOT, "src/main.ts"), "rpc-worker", "--threads", "1", "--listen", listen];
    const [cmd, ...args] = ns ? ["ip", "netns", "exec", ns, ...worker, "--allow-network"] : worker;
    const child = spawnGroup(cmd!, args, { stdio: "ignore" });
    while (!(await probeRpcWorker(listen, 2000)).ok) {
      if (child.exitCode !== null) throw new Error(`the rpc-worker on ${listen} exited ${child.exitCode}`);
      await Bun.sleep(50);
    }
    const relay = ns && !netem ? await delayRelay({ host: `10.231.${i}.2`, port: 50052 }, rttMs / 2) : undefined;
    made.push({ child, ...(ns ? { ns } : {}), ...(relay ? { relay } : {}) });
    endpoints.push(relay ? `127.0.0.1:${relay.port}` : listen);
  }
  return {
    endpoints,
    stopAll: async () => {
      for (const m of made) {
        m.relay?.close();
        await stopGroup(m.child);
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

/** The records of a server's JSON log (--log-dir), in order. */
function jsonLog(dir: string): Record<string, unknown>[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".jsonl"))
    .sort()
    .flatMap((f) => readFileSync(join(dir, f), "utf8").split("\n").filter(Boolean))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

async function measure(config: string, extra: string[], pass: number): Promise<Sample> {
  const name = `${config.replace(/\W+/g, "-")}-${pass}`;
  const logDir = join(work, `${name}-log`);
  let server: ChildProcess | undefined;
  const url = await startSuperfluid(
    [model, "--no-tui", "--threads", "1", "--max-batch", "1", "--max-context", "2048"]
      .concat(["--sessions", join(work, name), "--log-dir", logDir])
      .concat(extra),
    join(work, `${name}.log`),
    (child) => (server = child),
  );
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
  let reply = "";
  for (let r = 0; r < 3; r++) {
    await ask(`${pass}-${r} ${prompt(r + 10 * pass, 1000)}`, 2);
    reply = await ask(`weather report ${r}`, 128);
  }
  await stopGroup(server!);
  const records = jsonLog(logDir);
  // Each round's first record is the long prompt (its prefill), its second the 128-token reply (its decode).
  const access = records.filter((r) => r.type === "access");
  const ready = records.map((r) => /ready in ([\d.]+) s/.exec(String(r.message ?? ""))).find(Boolean);
  return {
    loadS: Number(ready?.[1]),
    prefill: access.filter((_, i) => i % 2 === 0).map((r) => Number(r.prefill_tps)),
    decode: access.filter((_, i) => i % 2 === 1).map((r) => Number(r.decode_tps)),
    reply,
  };
}

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
      results.get(config)!.push(await measure(config, [], pass));
      continue;
    }
    const rtt = config === "rpc loopback" ? 0 : Number(/rpc (\d+(?:\.\d+)?) ms/.exec(config)![1]);
    const workers = await startWorkers(rtt);
    hello.set(config, [...(hello.get(config) ?? []), await helloMs(workers.endpoints[0]!)]);
    const extra = ["--rpc", workers.endpoints.join(","), "--gpu-layers", "3", "--tensor-split", "1,1"];
    results.get(config)!.push(await measure(config, extra, pass));
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
  const rtt = hello.get(config);
  const same = samples.every((x, i) => x.reply === local[i]!.reply);
  console.log(
    `| ${config} | ${rtt ? `${median(rtt).toFixed(1)} ms` : "-"} | ${median(samples.map((x) => x.loadS)).toFixed(1)} s | ` +
      `${median(samples.flatMap((x) => x.prefill)).toFixed(0)} | ${median(samples.flatMap((x) => x.decode)).toFixed(1)} | ` +
      `${same ? "yes" : "no"} |`,
  );
}
