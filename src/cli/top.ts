// `superfluid top [--api-key KEY] <host:port>...`: a live terminal monitor.
// Polls each server's GET /metrics once a second and redraws one block per
// node (up / 401 / down, lanes, queue per class, tok/s, TTFT percentiles,
// prefix-cache hit rate, KV pool, preemptions). A node not seen up yet is
// asked GET /health first: while it starts (503 `loading`; /metrics waits for
// the start) its block shows the files it is pulling from the Hub, bytes
// done and total, rate and time left. Plain ANSI escapes on the alternate
// screen; `q`, Esc or Ctrl-C quits with exit 0 and gives the terminal back as
// it was.
import { formatBytes } from "../runtime/byte-size.ts";
import { FlagError, parseFlags } from "./flags.ts";
import { parseExposition } from "./top-parse.ts";
import {
  nodeStats,
  type PullFile,
  type PullRow,
  pullRows,
  type PullScrape,
  QOS_CLASSES,
  WINDOW_MS,
  type NodeStats,
  type Scrape,
} from "./top-stats.ts";

const USAGE = `usage: superfluid top [--api-key KEY] HOST:PORT...

Polls each server's /metrics once a second and shows, per node: up / 401 /
down, lanes, queue per class, decode and prefill tok/s, TTFT p50/p95, the
prefix-cache hit rate, the KV pool and preemptions; while a server starts
(loading), each file it pulls from the Hub with bytes, rate and time left.
q, Esc or Ctrl-C quits.

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
  /** Its GET /health, asked while the node has not been seen up. */
  healthUrl: string;
  state: "waiting" | "loading" | "up" | "401" | "down" | string;
  detail?: string;
  history: Scrape[];
  /** While loading: the recent /health answers' pulls, oldest first. */
  pulls: PullScrape[];
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
  const url = metricsUrl(target);
  const healthUrl = new URL(url);
  healthUrl.pathname = "/health";
  return { target, url, healthUrl: healthUrl.toString(), state: "waiting", history: [], pulls: [], inFlight: false };
}

/** What renderLines draws for a node. */
export interface NodeView {
  target: string;
  state: string;
  detail?: string;
  /** Once it is up. */
  stats?: NodeStats;
  /** While it is loading: the files it is pulling. */
  pulls?: PullRow[];
}

/** What renderLines draws for a node: its stats once it has answered, its pulls while it starts. */
export function nodeView(n: Node): NodeView {
  return {
    target: n.target,
    state: n.state,
    detail: n.detail,
    stats: n.state === "up" && n.history.length ? nodeStats(n.history) : undefined,
    ...(n.state === "loading" && n.pulls.length ? { pulls: pullRows(n.pulls) } : {}),
  };
}

/**
 * The node's GET /health when it answers 503 `loading` (the server is starting, its /metrics held until it is
 * done): the files it is pulling. Anything else (up, degraded, an older server): undefined, /metrics is asked.
 */
async function loadingPulls(node: Node, apiKey: string | undefined): Promise<PullFile[] | undefined> {
  const res = await fetch(node.healthUrl, {
    headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
    signal: AbortSignal.timeout(SCRAPE_TIMEOUT_MS),
  });
  const body = (await res.json().catch(() => undefined)) as { status?: unknown; pulling?: unknown } | undefined;
  if (res.status !== 503 || body?.status !== "loading") return undefined;
  const files = Array.isArray(body.pulling) ? (body.pulling as Partial<PullFile>[]) : [];
  return files
    .filter((f) => typeof f?.file === "string" && typeof f.done === "number" && typeof f.total === "number")
    .map((f) => ({
      model: String(f.model ?? ""),
      file: f.file!,
      state: String(f.state ?? ""),
      done: f.done!,
      total: f.total!,
    }));
}

/** Scrapes one node's /metrics once (skipped while a scrape is in flight) and updates its state. */
export async function poll(node: Node, apiKey: string | undefined): Promise<void> {
  if (node.inFlight) return;
  node.inFlight = true;
  try {
    if (node.state !== "up") {
      const pulls = await loadingPulls(node, apiKey);
      if (pulls) {
        node.state = "loading";
        node.detail = undefined;
        const at = performance.now();
        node.pulls.push({ at, files: pulls });
        while (node.pulls.length > 2 && at - node.pulls[1]!.at > WINDOW_MS) node.pulls.shift();
        return;
      }
    }
    node.pulls = [];
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
    node.pulls = [];
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

/** Time left, as a person reads it: `42 s`, `7 min`, `2 h 05 min`. */
function duration(seconds: number): string {
  if (seconds < 100) return `${Math.ceil(seconds)} s`;
  const minutes = Math.ceil(seconds / 60);
  if (minutes < 100) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`;
}

/** One file being pulled: reference, file, state, bytes done of total, rate and time left once known. */
export function pullLine(p: PullRow): string {
  const share = p.total > 0 ? ` (${pct(p.done / p.total)})` : "";
  const speed = p.rate === undefined ? "" : `   ${formatBytes(Math.round(p.rate))}/s`;
  const left = p.eta === undefined ? "" : `   ${duration(p.eta)} left`;
  return `  pull ${p.model}  ${p.file}  ${p.state}  ${formatBytes(p.done)} / ${formatBytes(p.total)}${share}${speed}${left}`;
}

/** The screen's lines for the current state (no escapes: the caller clips and paints). */
export function renderLines(nodes: NodeView[], clock: Date, title = "superfluid top"): string[] {
  const lines = [
    `${title} · ${nodes.length} node${nodes.length === 1 ? "" : "s"} · every 1 s · ${clock.toTimeString().slice(0, 8)} · q quits`,
    "",
  ];
  for (const n of nodes) {
    const s = n.stats;
    const head = `${n.target}  ${n.state}`;
    if (n.state === "loading") {
      const pulls = n.pulls ?? [];
      const what =
        pulls.length === 0 ? "starting" : `starting: pulling ${pulls.length} file${pulls.length === 1 ? "" : "s"}`;
      lines.push(`${head}  (${what})`, ...pulls.map(pullLine), "");
      continue;
    }
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
