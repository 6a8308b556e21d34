// Scenario: a stored Responses conversation survives a SIGKILL of the
// server. Two turns are stored, the server is killed without warning, and a
// new server on the same --sessions dir reads both back and continues the
// chain with a third turn that holds the whole earlier conversation.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { SCRIPTED_REPLY } from "../../src/fixtures/index.ts";
import { ServerProcess } from "./support.ts";

const sessions = mkdtempSync(join(tmpdir(), "superfluid-responses-restart-"));
const servers: ServerProcess[] = [];

afterAll(async () => {
  for (const s of servers) if (s.proc.exitCode === null && s.proc.signalCode === null) await s.killHard();
  rmSync(sessions, { recursive: true, force: true });
});

async function start(): Promise<{ server: ServerProcess; client: OpenAI; model: string }> {
  const server = await ServerProcess.spawn(
    ["--sessions", sessions, "--max-batch", "1", "--max-context", "2048"],
    undefined,
    "tiny-chat",
  );
  servers.push(server);
  const state = await server.waitHealthy();
  if (state !== "healthy") throw new Error(`the server did not come up (${state}); stderr:\n${server.stderr}`);
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
  const model = (await client.models.list()).data[0]!.id;
  return { server, client, model };
}

test("a conversation stored before a SIGKILL is read back and continued after the restart", async () => {
  const first = await start();
  const one = await first.client.responses.create({
    model: first.model,
    instructions: "Be brief.",
    input: "First question",
  });
  const two = await first.client.responses.create({
    model: first.model,
    instructions: "Be brief.",
    input: "Second question",
    previous_response_id: one.id,
  });
  await first.server.killHard();

  const second = await start();
  expect((await second.client.responses.retrieve(two.id)).output).toEqual(two.output);
  const page = await second.client.responses.inputItems.list(one.id);
  expect(page.data).toHaveLength(1);
  const { data: three, response } = await second.client.responses
    .create({ model: second.model, instructions: "Be brief.", input: "Third question", previous_response_id: two.id })
    .withResponse();
  expect(three.output_text).toBe(SCRIPTED_REPLY);
  expect(response.headers.get("x-superfluid-continued")).toBe("warm");
  // The third prompt holds both stored turns, exactly as they ran.
  expect(three.usage!.input_tokens).toBeGreaterThan(two.usage!.total_tokens);
  await second.server.killHard();
});
