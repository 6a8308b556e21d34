// What the several-models tests share: a server on several fixtures (its
// log lines kept, to count loads), and requests that wait out a model that
// is loading (503 `model_loading` with Retry-After) the way a client would.
import { afterAll, beforeAll, expect } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, type RunningServer } from "../../src/cli/serve.ts";
import { parseServeOptions, type ServeOptions } from "../../src/cli/serve-options.ts";
import { servedIdOfPath } from "../../src/daemon/model-ref.ts";
import { fixtureFileName } from "../../src/fixtures/index.ts";

process.env.SUPERFLUID_QUIET ??= "1";

export const CHAT_ID = servedIdOfPath(fixtureFileName("tiny-chat"));
export const RANDOM_ID = servedIdOfPath(fixtureFileName("tiny-random"));

export interface MultiServer {
  url: string;
  server: RunningServer;
  sessions: string;
  /** Every line the server logged. */
  lines: string[];
}

/** Starts a server with `args` (models and flags; --port, --threads and --sessions added). */
export async function startMulti(
  args: string[],
  sessions = mkdtempSync(join(tmpdir(), "superfluid-models-test-")),
): Promise<MultiServer> {
  const lines: string[] = [];
  const opts = parseServeOptions([...args, "--port", "0", "--threads", "1", "--sessions", sessions]) as ServeOptions;
  const server = await startServer(opts, (l) => lines.push(l));
  return { url: server.url, server, sessions, lines };
}

/** One server for a test file, started in beforeAll and closed (its sessions folder removed) in afterAll. */
export function useMulti(args: () => Promise<string[]>): MultiServer {
  const handle = {} as MultiServer;
  beforeAll(async () => Object.assign(handle, await startMulti(await args())));
  afterAll(async () => {
    await handle.server?.close();
    if (handle.sessions) rmSync(handle.sessions, { recursive: true, force: true });
  });
  return handle;
}

export async function getJson(s: { url: string }, path: string): Promise<{ status: number; json: any }> {
  const res = await fetch(`${s.url}${path}`);
  return { status: res.status, json: await res.json() };
}

export async function send(
  s: { url: string },
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; headers: Headers; json: any }> {
  const res = await fetch(`${s.url}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, headers: res.headers, json: await res.json() };
}

/** The /v1/models entry of a model. */
export async function listed(s: { url: string }, id: string): Promise<any> {
  const { json } = await getJson(s, "/v1/models");
  return json.data.find((m: any) => m.id === id);
}

/**
 * POSTs, and while the answer is 503 `model_loading` (a known model the
 * request started loading) tries again after its Retry-After, as OpenAI's
 * SDK does; `hangGuardMs` only stops a hung wait.
 */
export async function postServed(
  s: { url: string },
  path: string,
  body: unknown,
  hangGuardMs = 120_000,
): Promise<{ status: number; json: any; loadingAnswers: number }> {
  const started = performance.now();
  let loadingAnswers = 0;
  for (;;) {
    const r = await send(s, "POST", path, body);
    const code = r.json?.error?.code;
    if (r.status !== 503 || code !== "model_loading" || performance.now() - started > hangGuardMs)
      return { status: r.status, json: r.json, loadingAnswers };
    loadingAnswers++;
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
    await Bun.sleep(200);
  }
}

/** A chat turn on `model`, waiting out its load. */
export function chat(s: { url: string }, model: string, extra: Record<string, unknown> = {}) {
  return postServed(s, "/v1/chat/completions", {
    model,
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 16,
    ...extra,
  });
}

/** How many times the server logged a model as ready. */
export function loadsOf(s: MultiServer, id: string): number {
  return s.lines.filter((l) => l.startsWith(`superfluid: ${id} ready in`)).length;
}

/** Polls until `check` holds; `hangGuardMs` only stops a hung wait, it is no bound on how long it may take. */
export async function until(check: () => Promise<boolean>, hangGuardMs = 60_000): Promise<boolean> {
  const started = performance.now();
  while (performance.now() - started < hangGuardMs) {
    if (await check()) return true;
    await Bun.sleep(50);
  }
  return false;
}
