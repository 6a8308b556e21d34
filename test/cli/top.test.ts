// `superfluid top` used as a person uses it: run in a real terminal (tmux),
// against a server under a streamed load and a port nothing listens on, the
// screen read back with `tmux capture-pane`, `q` sent as a key. Plus the
// numbers behind the screen (parser, rates, TTFT quantiles) on fixed text.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import parse from "parse-prometheus-text-format";
import { parseExposition } from "../../src/cli/top-parse.ts";
import { histogramQuantile, nodeStats, pullRows, type Scrape } from "../../src/cli/top-stats.ts";
import { metricsUrl, newNode, nodeView, poll, renderLines } from "../../src/cli/top.ts";
import { post, useServer } from "../http/support.ts";
import { freePort } from "../scenarios/support.ts";

const TMUX = Bun.which("tmux");
const MAIN = resolve(import.meta.dir, "../../src/main.ts");

describe("the exposition and the numbers", () => {
  const text = [
    "# HELP superfluid_decode_tokens_total Tokens decoded.",
    "# TYPE superfluid_decode_tokens_total counter",
    'superfluid_decode_tokens_total{model="a"} 100',
    'superfluid_decode_tokens_total{model="b \\"q\\" \\\\ x"} 50',
    "# TYPE superfluid_ttft_seconds histogram",
    'superfluid_ttft_seconds_bucket{le="0.1",model="a"} 1',
    'superfluid_ttft_seconds_bucket{le="1",model="a"} 3',
    'superfluid_ttft_seconds_bucket{le="+Inf",model="a"} 4',
    'superfluid_ttft_seconds_sum{model="a"} 9',
    'superfluid_ttft_seconds_count{model="a"} 4',
    "superfluid_plain 2.5e3 1700000000000",
    "",
  ].join("\n");

  test("the parser reads what a real Prometheus parser reads", () => {
    const ours = parseExposition(text);
    expect(ours.find((s) => s.name === "superfluid_decode_tokens_total" && s.labels.model !== "a")!.labels.model).toBe(
      'b "q" \\ x',
    );
    expect(ours.find((s) => s.name === "superfluid_plain")!.value).toBe(2500);
    // Every sample the library reads, with the same labels and value.
    const theirs = parse(text).flatMap((f) =>
      f.type === "HISTOGRAM"
        ? f.metrics.flatMap((m: any) =>
            Object.entries(m.buckets).map(([le, v]) => ({
              name: `${f.name}_bucket`,
              labels: { ...m.labels, le },
              value: Number(v),
            })),
          )
        : f.metrics.map((m: any) => ({ name: f.name, labels: m.labels ?? {}, value: Number(m.value) })),
    );
    // (The library leaves the histogram's other labels off its buckets: ours must hold at least its labels.)
    for (const t of theirs) {
      const same = ours.find(
        (o) =>
          o.name === t.name && o.value === t.value && Object.entries(t.labels).every(([k, v]) => o.labels[k] === v),
      );
      expect(same, JSON.stringify(t)).toBeDefined();
    }
    expect(theirs.length).toBeGreaterThanOrEqual(6);
  });

  test("rates come from counter deltas, a reset counts its new value, TTFT from bucket deltas", () => {
    const at = (ms: number, decode: number, buckets: [number, number, number]): Scrape => ({
      at: ms,
      samples: parseExposition(
        [
          `superfluid_decode_tokens_total{model="a"} ${decode}`,
          `superfluid_ttft_seconds_bucket{le="0.1",model="a"} ${buckets[0]}`,
          `superfluid_ttft_seconds_bucket{le="1",model="a"} ${buckets[1]}`,
          `superfluid_ttft_seconds_bucket{le="+Inf",model="a"} ${buckets[2]}`,
        ].join("\n"),
      ),
    });
    const a = at(0, 100, [10, 10, 10]);
    const b = at(2000, 300, [10, 20, 20]);
    expect(nodeStats([a, b]).decodeRate).toBe(100);
    // The 10 observations of the window all lie in (0.1, 1]: the median halfway.
    expect(histogramQuantile(a, b, "superfluid_ttft_seconds", 0.5)).toBeCloseTo(0.55, 5);
    expect(histogramQuantile(a, a, "superfluid_ttft_seconds", 0.5)).toBeUndefined();
    // The model was reloaded: its counter started over at 40.
    expect(nodeStats([b, at(3000, 40, [0, 0, 0])]).decodeRate).toBe(40);
  });

  test("spec accept: accepted / proposed drafts over the window, else since the start; - when none were proposed", () => {
    const at = (ms: number, proposed: number, accepted: number): Scrape => ({
      at: ms,
      samples: parseExposition(
        [
          `superfluid_spec_proposed_total{model="a"} ${proposed}`,
          `superfluid_spec_accepted_total{model="a"} ${accepted}`,
        ].join("\n"),
      ),
    });
    expect(nodeStats([at(0, 0, 0)]).specAcceptRate).toBeUndefined();
    expect(nodeStats([at(0, 0, 0), at(1000, 0, 0)]).specAcceptRate).toBeUndefined();
    expect(nodeStats([at(0, 40, 10)]).specAcceptRate).toBe(0.25);
    // In the window: 60 more proposed, 45 of them accepted.
    expect(nodeStats([at(0, 40, 10), at(1000, 100, 55)]).specAcceptRate).toBe(0.75);
    // Nothing proposed in the window: the record since the start.
    expect(nodeStats([at(0, 100, 55), at(1000, 100, 55)]).specAcceptRate).toBe(0.55);
    const line = (rate: number | undefined) =>
      renderLines(
        [{ target: "h:1", state: "up", stats: { ...nodeStats([at(0, 0, 0)]), specAcceptRate: rate } }],
        new Date(0),
      ).find((l) => l.includes("prefix hit"));
    expect(line(undefined)).toEndWith("spec accept -");
    expect(line(0.8125)).toEndWith("spec accept 81.3%");
  });

  test("a node with layers on a GPU gets a gpu line: layers, bytes placed, the device's memory", () => {
    const sample = (name: string, labels: Record<string, string>, value: number) => ({ name, labels, value });
    const scrape: Scrape = {
      at: 0,
      samples: [
        sample("superfluid_device_layers", { model: "m", device: "Vulkan0" }, 12),
        sample("superfluid_device_model_bytes", { model: "m", device: "Vulkan0", kind: "weights" }, 300 * 2 ** 20),
        sample("superfluid_device_model_bytes", { model: "m", device: "Vulkan0", kind: "kv" }, 20 * 2 ** 20),
        sample(
          "superfluid_device_memory_bytes",
          { model: "m", device: "Vulkan0", type: "gpu", kind: "total" },
          2 ** 33,
        ),
        sample("superfluid_device_memory_bytes", { model: "m", device: "CPU", type: "cpu", kind: "total" }, 2 ** 34),
      ],
    };
    const stats = nodeStats([scrape]);
    expect(stats.gpus).toEqual([{ device: "Vulkan0", layers: 12, bytes: 320 * 2 ** 20, totalBytes: 2 ** 33 }]);
    const lines = renderLines([{ target: "h:1", state: "up", stats }], new Date(0));
    expect(lines).toContain("  gpu Vulkan0 12 layers 320 MiB of 8192 MiB");
    // All on the CPU: no gpu line.
    const cpu = renderLines([{ target: "h:1", state: "up", stats: nodeStats([{ at: 0, samples: [] }]) }], new Date(0));
    expect(cpu.some((l) => l.startsWith("  gpu"))).toBe(false);
  });

  test("a target is host:port, a bare host gets the default port", () => {
    expect(metricsUrl("127.0.0.1:9000")).toBe("http://127.0.0.1:9000/metrics");
    expect(metricsUrl("box")).toBe("http://box:8453/metrics");
    expect(metricsUrl("https://box:443/x")).toBe("https://box/metrics");
  });
});

describe("a node that is starting: the files it pulls from /health", () => {
  const file = (done: number) => ({
    model: "org/m-GGUF:Q4_K_M",
    file: "m-Q4_K_M.gguf",
    state: "downloading",
    done,
    total: 8 * 2 ** 20,
  });

  test("rate and time left from the bytes gained between /health answers; the line shows done, total and both", () => {
    expect(pullRows([{ at: 0, files: [file(0)] }])).toEqual([file(0)]);
    const rows = pullRows([
      { at: 0, files: [file(0)] },
      { at: 1000, files: [file(2 ** 20)] },
      { at: 2000, files: [file(2 * 2 ** 20)] },
    ]);
    // 2 MiB over the 2 s since the oldest answer in the window: 1 MiB/s, 6 MiB left.
    expect(rows).toEqual([{ ...file(2 * 2 ** 20), rate: 2 ** 20, eta: 6 }]);
    const lines = renderLines([{ target: "h:1", state: "loading", pulls: rows }], new Date(0));
    expect(lines).toContain("h:1  loading  (starting: pulling 1 file)");
    expect(lines).toContain(
      "  pull org/m-GGUF:Q4_K_M  m-Q4_K_M.gguf  downloading  2 MiB / 8 MiB (25.0%)   1 MiB/s   6 s left",
    );
    // Loading with nothing to pull (the model loading from disk): the state alone.
    expect(renderLines([{ target: "h:1", state: "loading" }], new Date(0))).toContain("h:1  loading  (starting)");
  });

  test("poll asks /health while the node starts, then /metrics once it is up", async () => {
    let done = 0;
    let starting = true;
    const asked: string[] = [];
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch(req) {
        const path = new URL(req.url).pathname;
        asked.push(path);
        if (path === "/health")
          return starting
            ? Response.json(
                { status: "loading", models_loaded: 0, models_known: 1, pulling: [file(done)] },
                { status: 503 },
              )
            : Response.json({ status: "ok", models_loaded: 1, models_known: 1 });
        return new Response('superfluid_lanes_active{model="m"} 1\n');
      },
    });
    try {
      const node = newNode(`127.0.0.1:${server.port}`);
      await poll(node, undefined);
      done = 4 * 2 ** 20;
      await poll(node, undefined);
      const view = nodeView(node);
      expect(view.state).toBe("loading");
      expect(view.pulls).toHaveLength(1);
      expect(view.pulls![0]).toMatchObject(file(4 * 2 ** 20));
      expect(view.pulls![0]!.rate).toBeGreaterThan(0);
      expect(asked).toEqual(["/health", "/health"]);
      starting = false;
      await poll(node, undefined);
      expect(node.state).toBe("up");
      expect(nodeView(node).pulls).toBeUndefined();
      expect(nodeView(node).stats?.lanesActive).toBe(1);
      // Up: only /metrics from here on.
      await poll(node, undefined);
      expect(asked.slice(2)).toEqual(["/health", "/metrics", "/metrics"]);
    } finally {
      server.stop(true);
    }
  });
});

describe.skipIf(!TMUX)("superfluid top in a terminal (tmux)", () => {
  const s = useServer({ fixture: "tiny-chat", maxBatch: 4 });
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "superfluid-top-test-"));
  });
  // A tmux server of our own, so the test never touches a person's sessions.
  const socket = `superfluid-top-${process.pid}`;
  const tmux = (...args: string[]) => Bun.spawnSync([TMUX!, "-L", socket, ...args], { stdout: "pipe", stderr: "pipe" });
  // The Esc test's own tmux server: the first test's server exits with its last session, and a
  // new session started on that socket while it exits can fail.
  const escSocket = `${socket}-esc`;
  const tmuxEsc = (...args: string[]) =>
    Bun.spawnSync([TMUX!, "-L", escSocket, ...args], { stdout: "pipe", stderr: "pipe" });
  const pane = () => tmux("capture-pane", "-p", "-t", "top").stdout.toString();

  afterAll(() => {
    tmux("kill-server");
    tmuxEsc("kill-server");
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Polls the pane until `ready` holds; the deadline only guards a hang. */
  async function waitForPane(ready: (screen: string) => boolean, what: string): Promise<string> {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const screen = pane();
      if (ready(screen)) return screen;
      if (Date.now() > deadline) throw new Error(`the pane never showed ${what}:\n${screen}`);
      await Bun.sleep(200);
    }
  }

  test("shows a node under load with busy lanes and tok/s, a dead port as down; q exits 0", async () => {
    const dead = await freePort();
    const rcFile = join(dir, "rc");
    const command = `'${process.execPath}' '${MAIN}' top 127.0.0.1:${s.port} 127.0.0.1:${dead}; echo $? > '${rcFile}'`;
    const started = tmux("new-session", "-d", "-s", "top", "-x", "100", "-y", "30", "sh", "-c", command);
    expect(started.exitCode).toBe(0);

    // A streamed load that keeps going: each stream, once done, is followed by another.
    const stop = new AbortController();
    const stream = async () => {
      while (!stop.signal.aborted) {
        try {
          const res = await post(
            s,
            "/v1/chat/completions",
            {
              model: s.model,
              messages: [{ role: "user", content: "Count." }],
              stream: true,
              ignore_eos: true,
              max_tokens: 1500,
            },
            { signal: stop.signal },
          );
          await res.text();
        } catch {
          // Aborted at the end of the test.
        }
      }
    };
    const load = [stream(), stream(), stream()];
    try {
      const up = new RegExp(`127\\.0\\.0\\.1:${s.port}  up`);
      const screen = await waitForPane((p) => {
        const decode = /decode ([\d.]+) tok\/s/.exec(p);
        return (
          up.test(p) &&
          /lanes [1-9]\d*\//.test(p) &&
          decode !== null &&
          Number(decode[1]) > 0 &&
          p.includes(`127.0.0.1:${dead}  down`)
        );
      }, "the node up with busy lanes and decode tok/s, and the dead port down");
      expect(screen).toContain("superfluid top · 2 nodes");
      expect(screen).toMatch(/queue int \d+ cmp \d+ agt \d+ bg \d+/);
      expect(screen).toMatch(/kv \d+\/\d+/);
      if (process.env.SUPERFLUID_TOP_SCREEN) await Bun.write(process.env.SUPERFLUID_TOP_SCREEN, screen);
    } finally {
      stop.abort();
      await Promise.all(load);
    }

    tmux("send-keys", "-t", "top", "q");
    const deadline = Date.now() + 30_000;
    while (!existsSync(rcFile) || readFileSync(rcFile, "utf8").trim() === "") {
      if (Date.now() > deadline) throw new Error(`top did not exit after q:\n${pane()}`);
      await Bun.sleep(100);
    }
    expect(readFileSync(rcFile, "utf8").trim()).toBe("0");
  }, 300_000);

  test("Esc quits too, and the terminal is as it was: main screen back, raw mode off", async () => {
    const dead = await freePort();
    // After top: the exit status and the line discipline's canonical-mode flag, then stay open to be read.
    const command = `'${process.execPath}' '${MAIN}' top 127.0.0.1:${dead}; echo "rc=$?"; stty -a | grep -o -- '-*icanon'; sleep 120`;
    expect(tmuxEsc("new-session", "-d", "-s", "esc", "-x", "100", "-y", "30", "sh", "-c", command).exitCode).toBe(0);
    const escPane = () => tmuxEsc("capture-pane", "-p", "-t", "esc").stdout.toString();
    const deadline = Date.now() + 60_000;
    while (!escPane().includes(`127.0.0.1:${dead}  down`)) {
      if (Date.now() > deadline) throw new Error(`top never showed the dead port:\n${escPane()}`);
      await Bun.sleep(200);
    }
    tmuxEsc("send-keys", "-t", "esc", "Escape");
    while (!/icanon/.test(escPane())) {
      if (Date.now() > deadline) throw new Error(`top did not exit after Esc:\n${escPane()}`);
      await Bun.sleep(100);
    }
    const after = escPane();
    expect(after).toContain("rc=0");
    expect(after).not.toContain("superfluid top");
    expect(after).not.toContain("-icanon");
    tmuxEsc("kill-session", "-t", "esc");
  }, 120_000);
});
