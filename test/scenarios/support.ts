// Helpers the scenario tests share (issue #6): deterministic prose sized in
// tokens, a request's exact prompt tokens, an SSE reader that can act after
// N token chunks, a server started as its own process, process checks, and a
// reader for the session store's write-ahead log.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { QOS } from "../../src/engine/scheduler.ts";
import { chatJobOf } from "../../src/http/openai/chat-request.ts";
import { renderChatPrompt } from "../../src/pipeline/chat-job.ts";
import { COMMON_WORDS } from "../../src/fixtures/words.ts";
import { mulberry32 } from "../../src/fixtures/prng.ts";
import { parseSse, type SseRead, type TestServer } from "../http/support.ts";
import { startServer, type RunningServer } from "../../src/cli/serve.ts";
import { parseServeOptions, type ServeOptions } from "../../src/cli/serve-options.ts";
import type { FixtureKind } from "../../src/fixtures/index.ts";
import { realVocabModel } from "../../src/fixtures/real-vocab.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { fixturePath } from "../support/models.ts";

export const ROOT = `${import.meta.dir}/../..`;

export type Message = { role: "system" | "user" | "assistant"; content: string };

/** Deterministic prose of `words` vocabulary words; different seeds differ from the first word on. */
export function prose(seed: number, words: number): string {
  const next = mulberry32(seed * 7919 + 17); // uint32s
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(COMMON_WORDS[next() % COMMON_WORDS.length]!);
  return out.join(" ");
}

export async function tokenize(url: string, text: string): Promise<number[]> {
  const res = await fetch(`${url}/v1/tokenize`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ content: text }),
  });
  if (res.status !== 200) throw new Error(`/v1/tokenize answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { tokens: number[] }).tokens;
}

/** Prose (from `seed`) of `target` tokens or a few more, measured through /v1/tokenize. */
export async function proseOfTokens(url: string, seed: number, target: number): Promise<string> {
  let lo = 1;
  let hi = target * 2;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((await tokenize(url, prose(seed, mid))).length >= target) hi = mid;
    else lo = mid + 1;
  }
  return prose(seed, lo);
}

/** The exact prompt tokens the in-process server builds for these messages. */
export async function promptTokensOf(s: TestServer, messages: Message[]): Promise<number[]> {
  const model = s.server.registry.default!;
  return (await renderChatPrompt(model, chatJobOf(model, { model: s.model, messages } as never, QOS.interactive)))
    .tokens;
}

export { commonPrefix } from "../../src/engine/token-prefix.ts";

export async function postChat(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: any }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  try {
    return { status: res.status, headers: res.headers, json: JSON.parse(text) };
  } catch {
    throw new Error(`chat answered ${res.status} with a body that is not JSON: ${text.slice(0, 300)}`);
  }
}

export interface StreamResult {
  status: number;
  headers: Headers;
  sse: SseRead;
  /** Concatenated delta.content and delta.reasoning_content. */
  content: string;
  reasoning: string;
  /** Chunks that carried text (content or reasoning). */
  textChunks: number;
  /** Milliseconds from sending the request to the first chunk with text. */
  firstTokenMs?: number;
  /** The body of a non-200 answer. */
  error?: string;
}

const textOf = (e: any) => ({
  content: e?.choices?.[0]?.delta?.content ?? "",
  reasoning: e?.choices?.[0]?.delta?.reasoning_content ?? "",
});

/**
 * Streams a chat request to its end. With `after`, `after.action` runs once
 * `after.chunks` chunks with text have arrived (reading then goes on to the end).
 */
export async function streamChat(
  url: string,
  body: Record<string, unknown>,
  after?: { chunks: number; action: () => void | Promise<void> },
  headers: Record<string, string> = {},
): Promise<StreamResult> {
  const started = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ ...body, stream: true }),
  });
  if (res.status !== 200) {
    return {
      status: res.status,
      headers: res.headers,
      sse: parseSse(""),
      content: "",
      reasoning: "",
      textChunks: 0,
      error: await res.text(),
    };
  }
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let raw = "";
  let parsedUpTo = 0;
  let textChunks = 0;
  let firstTokenMs: number | undefined;
  let acted = false;
  for (;;) {
    let step: Awaited<ReturnType<typeof reader.read>>;
    try {
      step = await reader.read();
    } catch {
      break; // the connection dropped (the server died): what arrived is kept
    }
    if (step.done) break;
    raw += decoder.decode(step.value, { stream: true });
    const end = raw.lastIndexOf("\n\n");
    if (end + 2 > parsedUpTo) {
      for (const e of parseSse(raw.slice(parsedUpTo, end + 2)).events) {
        const t = textOf(e);
        if (t.content || t.reasoning) {
          textChunks++;
          firstTokenMs ??= performance.now() - started;
        }
      }
      parsedUpTo = end + 2;
    }
    if (after && !acted && textChunks >= after.chunks) {
      acted = true;
      await after.action();
    }
  }
  // A stream cut off by a dead server may end inside a frame: keep the whole frames.
  const complete = raw.slice(0, raw.lastIndexOf("\n\n") + 2);
  const sse = parseSse(complete);
  let content = "";
  let reasoning = "";
  for (const e of sse.events) {
    const t = textOf(e);
    content += t.content;
    reasoning += t.reasoning;
  }
  return {
    status: res.status,
    headers: res.headers,
    sse,
    content,
    reasoning,
    textChunks,
    ...(firstTokenMs !== undefined ? { firstTokenMs } : {}),
  };
}

/** A port nothing listens on right now. */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0]!;
}

/** `n` different ports nothing listens on right now (all bound at once, then let go). */
export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const srv = createServer();
          srv.once("error", reject);
          srv.listen(0, "127.0.0.1", () => resolve(srv));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as { port: number }).port);
  await Promise.all(servers.map((s) => new Promise((done) => s.close(done))));
  return ports;
}

/** Alive and not a zombie (a reparented child nobody reaped reads as dead). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return process.platform !== "linux";
  }
}

export function childPids(pid: number): number[] {
  const out = Bun.spawnSync(["pgrep", "-P", String(pid)], { stdout: "pipe", stderr: "ignore" });
  return out.stdout
    .toString()
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map(Number);
}

/** Waits up to `ms` for a process to be gone; true if it went. */
export async function waitGone(pid: number, ms: number): Promise<boolean> {
  const deadline = performance.now() + ms;
  while (performance.now() < deadline) {
    if (!alive(pid)) return true;
    await Bun.sleep(25);
  }
  return !alive(pid);
}

/** `bun src/main.ts serve <tiny-random> ...` as its own process, stderr collected. */
export class ServerProcess {
  stderr = "";
  private constructor(
    readonly proc: Subprocess<"ignore", "ignore", "pipe">,
    readonly port: number,
  ) {
    void (async () => {
      const decoder = new TextDecoder();
      try {
        for await (const chunk of proc.stderr) this.stderr += decoder.decode(chunk, { stream: true });
      } catch {
        // the process is gone
      }
    })();
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get pid(): number {
    return this.proc.pid;
  }

  static async spawn(args: string[], port?: number, fixture: FixtureKind = "tiny-random"): Promise<ServerProcess> {
    const p = port ?? (await freePort());
    const proc = Bun.spawn(
      [
        process.execPath,
        `${ROOT}/src/main.ts`,
        "serve",
        await fixturePath(fixture),
        "--port",
        String(p),
        "--threads",
        "1",
        ...args,
      ],
      { stdin: "ignore", stdout: "ignore", stderr: "pipe", env: { ...process.env, SUPERFLUID_QUIET: "1" } },
    );
    return new ServerProcess(proc, p);
  }

  /** Resolves "healthy" once /health answers ok, or "exited" if the process ends first. */
  async waitHealthy(timeoutMs = 30_000): Promise<"healthy" | "exited" | "timeout"> {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) return "exited";
      const ok = await fetch(`${this.url}/health`, { signal: AbortSignal.timeout(1000) }).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return "healthy";
      await Bun.sleep(50);
    }
    return "timeout";
  }

  /** stderr once it holds `text` (its reader may lag the process's exit a little); the timeout is a hang guard. */
  async stderrWith(text: string, timeoutMs = 30_000): Promise<string> {
    const deadline = performance.now() + timeoutMs;
    while (!this.stderr.includes(text) && performance.now() < deadline) await Bun.sleep(20);
    return this.stderr;
  }

  /** SIGKILLs the server and every child it still has. */
  async killHard(): Promise<void> {
    const children = alive(this.pid) ? childPids(this.pid) : [];
    this.proc.kill("SIGKILL");
    for (const c of children) if (alive(c)) process.kill(c, "SIGKILL");
    await this.proc.exited;
  }
}

// --- Real templates and tokenizers -----------------------------------------

const SHARED = join(import.meta.dir, "../../../shared");
/** llama.cpp's vocab-only GGUFs and the families' chat templates, in ../shared; tests that need them skip without. */
export const REAL_TEMPLATES_PRESENT = existsSync(join(SHARED, "models/vocab")) && existsSync(join(SHARED, "templates"));

/** A model family: a vocab-only GGUF of ../shared/models/vocab and a template of ../shared/templates. */
export interface RealTemplateCase {
  name: string;
  vocab: string;
  template: string;
}

/**
 * An in-process server on random weights over the family's real vocabulary,
 * with its own template (the GGUF is built once per machine and reused); its
 * close and its sessions folder's removal are pushed on `cleanups`.
 */
export async function serveRealTemplate(
  c: RealTemplateCase,
  cleanups: (() => Promise<void> | void)[],
): Promise<{ server: RunningServer; model: string }> {
  const dir = join(tmpdir(), "superfluid-real-vocab");
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${c.name}.gguf`);
  if (!existsSync(path)) {
    const template = await Bun.file(join(SHARED, "templates", c.template)).text();
    const tmp = `${path}.tmp-${process.pid}`;
    await writeGgufFile(
      realVocabModel({ vocabPath: join(SHARED, "models/vocab", c.vocab), chatTemplate: template }),
      tmp,
    );
    renameSync(tmp, path);
  }
  const sessions = mkdtempSync(join(tmpdir(), "superfluid-real-vocab-sessions-"));
  const server = await startServer(
    parseServeOptions([
      path,
      "--port",
      "0",
      "--max-batch",
      "1",
      "--max-context",
      "4096",
      "--threads",
      "1",
      "--sessions",
      sessions,
    ]) as ServeOptions,
    () => {},
  );
  cleanups.push(async () => {
    await server.close();
    rmSync(sessions, { recursive: true, force: true });
  });
  const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string }[] };
  return { server, model: models.data[0]!.id };
}

// --- The session store's write-ahead log -----------------------------------

export const FINISH = { open: 0, endOfTurn: 1, maxTokens: 2, cancelled: 4, error: 5 } as const;

export interface WalRecord {
  line: number;
  session: string;
  event_id: number;
  epoch: number;
  ts_unix_ms: number;
  body: Record<string, any>;
  kind: "Created" | "Appended" | "Generated" | "EpochBump" | string;
}

export interface WalRead {
  records: WalRecord[];
  /** Lines that are not `<crc32 8 hex> <json>` with a matching checksum (a torn tail, or worse). */
  bad: { line: number; text: string; why: string }[];
}

/** Parses `<crc32 as 8 hex digits> <json>` lines; the checksum is over the JSON text's UTF-8 bytes. */
export function parseWal(text: string): WalRead {
  const out: WalRead = { records: [], bad: [] };
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  lines.forEach((l, line) => {
    const m = /^([0-9a-fA-F]{8}) (.*)$/.exec(l);
    if (!m) return void out.bad.push({ line, text: l, why: "not '<crc32 8 hex> <json>'" });
    const json = m[2]!;
    const crc = (Bun.hash.crc32(json) >>> 0).toString(16).padStart(8, "0");
    if (crc !== m[1]!.toLowerCase())
      return void out.bad.push({ line, text: l, why: `crc ${m[1]} but the json's crc32 is ${crc}` });
    let rec: any;
    try {
      rec = JSON.parse(json);
    } catch {
      return void out.bad.push({ line, text: l, why: "json does not parse" });
    }
    const kinds = rec && typeof rec.body === "object" && rec.body !== null ? Object.keys(rec.body) : [];
    if (kinds.length !== 1)
      return void out.bad.push({
        line,
        text: l,
        why: "body is not one of {Created|Appended|Generated|EpochBump: ...}",
      });
    out.records.push({
      line,
      session: rec.session,
      event_id: rec.event_id,
      epoch: rec.epoch,
      ts_unix_ms: rec.ts_unix_ms,
      body: rec.body[kinds[0]!],
      kind: kinds[0]!,
    });
  });
  return out;
}

export function sessionsInOrder(records: WalRecord[]): string[] {
  const seen: string[] = [];
  for (const r of records) if (r.kind === "Created" && !seen.includes(r.session)) seen.push(r.session);
  return seen;
}
