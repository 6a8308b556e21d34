// SIGTERM drains (docs/cli.md#startup-and-shutdown): readiness answers 503
// `draining` at once, a new generation gets 503 `server_draining` with
// Retry-After, the 8 streams already running all finish their replies, and
// the process exits 0. `superfluid serve` in its own process; events, not
// clocks: the signal is sent once every stream has its first token.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServerProcess } from "../scenarios/support.ts";
import { useServer } from "./support.ts";

const work = mkdtempSync(join(tmpdir(), "sf-drain-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const STREAMS = 8;

/** `superfluid serve` on tiny-random in its own process, once /health answers. */
async function startServe(
  flags: string[],
): Promise<{ server: ServerProcess; proc: ServerProcess["proc"]; url: string }> {
  const server = await ServerProcess.spawn(["--no-tui", ...flags]);
  if ((await server.waitHealthy(600_000)) !== "healthy") throw new Error(`serve did not start:\n${server.stderr}`);
  return { server, proc: server.proc, url: server.url };
}
// Long enough that the streams are still running when the signal lands (their full length is checked at the end).
const TOKENS = 2000;

/** STREAMS chat streams of `tokens` tokens each; `started` settles once every one has its first token. */
function openStreams(url: string, model: string, tokens: number) {
  let firstTokens = 0;
  let allStarted!: () => void;
  const started = new Promise<void>((r) => (allStarted = r));
  const streams = Array.from({ length: STREAMS }, async (_, i) => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model,
        messages: [{ role: "user", content: `story ${i}` }],
        max_tokens: tokens,
        ignore_eos: true,
        stream: true,
      }),
    });
    expect(res.status).toBe(200);
    let text = "";
    let counted = false;
    for await (const chunk of res.body!.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      if (!counted && text.includes('"content"')) {
        counted = true;
        if (++firstTokens === STREAMS) allStarted();
      }
    }
    return text;
  });
  return { streams, started };
}

test("SIGTERM during 8 streams: all 8 finish, readiness and new requests get 503, exit 0", async () => {
  const { server, proc, url } = await startServe([
    "--max-batch",
    String(STREAMS),
    "--max-context",
    "1024",
    "--sessions",
    join(work, "s"),
    "--drain-timeout",
    "600",
  ]);
  const id = ((await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
  expect((await fetch(`${url}/health/ready`)).status).toBe(200);

  const { streams, started } = openStreams(url, id, TOKENS);
  await started;
  proc.kill("SIGTERM");

  // Readiness goes 503 draining; a new generation is refused with Retry-After.
  for (;;) {
    const r = await fetch(`${url}/health/ready`);
    if (r.status === 503) {
      expect(await r.json()).toEqual({ status: "draining" });
      break;
    }
    await Bun.sleep(10);
  }
  const late = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: id, messages: [{ role: "user", content: "late" }], max_tokens: 2 }),
  });
  expect(late.status).toBe(503);
  expect(late.headers.get("retry-after")).toBe("5");
  expect(((await late.json()) as { error: { code: string } }).error.code).toBe("server_draining");

  // Every running stream finishes its whole reply.
  for (const text of await Promise.all(streams)) {
    expect(text).toContain('"finish_reason":"length"');
    expect(text.trimEnd()).toEndWith("data: [DONE]");
  }
  expect(await proc.exited).toBe(0);
  expect(await server.stderrWith("superfluid: draining")).toContain("superfluid: draining: new requests get 503");
}, 300_000);

test("generations still running when the drain timeout runs out are cut with 503 server_draining, streamed or not", async () => {
  const { proc, url } = await startServe([
    "--max-batch",
    String(STREAMS + 1),
    "--max-context",
    "4096",
    "--sessions",
    join(work, "cut"),
    "--drain-timeout",
    "0",
  ]);
  const id = ((await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
  // Eight streams of up to ~4000 tokens each: far more than the moment between their first tokens and the cut.
  const { streams, started } = openStreams(url, id, 4000);
  // And one reply not streamed: its 503 is written before the listener closes too.
  const whole = fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: id,
      messages: [{ role: "user", content: "long story, whole" }],
      max_tokens: 4000,
      ignore_eos: true,
    }),
  });
  await started;
  // Cut once the one not streamed is on a lane too (the router gauge counts it).
  for (;;) {
    const text = await (await fetch(`${url}/metrics`)).text();
    if (/^vllm:num_requests_running\{[^}]*\} (\d+)$/m.exec(text)?.[1] === String(STREAMS + 1)) break;
    await Bun.sleep(10);
  }
  proc.kill("SIGTERM");
  const cut = await whole;
  expect(cut.status).toBe(503);
  const body = (await cut.json()) as { error: { code: string; message: string } };
  expect(body.error.code).toBe("server_draining");
  expect(body.error.message).toContain("the generation was cut when the grace period ran out");
  for (const text of await Promise.all(streams)) {
    expect(text).not.toContain('"finish_reason":"length"');
    expect(text).toContain("server_draining");
    expect(text).toContain("the generation was cut when the grace period ran out");
    expect(text).not.toContain("engine worker");
  }
  expect(await proc.exited).toBe(0);
}, 300_000);

describe("readiness with keys on", () => {
  const s = useServer({ extraArgs: ["--api-key", "sekrit"], apiKey: "sekrit" });
  test("/health/ready needs no key, as a kubelet's probe sends none; other routes still do", async () => {
    const ready = await fetch(`${s.url}/health/ready`);
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as { status: string }).status).toBe("ready");
    expect((await fetch(`${s.url}/v1/models`)).status).toBe(401);
  });
});
