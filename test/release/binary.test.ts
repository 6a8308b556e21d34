// The one-file executable: built by build.ts, it runs from an empty folder with
// no Bun and no node_modules, extracting its embedded libllama on first use,
// and serves a request through its own worker process.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { fixturePath } from "../support/models.ts";

const work = mkdtempSync(join(tmpdir(), "sf-binary-"));
const outfile = join(work, "superfluid");
const empty = mkdtempSync(join(tmpdir(), "sf-empty-"));
// No Bun on PATH, a fresh home and cache: only the binary itself.
const bareEnv = { PATH: "/usr/bin:/bin", HOME: empty, SUPERFLUID_CACHE_DIR: join(empty, "cache") };
let server: Subprocess<"ignore", "pipe", "pipe"> | undefined;

afterAll(() => server?.kill("SIGKILL"));

/** Reads stderr until a line matches; returns the match. */
async function waitForLine(
  stream: ReadableStream<Uint8Array>,
  pattern: RegExp,
  timeoutMs: number,
): Promise<RegExpMatchArray> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let seen = "";
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const { done, value } = await reader.read();
    if (done) break;
    seen += decoder.decode(value, { stream: true });
    const m = seen.match(pattern);
    if (m) {
      reader.releaseLock();
      return m;
    }
  }
  throw new Error(`no line matching ${pattern} in:\n${seen}`);
}

describe("compiled binary", () => {
  test("builds with libllama embedded", () => {
    const build = Bun.spawnSync([process.execPath, join(import.meta.dir, "../..", "build.ts"), "--outfile", outfile], {
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(build.stderr.toString()).toBe("");
    expect(build.exitCode).toBe(0);
  });

  test("opens its embedded libllama from an empty folder", async () => {
    const run = Bun.spawnSync([outfile, "check", "--model", await fixturePath("tiny-random")], {
      cwd: empty,
      env: bareEnv,
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(run.stderr.toString()).toBe("");
    expect(run.exitCode).toBe(0);
    expect(run.stdout.toString()).toMatch(/\(embedded, llama\.cpp v[\d.]+\)/);
    expect(run.stdout.toString()).toMatch(/vocabulary of \d+ tokens/);
  });

  test("serves one chat request from an empty folder", async () => {
    server = Bun.spawn(
      [
        outfile,
        "serve",
        await fixturePath("tiny-random"),
        "--http",
        "127.0.0.1:0",
        "--max-batch",
        "2",
        "--max-context",
        "1024",
        "--threads",
        "1",
        "--sessions",
        join(empty, "sessions"),
      ],
      {
        cwd: empty,
        env: bareEnv,
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const [, url] = await waitForLine(server.stderr, /serving \S+ at (http:\/\/\S+)\/v1/, 30_000);
    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
    const reply = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: models.data[0]!.id,
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 8,
        ignore_eos: true,
      }),
    });
    expect(reply.status).toBe(200);
    const body = (await reply.json()) as {
      choices: { message: { content: string }; finish_reason: string }[];
      usage: { completion_tokens: number };
    };
    expect(body.usage.completion_tokens).toBe(8);
    expect(body.choices[0]!.finish_reason).toBe("length");
    server.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  });
});
