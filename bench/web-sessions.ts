// Session API benchmark (issue #20, docs/api/sessions.md): what a session by id
// costs against a plain HTTP request, and how warm a conversation is after a
// restart, with and without --park, against llama-server's own slot files.
//
//   bun bench/web-sessions.ts [--model PATH] [--tokens 64] [--rounds 7]
//                             [--prompt-tokens 1500] [--cycles 3] [--threads 2]
//                             [--llama-server PATH] [--no-overhead] [--no-restart]
//
// Overhead: one server with --web; each round streams the same greedy reply of
// --tokens tokens once over /v1/chat/completions and once as a session's
// Generate over /web/ws (a new session each round, one user message), in
// alternating order; decode rate from the first token to the last, medians
// and the per-round ratio.
// Restart: a session's first turn (~--prompt-tokens) is generated, the server
// is SIGKILLed and started again on the same sessions directory, and the
// second turn's first token is timed: without --park (re-prefilled), with
// --park (restored from <sessions>/park). llama-server does the same with
// --slot-save-path: save slot 0 after the first turn, restart, restore the slot,
// then the second turn (the restore's time included). Without --model it
// generates the large-vocabulary fixture into the cache.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureFixture } from "../src/fixtures/index.ts";
import { COMMON_WORDS } from "../src/fixtures/words.ts";
import { sseEvents } from "./sse.ts";
import { flag } from "./support.ts";

const model = flag("model") ?? (await ensureFixture("large-vocab"));
const tokens = Number(flag("tokens", "64"));
const rounds = Number(flag("rounds", "7"));
const promptTokens = Number(flag("prompt-tokens", "1500"));
const cycles = Number(flag("cycles", "3"));
const threads = flag("threads", "2")!;
const llamaServer = flag("llama-server", join(import.meta.dir, "../../shared/anchors/llama.cpp/llama-server"))!;
const GREEDY = { temperature: 0, top_p: 1, min_p: 0, top_k: 0, seed: 0 };

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const range = (xs: number[]) => `${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}`;

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function words(seed: number, count: number): string {
  let x = seed >>> 0;
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.push(COMMON_WORDS[x % COMMON_WORDS.length]!);
  }
  return out.join(" ");
}

interface Superfluid {
  proc: ReturnType<typeof Bun.spawn>;
  url: string;
  web: string;
  token: string;
  sessions: string;
}

async function waitHealthy(url: string, path = "/health"): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (
      await fetch(`${url}${path}`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return;
    await Bun.sleep(50);
  }
  throw new Error(`${url} never became healthy`);
}

async function startSuperfluid(sessions: string, extra: string[] = []): Promise<Superfluid> {
  const [port, webPort] = [await freePort(), await freePort()];
  const proc = Bun.spawn(
    [
      process.execPath,
      join(import.meta.dir, "../src/main.ts"),
      "serve",
      model,
      "--port",
      String(port),
      "--threads",
      threads,
      "--web",
      `127.0.0.1:${webPort}`,
      "--sessions",
      sessions,
      "--no-tui",
      ...extra,
    ],
    { stdout: "ignore", stderr: "ignore", env: { ...process.env, SUPERFLUID_QUIET: "1" } },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(url);
  const token = (await Bun.file(join(sessions, "web-token")).text()).trim();
  return { proc, url, web: `http://127.0.0.1:${webPort}`, token, sessions };
}

async function stop(proc: ReturnType<typeof Bun.spawn>): Promise<void> {
  proc.kill("SIGKILL");
  await proc.exited;
}

async function rpc(s: Superfluid, request: unknown): Promise<any> {
  const res = await fetch(`${s.web}/web/rpc`, {
    method: "POST",
    headers: { authorization: `Bearer ${s.token}`, "x-superfluid-csrf": s.token, "content-type": "application/json" },
    body: JSON.stringify(request),
  });
  return res.json();
}

/** A Generate over /web/ws: when its first token arrived, the decode rate after it, the summary's counts. */
async function wsGenerate(
  s: Superfluid,
  session: number,
  maxTokens: number,
): Promise<{ firstAt: number; rate: number; warm: number; count: number }> {
  const ws = new WebSocket(`${s.web.replace("http", "ws")}/web/ws`, {
    headers: { origin: s.web },
    protocols: ["superfluid.v1", `superfluid.token.${s.token}`],
  } as any);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  let first = NaN;
  let firstTokens = 0;
  const summary = await new Promise<any>((resolve) => {
    ws.onmessage = (m) => {
      const f = JSON.parse(String(m.data));
      if (f.Delta?.event.body.Generated?.span.length && Number.isNaN(first)) {
        first = performance.now();
        firstTokens = f.Delta.event.body.Generated.span.length;
      }
      if (f.Generated || f.Err) resolve(f);
    };
    ws.send(JSON.stringify({ Generate: { session, max_tokens: maxTokens } }));
  });
  const end = performance.now();
  ws.close();
  if (!summary.Generated) throw new Error(JSON.stringify(summary));
  const g = summary.Generated;
  return {
    firstAt: first,
    rate: ((g.tokens_generated - firstTokens) * 1000) / (end - first),
    warm: g.warm_prefix,
    count: g.tokens_generated,
  };
}

/** A streamed chat completion: decode rate from its first token to its last. */
async function httpGenerate(url: string, content: string, maxTokens: number): Promise<number> {
  const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: models.data[0]!.id,
      messages: [{ role: "user", content }],
      max_tokens: maxTokens,
      temperature: 0,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  let first = NaN;
  let last = NaN;
  let chunks = 0;
  let completion = 0;
  for await (const e of sseEvents(res.body!)) {
    if (!e.data || e.data === "[DONE]") continue;
    const j = JSON.parse(e.data);
    if (j.choices?.[0]?.delta?.content) {
      if (Number.isNaN(first)) first = performance.now();
      else chunks++;
      last = performance.now();
    }
    if (j.usage) completion = j.usage.completion_tokens;
  }
  return ((completion - 1) * 1000) / (last - first) || (chunks * 1000) / (last - first);
}

async function overhead(): Promise<void> {
  const sessions = mkdtempSync(join(tmpdir(), "superfluid-bench-web-"));
  const s = await startSuperfluid(sessions);
  const http: number[] = [];
  const api: number[] = [];
  const ratios: number[] = [];
  try {
    await httpGenerate(s.url, "warm up", 8);
    for (let r = 0; r < rounds; r++) {
      const content = words(1000 + r, 40);
      const viaApi = async () => {
        const session = (await rpc(s, { Create: { parent: null, params: GREEDY } })).Created.session;
        await rpc(s, { AppendMessage: { session, role: 1, text: content } });
        const g = await wsGenerate(s, session, tokens);
        if (g.count < tokens)
          throw new Error(
            `the session's reply ended after ${g.count} tokens; use a model that does not end its turn early`,
          );
        return g.rate;
      };
      let a: number;
      let h: number;
      if (r % 2 === 0) {
        a = await viaApi();
        h = await httpGenerate(s.url, `${content} `, tokens);
      } else {
        h = await httpGenerate(s.url, `${content} `, tokens);
        a = await viaApi();
      }
      api.push(a);
      http.push(h);
      ratios.push(a / h);
    }
  } finally {
    await stop(s.proc);
    rmSync(sessions, { recursive: true, force: true });
  }
  console.log(`\ndecode rate, ${tokens} tokens, ${rounds} alternating rounds (tok/s after the first token)`);
  console.log(`| path | median | range |\n|---|---:|---|`);
  console.log(`| session Generate over /web/ws | ${median(api).toFixed(1)} | ${range(api)} |`);
  console.log(`| /v1/chat/completions stream | ${median(http).toFixed(1)} | ${range(http)} |`);
  console.log(`session / http per round: median ${median(ratios).toFixed(3)} (${range(ratios)})`);
}

/** llama-server: turn 1 on slot 0, save the slot, restart, restore it, time turn 2 to its first token. */
async function llamaRestartCycle(
  prompt1: string,
  prompt2: string,
): Promise<{ ms: number; restoreMs: number; cached: number }> {
  const slots = mkdtempSync(join(tmpdir(), "superfluid-bench-slots-"));
  const port = await freePort();
  const start = () =>
    Bun.spawn(
      [
        llamaServer,
        "-m",
        model,
        "--port",
        String(port),
        "-t",
        threads,
        "-np",
        "1",
        "--slot-save-path",
        `${slots}/`,
        "-c",
        "8192",
      ],
      {
        stdout: "ignore",
        stderr: "ignore",
        env: { ...process.env, LD_LIBRARY_PATH: join(llamaServer, "..") },
      },
    );
  const url = `http://127.0.0.1:${port}`;
  const completion = (prompt: string) =>
    fetch(`${url}/completion`, {
      method: "POST",
      body: JSON.stringify({ prompt, n_predict: 16, temperature: 0, cache_prompt: true, id_slot: 0, stream: true }),
    });
  let proc = start();
  try {
    await waitHealthy(url);
    await (await completion(prompt1)).text();
    await (
      await fetch(`${url}/slots/0?action=save`, { method: "POST", body: JSON.stringify({ filename: "conv.bin" }) })
    ).text();
    await stop(proc);
    proc = start();
    await waitHealthy(url);
    const t0 = performance.now();
    await (
      await fetch(`${url}/slots/0?action=restore`, { method: "POST", body: JSON.stringify({ filename: "conv.bin" }) })
    ).text();
    const restoreMs = performance.now() - t0;
    const res = await completion(prompt2);
    let ms = NaN;
    let cached = 0;
    for await (const e of sseEvents(res.body!)) {
      if (!e.data) continue;
      const j = JSON.parse(e.data);
      if (Number.isNaN(ms) && j.content) ms = performance.now() - t0;
      if (j.timings?.cache_n !== undefined) cached = j.timings.cache_n;
      if (j.stop) break;
    }
    return { ms, restoreMs, cached };
  } finally {
    await stop(proc);
    rmSync(slots, { recursive: true, force: true });
  }
}

async function restartCycle(park: boolean, text1: string): Promise<{ ms: number; warm: number }> {
  const sessions = mkdtempSync(join(tmpdir(), "superfluid-bench-park-"));
  const extra = park ? ["--park"] : [];
  let s = await startSuperfluid(sessions, extra);
  try {
    const session = (await rpc(s, { Create: { parent: null, params: GREEDY } })).Created.session;
    await rpc(s, { AppendMessage: { session, role: 1, text: text1 } });
    await wsGenerate(s, session, 16);
    await stop(s.proc);
    s = await startSuperfluid(sessions, extra);
    const t0 = performance.now();
    await rpc(s, { AppendMessage: { session, role: 1, text: "and then?" } });
    const g = await wsGenerate(s, session, 16);
    return { ms: g.firstAt - t0, warm: g.warm };
  } finally {
    await stop(s.proc);
    rmSync(sessions, { recursive: true, force: true });
  }
}

async function restarts(): Promise<void> {
  const text = words(7, Math.round(promptTokens / 1.3));
  const cold: number[] = [];
  const parked: number[] = [];
  const llama: number[] = [];
  const rows: string[] = [];
  for (let c = 0; c < cycles; c++) {
    const a = await restartCycle(false, `${text} ${c}`);
    const b = await restartCycle(true, `${text} ${c}`);
    const l = await llamaRestartCycle(`${text} ${c}`, `${text} ${c} and then?`);
    cold.push(a.ms);
    parked.push(b.ms);
    llama.push(l.ms);
    rows.push(
      `cycle ${c}: no park ${a.ms.toFixed(1)} ms (warm ${a.warm}), --park ${b.ms.toFixed(1)} ms (warm ${b.warm}), llama-server slot restore ${l.ms.toFixed(1)} ms (restore ${l.restoreMs.toFixed(1)} ms, cached ${l.cached})`,
    );
  }
  console.log(`\nsecond turn's first token after a restart, ~${promptTokens}-token first turn, ${cycles} cycles`);
  rows.forEach((r) => console.log(r));
  console.log(
    `median: no park ${median(cold).toFixed(1)} ms, --park ${median(parked).toFixed(1)} ms, llama-server ${median(llama).toFixed(1)} ms; --park / llama-server ${(median(parked) / median(llama)).toFixed(2)}`,
  );
}

if (!process.argv.includes("--no-overhead")) await overhead();
if (!process.argv.includes("--no-restart")) await restarts();
