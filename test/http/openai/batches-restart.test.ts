// A batch survives its server (docs/api/batches.md#durability): stopped in
// process or SIGKILLed mid-batch, the server started again on the same
// --sessions folder resumes the batch at the first line without a recorded
// result. The lines recorded before the stop keep their results (their
// batch_req ids), and the lines that ran are the input's first ones, each
// once: none ran twice, none was lost. The batch is far longer than any stall
// of a busy machine between seeing a line recorded and stopping the server,
// so the stop always lands mid-batch; the second server runs a few more
// lines and is then cancelled, which writes what ran to the output file.
// (Running a resumed batch to its end is test/batches/service.test.ts.)
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { ServerProcess } from "../../scenarios/support.ts";
import { CHAT, chatLine, ended, fileLines, uploadLines, waitBatch } from "./batches-support.ts";
import { startTestServer } from "../support.ts";

const dirs: string[] = [];
const processes: ServerProcess[] = [];

afterAll(async () => {
  for (const p of processes) if (p.proc.exitCode === null && p.proc.signalCode === null) await p.killHard();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function sessionsDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "superfluid-batches-restart-"));
  dirs.push(dir);
  return dir;
}

/** 300k tokens in all: over a minute of decoding here, far past any stall of the test process. */
const LINES = 100;
const MAX_TOKENS = 3000;
const longLines = () =>
  Array.from({ length: LINES }, (_, i) => chatLine(`line-${i}`, { ignore_eos: true, max_tokens: MAX_TOKENS }));

/** The results the batch had recorded on disk: custom_id -> its output line's id. */
function recorded(sessions: string, batchId: string): Map<string, string> {
  const path = join(sessions, "batches", `${batchId}.results.jsonl`);
  const out = new Map<string, string>();
  if (!existsSync(path)) return out;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (line.trim() === "") continue;
    const r = JSON.parse(line) as { out: { id: string; custom_id: string } };
    out.set(r.out.custom_id, r.out.id);
  }
  return out;
}

/** The batch record as the stopped server left it. */
function status(sessions: string, batchId: string): string {
  return (
    JSON.parse(readFileSync(join(sessions, "batches", `${batchId}.json`), "utf8")) as { batch: { status: string } }
  ).batch.status;
}

/**
 * The second server takes the batch up where the first left it: it runs the
 * line cut off by the stop and the next, then is cancelled; what ran is the
 * input's first lines, each once, the recorded ones with their first results.
 */
async function checkResumed(client: OpenAI, batchId: string, before: Map<string, string>): Promise<void> {
  const resumed = await waitBatch(client, batchId, (b) => b.request_counts!.completed >= before.size + 2 || ended(b));
  expect(resumed.status).toBe("in_progress");
  await client.batches.cancel(batchId);
  const b = await waitBatch(client, batchId, ended);
  expect(b.status).toBe("cancelled");
  const out = await fileLines(client, b.output_file_id!);
  const ran = out.length;
  expect(ran).toBeGreaterThanOrEqual(before.size + 2);
  expect(b.request_counts).toEqual({ total: LINES, completed: ran, failed: 0 });
  expect(b.error_file_id).toBeNull();
  expect(out.map((l) => l.custom_id)).toEqual(
    longLines()
      .slice(0, ran)
      .map((l) => l.custom_id as string),
  );
  for (const [customId, id] of before) expect(out.find((l) => l.custom_id === customId).id).toBe(id);
  // The line in flight at the stop was not cut short: it ran again whole.
  for (const l of out) expect(l.response.body.usage.completion_tokens).toBe(MAX_TOKENS);
}

describe("a batch across a restart", () => {
  test("server closed in process mid-batch: the line in flight is not failed, and the next server resumes the batch", async () => {
    const sessions = sessionsDir();
    const first = await startTestServer({ fixture: "tiny-chat", sessions, maxContext: 4096 });
    let batchId: string;
    try {
      const input = await uploadLines(first.client, longLines());
      batchId = (await first.client.batches.create({ input_file_id: input, endpoint: CHAT, completion_window: "24h" }))
        .id;
      await waitBatch(first.client, batchId, (b) => b.request_counts!.completed >= 2 || ended(b));
    } finally {
      await first.server.close();
    }
    const before = recorded(sessions, batchId);
    expect(before.size).toBeGreaterThanOrEqual(2);
    expect(before.size).toBeLessThan(LINES);
    expect(status(sessions, batchId)).toBe("in_progress");

    const second = await startTestServer({ fixture: "tiny-chat", sessions, maxContext: 4096 });
    try {
      await checkResumed(second.client, batchId, before);
    } finally {
      await second.server.close();
    }
  });

  test("server SIGKILLed mid-batch, its input file deleted: started again on the same folder, it resumes at the first unrecorded line", async () => {
    const sessions = sessionsDir();
    const args = ["--sessions", sessions, "--max-context", "4096", "--max-batch", "2"];
    const start = async () => {
      const p = await ServerProcess.spawn(args, undefined, "tiny-chat");
      processes.push(p);
      const state = await p.waitHealthy();
      if (state !== "healthy") throw new Error(`the server did not come up (${state}); stderr:\n${p.stderr}`);
      return { p, client: new OpenAI({ baseURL: `${p.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 }) };
    };
    const first = await start();
    const input = await uploadLines(first.client, longLines());
    const batchId = (
      await first.client.batches.create({ input_file_id: input, endpoint: CHAT, completion_window: "24h" })
    ).id;
    // The batch runs from its own copy of the input (docs/api/batches.md#durability).
    await first.client.files.delete(input);
    await waitBatch(first.client, batchId, (b) => b.request_counts!.completed >= 1 || ended(b));
    await first.p.killHard();
    const before = recorded(sessions, batchId);
    expect(before.size).toBeGreaterThanOrEqual(1);
    expect(before.size).toBeLessThan(LINES);
    expect(status(sessions, batchId)).toBe("in_progress");

    const second = await start();
    try {
      await checkResumed(second.client, batchId, before);
    } finally {
      second.p.proc.kill("SIGTERM");
      await second.p.proc.exited;
    }
  });
});
