// The start (docs/cli.md#startup-and-shutdown): the listener opens before the
// default model loads, /health is 503 `loading` until it serves and 200 after,
// other requests wait for it, --ready-file appears only once it serves, and a
// model that cannot load still ends the process with exit 1 and the reason.
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer } from "../../src/cli/serve.ts";
import { servedIdOfFile } from "../../src/daemon/model-ref.ts";
import { parseServeOptions, type ServeOptions } from "../../src/cli/serve-options.ts";
import { fixturePath } from "../support/models.ts";

process.env.SUPERFLUID_QUIET ??= "1";

const work = mkdtempSync(join(tmpdir(), "sf-startup-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

test("/health is 503 loading until the default model serves, requests wait, the ready file comes last", async () => {
  const readyFile = join(work, "ready");
  writeFileSync(readyFile, "stale from an earlier run\n");
  const model = await fixturePath("tiny-random");
  const options = parseServeOptions([
    model,
    "--http",
    "127.0.0.1:0",
    "--max-batch",
    "2",
    "--max-context",
    "512",
    "--threads",
    "1",
    "--sessions",
    join(work, "s1"),
    "--ready-file",
    readyFile,
  ]) as ServeOptions;
  let during: { status: number; body: { status: string }; readyFile: boolean } | undefined;
  let held: Promise<Response> | undefined;
  let heldSettled = false;
  const server = await startServer(options, () => {}, undefined, {
    async listening(url) {
      // The model has not started loading: the start waits for this hook.
      const r = await fetch(`${url}/health`);
      during = { status: r.status, body: (await r.json()) as { status: string }, readyFile: existsSync(readyFile) };
      held = fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: servedIdOfFile(model),
          messages: [{ role: "user", content: "hi" }],
          max_tokens: 2,
          ignore_eos: true,
        }),
      });
      void held.finally(() => (heldSettled = true));
      // The request has reached the server and is held there, not refused.
      await Bun.sleep(50);
      expect(heldSettled).toBe(false);
    },
  });
  try {
    expect(during).toEqual({ status: 503, body: expect.objectContaining({ status: "loading" }), readyFile: false });
    const reply = await held!;
    expect(reply.status).toBe(200);
    expect(((await reply.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(2);
    const health = await fetch(`${server.url}/health`);
    expect(health.status).toBe(200);
    expect(((await health.json()) as { status: string }).status).toBe("ok");
    expect(readFileSync(readyFile, "utf8")).toBe(`${server.url}\n`);
  } finally {
    await server.close();
  }
  // A stopped server leaves no ready file behind.
  expect(existsSync(readyFile)).toBe(false);
});

test("a model that cannot load ends the start with exit 1 and the reason, and no ready file", async () => {
  // A GGUF whose header reads but whose tensor data is cut off: it fails in the worker, after the listener is up.
  const whole = readFileSync(await fixturePath("tiny-random"));
  const broken = join(work, "broken.gguf");
  writeFileSync(broken, whole.subarray(0, Math.floor(whole.length / 2)));
  const readyFile = join(work, "ready-broken");
  const proc = Bun.spawn(
    [
      process.execPath,
      join(import.meta.dir, "..", "..", "src", "main.ts"),
      "serve",
      broken,
      "--http",
      "127.0.0.1:0",
      "--max-batch",
      "2",
      "--max-context",
      "512",
      "--threads",
      "1",
      "--sessions",
      join(work, "s2"),
      "--ready-file",
      readyFile,
      "--no-tui",
    ],
    { stdout: "ignore", stderr: "pipe", env: { ...process.env, SUPERFLUID_QUIET: "1" } },
  );
  const stderr = await new Response(proc.stderr).text();
  expect(await proc.exited).toBe(1);
  expect(stderr).toMatch(/superfluid serve: .*broken\.gguf.*truncated file/);
  expect(existsSync(readyFile)).toBe(false);
}, 120_000);

test("a start that fails answers the requests it held with 503 and the reason before the listener closes", async () => {
  const whole = readFileSync(await fixturePath("tiny-random"));
  const broken = join(work, "broken-held.gguf");
  writeFileSync(broken, whole.subarray(0, Math.floor(whole.length / 2)));
  const options = parseServeOptions([
    broken,
    "--http",
    "127.0.0.1:0",
    "--max-batch",
    "2",
    "--max-context",
    "512",
    "--threads",
    "1",
    "--sessions",
    join(work, "s3"),
  ]) as ServeOptions;
  let held: Promise<Response> | undefined;
  const start = startServer(options, () => {}, undefined, {
    async listening(url, startup) {
      held = fetch(`${url}/v1/models`);
      // The start goes on (and fails) only once the server holds the request.
      for (let guard = 0; startup.held === 0 && guard < 6000; guard++) await Bun.sleep(10);
      expect(startup.held).toBe(1);
    },
  });
  expect(
    await start.then(
      () => "started",
      (err: Error) => err.message,
    ),
  ).toMatch(/truncated file/);
  const res = await held!;
  expect(res.status).toBe(503);
  const body = (await res.json()) as { error: { code: string; message: string } };
  expect(body.error.code).toBe("server_shutting_down");
  expect(body.error.message).toContain("did not start");
}, 120_000);
