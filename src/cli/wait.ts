// `superfluid wait [--timeout SEC] [--pid PID] [--api-key KEY] [HOST:PORT|URL]`: blocks
// until a server's GET /health answers 200, so a CI script that starts
// `superfluid serve` in the background needs no polling loop of its own
// (docs/ci.md). Anything short of a 200 is "not yet": a refused or reset
// connection (the listener is not up), a 503 (`loading` while the default
// model starts, `degraded` while the session log cannot be written), a reply
// that does not come. Two things stop the wait early, since waiting cannot
// change them: a 401 (a refused key), and, with --pid, the server's process
// gone (a server that cannot start fails the script at once, not at the timeout).
import { FlagError, parseFlags } from "./flags.ts";

const USAGE = `usage: superfluid wait [--timeout SEC] [--pid PID] [--api-key KEY] [HOST:PORT|URL]

Waits until the server's GET /health answers 200 (ready to serve), then exits 0.
Exits 1 with the last answer when --timeout runs out. A refused connection or a
503 (loading) counts as not yet.

  HOST:PORT       the server (default 127.0.0.1:8453); a bare host gets port
                  8453; a URL's path is ignored (/health is at the root)
  --timeout SEC   give up after SEC seconds (default 60; 0 asks once: is a
                  server already up there?)
  --pid PID       the server's process (a script's $!): exit 1 at once if it
                  ends before the server is ready
  --api-key KEY   sent as Authorization: Bearer KEY`;

export const DEFAULT_TARGET = "127.0.0.1:8453";
const DEFAULT_TIMEOUT_S = 60;
/** Between polls: loopback polls are cheap, and a fast start should not be hidden behind the interval. */
const POLL_MS = 50;
/** One attempt's own deadline, so a server that accepts but stalls is asked again rather than waited on forever. */
const ATTEMPT_MS = 5000;

/** `host:port`, `host` (port 8453) or a URL (an OpenAI base URL such as `.../v1` included), to the /health URL. */
export function healthUrl(target: string): string {
  const explicit = /^https?:\/\//.test(target);
  const url = new URL(explicit ? target : `http://${target}`);
  // A bare host gets the server's default port; an explicit :80 stays.
  if (!explicit && !/:\d+$/.test(target)) url.port = "8453";
  url.pathname = "/health";
  url.search = "";
  url.hash = "";
  return url.toString();
}

export type Attempt = { ready: true } | { ready: false; final: boolean; why: string };

/** One GET /health: ready, not yet (with why), or final (a refused key). */
export async function probe(url: string, apiKey: string | undefined, budgetMs: number): Promise<Attempt> {
  try {
    const res = await fetch(url, {
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
      signal: AbortSignal.timeout(Math.max(1, Math.min(budgetMs, ATTEMPT_MS))),
    });
    const text = await res.text();
    if (res.status === 200) return { ready: true };
    if (res.status === 401)
      return { ready: false, final: true, why: apiKey ? "401: the key was refused" : "401: needs --api-key" };
    return { ready: false, final: false, why: `${res.status}${describeBody(text)}` };
  } catch (err) {
    return { ready: false, final: false, why: describeError(err) };
  }
}

/** `status` and `reason` of the server's health object (`503 loading`), or nothing for another body. */
function describeBody(text: string): string {
  try {
    const body = JSON.parse(text) as { status?: unknown; reason?: unknown };
    const parts = [body.status, body.reason].filter((p): p is string => typeof p === "string" && p !== "");
    return parts.length ? ` ${parts.join(": ")}` : "";
  } catch {
    return "";
  }
}

function describeError(err: unknown): string {
  const e = err as { name?: string; code?: string; message?: string };
  if (e.name === "TimeoutError" || e.name === "AbortError") return "no answer";
  if (e.code === "ConnectionRefused" || e.code === "ECONNREFUSED") return "connection refused";
  return `no connection (${e.code ?? e.message ?? String(err)})`;
}

/** Whether process `pid` still exists (signal 0 checks without sending; EPERM means it exists, as another user's). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: string }).code === "EPERM";
  }
}

/**
 * Polls until ready (0), a refused key, the watched process gone or the deadline (1). Reports on stdout (ready) and
 * stderr (why not).
 */
export async function waitReady(
  url: string,
  apiKey: string | undefined,
  timeoutS: number,
  pid?: number,
): Promise<number> {
  const start = performance.now();
  const deadline = start + timeoutS * 1000;
  for (;;) {
    if (pid !== undefined && !processAlive(pid)) {
      console.error(`superfluid wait: the server's process ${pid} ended before ${url} was ready`);
      return 1;
    }
    // --timeout 0 asks once, and that one question gets its full answer time.
    const attempt = await probe(url, apiKey, timeoutS === 0 ? ATTEMPT_MS : deadline - performance.now());
    if (attempt.ready) {
      console.log(`superfluid wait: ${url} ready after ${((performance.now() - start) / 1000).toFixed(1)} s`);
      return 0;
    }
    if (attempt.final) {
      console.error(`superfluid wait: ${url}: ${attempt.why}`);
      return 1;
    }
    const left = deadline - performance.now();
    if (left <= 0) {
      console.error(`superfluid wait: ${url} not ready after ${timeoutS} s (last: ${attempt.why})`);
      return 1;
    }
    await Bun.sleep(Math.min(POLL_MS, left));
  }
}

export async function runWait(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags(argv, {
      timeout: { value: true },
      pid: { value: true },
      "api-key": { value: true },
      help: { aliases: ["h"] },
    });
  } catch (err) {
    if (err instanceof FlagError) {
      console.error(`superfluid wait: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (parsed.switches.has("help")) {
    console.log(USAGE);
    return 0;
  }
  if (parsed.positional.length > 1) {
    console.error(`superfluid wait: name one server, not ${parsed.positional.length}\n\n${USAGE}`);
    return 2;
  }
  const given = parsed.values.get("timeout")?.[0];
  const timeoutS = given === undefined ? DEFAULT_TIMEOUT_S : Number(given);
  if (given !== undefined && (given.trim() === "" || !Number.isFinite(timeoutS) || timeoutS < 0)) {
    console.error(`superfluid wait: --timeout takes seconds (a number ≥ 0), not '${given}'`);
    return 2;
  }
  const pidGiven = parsed.values.get("pid")?.[0];
  const pid = pidGiven === undefined ? undefined : Number(pidGiven);
  if (pid !== undefined && !(Number.isSafeInteger(pid) && pid > 0)) {
    console.error(`superfluid wait: --pid takes a process id, not '${pidGiven}'`);
    return 2;
  }
  const target = parsed.positional[0] ?? DEFAULT_TARGET;
  let url: string;
  try {
    url = healthUrl(target);
  } catch {
    console.error(`superfluid wait: ${target} is not HOST:PORT or a URL`);
    return 2;
  }
  return waitReady(url, parsed.values.get("api-key")?.[0], timeoutS, pid);
}
