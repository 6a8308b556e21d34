// The CI recipe's shell script (docs/ci-smoke.sh) run end to end, as a CI job
// runs it: SUPERFLUID_BIN is a wrapper that execs `bun src/main.ts` (no build
// needed), on a free port and a fresh sessions folder, with an "app test"
// that checks the built-in model's reply. Afterwards nothing may be left: no
// process carrying this run's marker in its environment (the wrapper, the
// daemon, its workers), and nothing listening on the port.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { SCRIPTED_REPLY } from "../../src/fixtures/scripted-chat.ts";
import { freePort } from "../scenarios/support.ts";

const REPO = resolve(import.meta.dir, "../..");
const SCRIPT = join(REPO, "docs/ci-smoke.sh");
const SH = Bun.which("sh");
const CURL = Bun.which("curl");

let dir = "";
let wrapper = "";
let appTest = "";

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "sf-ci-recipe-"));
  wrapper = join(dir, "superfluid");
  // exec, so the pid the script holds is the server's own and SIGTERM reaches it.
  writeFileSync(
    wrapper,
    `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(REPO, "src/main.ts"))} "$@"\n`,
    { mode: 0o755 },
  );
  // The app's test: one chat at temperature 0 with a fixed seed, through the
  // base URL the script exports; it leaves a file saying it ran.
  appTest = join(dir, "app-test.ts");
  writeFileSync(
    appTest,
    `const res = await fetch(process.env.OPENAI_BASE_URL + "/chat/completions", {
  method: "POST",
  headers: { "content-type": "application/json", authorization: "Bearer " + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: "tiny-chat", messages: [{ role: "user", content: "Say hello." }], temperature: 0, seed: 42, max_tokens: 32 }),
});
const body = await res.json();
const content = body.choices?.[0]?.message?.content;
await Bun.write(process.env.APP_TEST_RAN, JSON.stringify({ status: res.status, content }));
process.exit(content === process.env.EXPECTED_REPLY ? 0 : 1);
`,
  );
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Pids of live processes whose environment holds `mark` (Linux /proc; undefined elsewhere). */
function processesWith(mark: string): number[] | undefined {
  if (!existsSync("/proc/self/environ")) return undefined;
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/environ`, "latin1").split("\0").includes(mark)) found.push(Number(name));
    } catch {
      // Gone meanwhile, or another user's.
    }
  }
  return found;
}

async function portAnswers(port: number): Promise<boolean> {
  try {
    await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(5000) });
    return true;
  } catch {
    return false;
  }
}

interface Run {
  code: number;
  stderr: string;
  port: number;
  mark: string;
  ran: string;
  log: string;
}

/** Runs the script with `args` as the app test, on a free port and a fresh sessions folder. */
async function runRecipe(args: string[], extraEnv: Record<string, string> = {}, port?: number): Promise<Run> {
  port ??= await freePort();
  const run = mkdtempSync(join(dir, "run-"));
  const mark = `SF_CI_RECIPE_MARK=${crypto.randomUUID()}`;
  const ran = join(run, "app-test-ran.json");
  const log = join(run, "serve.log");
  const proc = Bun.spawn([SH!, SCRIPT, ...args], {
    cwd: run,
    env: {
      ...process.env,
      SUPERFLUID_BIN: wrapper,
      SUPERFLUID_PORT: String(port),
      SUPERFLUID_SESSIONS: join(run, "sessions"),
      SUPERFLUID_LOG: log,
      SUPERFLUID_WAIT_TIMEOUT: "300",
      APP_TEST_RAN: ran,
      EXPECTED_REPLY: SCRIPTED_REPLY,
      SF_CI_RECIPE_MARK: mark.slice("SF_CI_RECIPE_MARK=".length),
      ...extraEnv,
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { code, stderr, port, mark, ran, log };
}

/** Nothing of the run is left: no marked process, nothing on the port. */
async function expectNothingLeft(r: Run): Promise<void> {
  const left = processesWith(r.mark);
  if (left !== undefined) expect(left).toEqual([]);
  expect(await portAnswers(r.port)).toBe(false);
}

describe.skipIf(!SH)("docs/ci-smoke.sh end to end", () => {
  test("starts the server, waits, runs the app test against it, stops it cleanly", async () => {
    const r = await runRecipe([process.execPath, appTest]);
    expect(r.stderr).toContain("ready after");
    expect(r.code).toBe(0);
    expect(JSON.parse(readFileSync(r.ran, "utf8"))).toEqual({ status: 200, content: SCRIPTED_REPLY });
    // Stopped by SIGTERM, cleanly: the server said so in its log and exited 0 (else the script fails).
    expect(r.stderr).not.toContain("not a clean stop");
    expect(readFileSync(r.log, "utf8")).toContain("serving tiny-chat");
    await expectNothingLeft(r);
  });

  test.skipIf(!CURL)("with no app test named, its own curl check of the built-in reply passes", async () => {
    const r = await runRecipe([]);
    expect(r.stderr).toContain(`the built-in model answered: ${SCRIPTED_REPLY}`);
    expect(r.code).toBe(0);
    await expectNothingLeft(r);
  });

  test("a failing app test: its exit status, the server's log printed, the server stopped", async () => {
    const r = await runRecipe(["sh", "-c", 'test -n "$OPENAI_BASE_URL" && exit 3']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("the app tests failed (exit 3)");
    expect(r.stderr).toContain("server log");
    expect(r.stderr).toContain("serving tiny-chat");
    await expectNothingLeft(r);
  });

  test("a server that cannot start fails the script at once (wait --pid), with its log", async () => {
    const r = await runRecipe([process.execPath, appTest], { SUPERFLUID_SERVE_ARGS: "--no-such-flag" });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("ended before");
    expect(r.stderr).toContain("--no-such-flag");
    expect(existsSync(r.ran)).toBe(false);
    await expectNothingLeft(r);
  });

  test("a server already on the port is refused before starting ours; the app test never runs", async () => {
    const other = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => Response.json({ status: "ok" }) });
    try {
      const r = await runRecipe([process.execPath, appTest], {}, other.port);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("a server already answers");
      expect(existsSync(r.ran)).toBe(false);
      const left = processesWith(r.mark);
      if (left !== undefined) expect(left).toEqual([]);
    } finally {
      other.stop(true);
    }
  });
});
