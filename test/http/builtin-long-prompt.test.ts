// The built-in model on default sizing flags holds what a coding agent
// sends: a 32k-token prompt is answered while 8 short requests run beside it.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, type RunningServer } from "../../src/cli/serve.ts";
import { parseServeOptions, type ServeOptions } from "../../src/cli/serve-options.ts";
import { SCRIPTED_REPLY } from "../../src/fixtures/index.ts";
import { fixturePath } from "../support/models.ts";

process.env.SUPERFLUID_QUIET ??= "1";

let server: RunningServer;
let sessions: string;
let model: string;

beforeAll(async () => {
  sessions = mkdtempSync(join(tmpdir(), "superfluid-builtin-long-"));
  // No --max-context, no --max-batch: the defaults a new user gets.
  const opts = parseServeOptions([
    await fixturePath("tiny-chat"),
    "--port",
    "0",
    "--threads",
    "1",
    "--sessions",
    sessions,
  ]) as ServeOptions;
  server = await startServer(opts, () => {});
  model = ((await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
});

afterAll(async () => {
  await server?.close();
  rmSync(sessions, { recursive: true, force: true });
});

async function chat(content: string, maxTokens: number): Promise<any> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content }], max_tokens: maxTokens }),
  });
  const json: any = await res.json();
  if (res.status !== 200) throw new Error(`${res.status}: ${JSON.stringify(json)}`);
  return json;
}

test("a 32k-token prompt with max_tokens 32000, beside 8 short requests", async () => {
  const long = "the quick brown fox jumps over the lazy dog while ".repeat(1400);
  // Agents ask for max_tokens 32000 whatever the window leaves: cut, never refused.
  const [big, ...short] = await Promise.all([
    chat(long, 32000),
    ...Array.from({ length: 8 }, (_, i) => chat(`Short question ${i}?`, 32)),
  ]);
  expect(big.usage.prompt_tokens).toBeGreaterThanOrEqual(32000);
  expect(big.choices[0].message.content).toBe(SCRIPTED_REPLY);
  expect(big.choices[0].finish_reason).toBe("stop");
  for (const r of short)
    expect(r.choices[0]).toMatchObject({ message: { content: SCRIPTED_REPLY }, finish_reason: "stop" });
});
