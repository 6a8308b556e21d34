// `superfluid wait` as a script runs it (the CLI in a child process) against
// loopback stand-ins for a server: one still loading, one that accepts and
// never answers, a port nothing listens on (then something does), one that
// wants a key. The real server's side is test/release/ci-recipe.test.ts.
import { afterEach, describe, expect, test } from "bun:test";
import { createServer, type Server as NetServer, type Socket } from "node:net";
import { resolve } from "node:path";
import { healthUrl } from "../../src/cli/wait.ts";
import { freePort } from "../scenarios/support.ts";

const MAIN = resolve(import.meta.dir, "../../src/main.ts");

async function runWait(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([process.execPath, MAIN, "wait", ...args], { stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { code, stdout, stderr };
}

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

describe("superfluid wait", () => {
  test("a target is host:port, a bare host gets the default port, a URL's path is dropped", () => {
    expect(healthUrl("127.0.0.1:9000")).toBe("http://127.0.0.1:9000/health");
    expect(healthUrl("box")).toBe("http://box:8453/health");
    expect(healthUrl("http://127.0.0.1:8453/v1")).toBe("http://127.0.0.1:8453/health");
    expect(healthUrl("https://box/x?y=1")).toBe("https://box/health");
    expect(healthUrl("[::1]:9000")).toBe("http://[::1]:9000/health");
  });

  test("503 loading counts as not yet; the first 200 ends the wait with exit 0", async () => {
    let asked = 0;
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch(req) {
        if (new URL(req.url).pathname !== "/health") return new Response("no", { status: 404 });
        asked++;
        return asked <= 3
          ? Response.json({ status: "loading", models_loaded: 0, models_known: 1 }, { status: 503 })
          : Response.json({ status: "ok", models_loaded: 1, models_known: 1 });
      },
    });
    cleanups.push(() => server.stop(true));
    // Given as an OpenAI base URL, as a CI job has it at hand.
    const r = await runWait("--timeout", "60", `http://127.0.0.1:${server.port}/v1`);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(asked).toBe(4);
    expect(r.stdout).toContain(`http://127.0.0.1:${server.port}/health ready`);
  });

  test("a server that never answers: exit 1 at the timeout, saying so", async () => {
    const sockets: Socket[] = [];
    const silent: NetServer = createServer((s) => void sockets.push(s));
    await new Promise<void>((ok) => silent.listen(0, "127.0.0.1", ok));
    cleanups.push(() => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((ok) => silent.close(() => ok()));
    });
    const port = (silent.address() as { port: number }).port;
    const r = await runWait("--timeout", "1", `127.0.0.1:${port}`);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("not ready after 1 s (last: no answer)");
    expect(sockets.length).toBeGreaterThan(0);
  });

  test("a refused port is not yet: exit 1 at the timeout; a listener that comes up later ends the wait", async () => {
    const port = await freePort();
    // --timeout 0: one question with its full answer time, so a machine too busy
    // to finish a connect within a short timeout still sees the refusal.
    const refused = await runWait("--timeout", "0", `127.0.0.1:${port}`);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("(last: connection refused)");

    // The case a CI script has: wait is started before the server listens.
    const proc = Bun.spawn([process.execPath, MAIN, "wait", "--timeout", "120", `127.0.0.1:${port}`], {
      stdout: "pipe",
      stderr: "pipe",
    });
    cleanups.push(() => proc.kill());
    // Not an assertion on time: the outcome is the same whether wait has polled yet or not.
    await Bun.sleep(300);
    const server = Bun.serve({ port, hostname: "127.0.0.1", fetch: () => Response.json({ status: "ok" }) });
    cleanups.push(() => server.stop(true));
    expect(await proc.exited).toBe(0);
  });

  test("a 401 stops at once (waiting cannot fix a key); --api-key is sent as a bearer token", async () => {
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (req) =>
        req.headers.get("authorization") === "Bearer sekrit"
          ? Response.json({ status: "ok" })
          : Response.json({ error: { code: "invalid_api_key" } }, { status: 401 }),
    });
    cleanups.push(() => server.stop(true));
    const without = await runWait("--timeout", "600", `127.0.0.1:${server.port}`);
    expect(without.code).toBe(1);
    expect(without.stderr).toContain("401: needs --api-key");
    const wrong = await runWait("--timeout", "600", "--api-key", "nope", `127.0.0.1:${server.port}`);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain("the key was refused");
    expect((await runWait("--api-key", "sekrit", `127.0.0.1:${server.port}`)).code).toBe(0);
  });

  test("--pid: the server's process gone ends the wait at once with exit 1", async () => {
    const gone = Bun.spawn(["true"]);
    await gone.exited;
    const port = await freePort();
    const r = await runWait("--timeout", "600", "--pid", String(gone.pid), `127.0.0.1:${port}`);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`process ${gone.pid} ended before`);
    // A live process does not stop it: the 200 does.
    const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => Response.json({ status: "ok" }) });
    cleanups.push(() => server.stop(true));
    expect((await runWait("--pid", String(process.pid), `127.0.0.1:${server.port}`)).code).toBe(0);
  });

  test("usage errors exit 2; --help exits 0", async () => {
    expect((await runWait("--pid", "me")).code).toBe(2);
    expect((await runWait("--timeout", "soon")).code).toBe(2);
    expect((await runWait("--timeout", "-1")).code).toBe(2);
    expect((await runWait("a:1", "b:2")).code).toBe(2);
    expect((await runWait("--tiemout", "1")).stderr).toContain("did you mean --timeout");
    const help = await runWait("--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("usage: superfluid wait");
  });
});
