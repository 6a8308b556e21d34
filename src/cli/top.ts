// `superfluid top [--api-key KEY] <host:port>...`: a live terminal monitor.
// Polls each server's GET /metrics once a second and redraws one block per
// node (up / 401 / down, lanes, queue per class, tok/s, TTFT percentiles,
// prefix-cache hit rate, KV pool, preemptions). Plain ANSI escapes on the
// alternate screen; `q`, Esc or Ctrl-C quits with exit 0 and gives the
// terminal back as it was.
import { FlagError, parseFlags } from "./flags.ts";
import { parseExposition } from "./top-parse.ts";
import { nodeStats, QOS_CLASSES, WINDOW_MS, type NodeStats, type Scrape } from "./top-stats.ts";

const USAGE = `usage: superfluid top [--api-key KEY] HOST:PORT...

Polls each server's /metrics once a second and shows, per node: up / 401 /
down, lanes, queue per class, decode and prefill tok/s, TTFT p50/p95, the
prefix-cache hit rate, the KV pool and preemptions. q, Esc or Ctrl-C quits.

  --api-key KEY   sent as Authorization: Bearer KEY`;

const POLL_MS = 1000;
/** A scrape that takes longer than this counts as down (the server waits up to 5 s for a busy worker). */
const SCRAPE_TIMEOUT_MS = 6000;

/**
 * One monitored server: its target, its last state and its recent scrapes (shared with `serve --tui`, src/cli/tui.ts).
 */
export interface Node {
  target: string;
  url: string;
  state: "waiting" | "up" | "401" | "down" | string;
  detail?: string;
  history: Scrape[];
  inFlight: boolean;
}

/** `host:port`, `host` (port 8453) or a full `http://` URL, to the /metrics URL. */
export function metricsUrl(target: string): string {
  const explicit = /^https?:\/\//.test(target);
  const url = new URL(explicit ? target : `http://${target}`);
  // A bare host gets the server's default port; an explicit :80 stays.
  if (!explicit && !/:\d+$/.test(target)) url.port = "8453";
  url.pathname = "/metrics";
  return url.toString();
}

export function newNode(target: string): Node {
  return { target, url: metricsUrl(target), state: "waiting", history: [], inFlight: false };
}

/** What renderLines draws for a node: its stats once it has answered. */
export function nodeView(n: Node): { target: string; state: string; detail?: string; stats?: NodeStats } {
  return {
    target: n.target,
    state: n.state,
    detail: n.detail,
    stats: n.state === "up" && n.history.length ? nodeStats(n.history) : undefined,
  };
}

/** Scrapes one node's /metrics once (skipped while a scrape is in flight) and updates its state. */
export async function poll(node: Node, apiKey: string | undefined): Promise<void> {
  if (node.inFlight) return;
  node.inFlight = true;
  try {
    const res = await fetch(node.url, {
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
      signal: AbortSignal.timeout(SCRAPE_TIMEOUT_MS),
    });
    const text = await res.text();
    if (res.status === 401) {
      node.state = "401";
      node.detail = apiKey ? "the key was refused" : "needs --api-key";
    } else if (res.status !== 200) {
      node.state = `http ${res.status}`;
      node.detail = undefined;
    } else {
      node.state = "up";
      node.detail = undefined;
      const at = performance.now();
      node.history.push({ at, samples: parseExposition(text) });
      // Keep one scrape older than the window, so the window is whole.
      while (node.history.length > 2 && at - node.history[1]!.at > WINDOW_MS) node.history.shift();
    }
  } catch (err) {
    node.state = "down";
    node.detail = err instanceof Error && err.name === "TimeoutError" ? "no answer" : "no connection";
    // Rates across an outage would mix two lives of the server.
    node.history = [];
  } finally {
    node.inFlight = false;
  }
}

/** Queue classes, short enough for one line (legend in docs/cli.md#top). */
const SHORT_CLASS: Record<(typeof QOS_CLASSES)[number], string> = {
  interactive: "int",
  completion: "cmp",
  agent: "agt",
  background: "bg",
};

const rate = (n: number | undefined) => (n === undefined ? "-" : n >= 100 ? n.toFixed(0) : n.toFixed(1));
const ms = (s: number | undefined) => (s === undefined ? "-" : `${(s * 1000).toFixed(s < 0.1 ? 1 : 0)}ms`);
const pct = (f: number | undefined) => (f === undefined ? "-" : `${(f * 100).toFixed(1)}%`);

/** The screen's lines for the current state (no escapes: the caller clips and paints). */
export function renderLines(
  nodes: { target: string; state: string; detail?: string; stats?: NodeStats }[],
  clock: Date,
  title = "superfluid top",
): string[] {
  const lines = [
    `${title} · ${nodes.length} node${nodes.length === 1 ? "" : "s"} · every 1 s · ${clock.toTimeString().slice(0, 8)} · q quits`,
    "",
  ];
  for (const n of nodes) {
    const s = n.stats;
    const head = `${n.target}  ${n.state}`;
    if (n.state !== "up" || !s) {
      lines.push(n.detail ? `${head}  (${n.detail})` : head, "");
      continue;
    }
    lines.push(`${head}  host ${s.host ?? "?"}  model ${s.models.join(", ") || "-"}`);
    const lanes = `${s.lanesActive}/${s.lanesTotal ?? "?"}`;
    const queue = QOS_CLASSES.map((c) => `${SHORT_CLASS[c]} ${s.queue[c]}`).join(" ");
    lines.push(`  lanes ${lanes}   queue ${queue}`);
    lines.push(
      `  decode ${rate(s.decodeRate)} tok/s   prefill ${rate(s.prefillRate)} tok/s   ttft p50 ${ms(s.ttftP50)} p95 ${ms(s.ttftP95)}`,
    );
    const kv = s.kvTotal > 0 ? `${s.kvUsed}/${s.kvTotal} (${pct(s.kvUsed / s.kvTotal)})` : "-";
    lines.push(
      `  prefix hit ${pct(s.prefixHitRate)}   kv ${kv}   preemptions ${s.preemptions}   spec accept ${pct(s.specAcceptRate)}`,
    );
    // Only where layers went to a GPU (docs/cli.md#gpu-offload-flags): its layers and the bytes placed there.
    if (s.gpus.length > 0) {
      const mib = (n: number) => `${(n / 2 ** 20).toFixed(0)} MiB`;
      const gpus = s.gpus.map(
        (g) => `${g.device} ${g.layers} layers ${mib(g.bytes)}${g.totalBytes ? ` of ${mib(g.totalBytes)}` : ""}`,
      );
      lines.push(`  gpu ${gpus.join("   ")}`);
    }
    lines.push("");
  }
  return lines;
}

export async function runTop(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags(argv, { "api-key": { value: true }, help: { aliases: ["h"] } });
  } catch (err) {
    if (err instanceof FlagError) {
      console.error(`superfluid top: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (parsed.switches.has("help")) {
    console.log(USAGE);
    return 0;
  }
  if (parsed.positional.length === 0) {
    console.error(`superfluid top: name at least one HOST:PORT\n\n${USAGE}`);
    return 2;
  }
  const apiKey = parsed.values.get("api-key")?.[0];
  const nodes: Node[] = [];
  for (const target of parsed.positional) {
    try {
      nodes.push(newNode(target));
    } catch {
      console.error(`superfluid top: ${target} is not HOST:PORT`);
      return 2;
    }
  }

  const out = process.stdout;
  const stdin = process.stdin;
  const paint = () => {
    const width = out.columns || 80;
    const height = out.rows || 24;
    const lines = renderLines(nodes.map(nodeView), new Date()).slice(0, height);
    // Home, each line clipped and its rest erased, then erase below: no flicker from a full clear.
    out.write(`\x1b[H${lines.map((l) => `${l.slice(0, width)}\x1b[K`).join("\r\n")}\x1b[J`);
  };

  // Alternate screen, cursor hidden; raw mode so single keys arrive (and
  // Ctrl-C as a byte, handled like q).
  out.write("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J");
  const raw = stdin.isTTY === true;
  if (raw) stdin.setRawMode(true);
  stdin.resume();

  const tick = async () => {
    await Promise.all(nodes.map((n) => poll(n, apiKey)));
    paint();
  };
  paint();
  void tick();
  const timer = setInterval(() => void tick(), POLL_MS);
  const onResize = () => paint();
  out.on("resize", onResize);

  await new Promise<void>((quit) => {
    stdin.on("data", (chunk: Buffer) => {
      // q / Q, a lone Esc (an arrow key's sequence also starts with Esc, so
      // only a chunk of exactly Esc counts), Ctrl-C, Ctrl-D.
      const text = chunk.toString("latin1");
      if (text === "\x1b" || /[qQ\x03\x04]/.test(text)) quit();
    });
    stdin.on("end", () => quit());
    process.once("SIGINT", () => quit());
    process.once("SIGTERM", () => quit());
  });

  clearInterval(timer);
  out.off("resize", onResize);
  if (raw) stdin.setRawMode(false);
  stdin.pause();
  out.write("\x1b[?25h\x1b[?1049l");
  return 0;
}
