// The Batches API (docs/api/batches.md) through the official openai client:
// a batch's life from upload to output file, validation errors as OpenAI
// reports them, the route's refusals, and cancelling mid-batch.
import { describe, expect, spyOn, test } from "bun:test";
import { APIError } from "openai";
import { rmSync } from "node:fs";
import { BatchState } from "../../../src/batches/state.ts";
import { envelope, slots, startTestServer, useServer } from "../support.ts";
import { CHAT, chatLine, ended, fileLines, uploadLines, waitBatch } from "./batches-support.ts";

// A window above the 2048-token default cap, so an uncapped line reaches it.
const s = useServer({ fixture: "tiny-chat", maxContext: 4096 });

const SENTENCE = "Hello from superfluid's built-in test model.";

/** The status and envelope of a refused call. */
async function refusal(call: Promise<unknown>): Promise<{ status: number; error: ReturnType<typeof envelope> }> {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof APIError)) throw err;
    return { status: err.status!, error: envelope({ error: err.error }) };
  }
  throw new Error("the call was not refused");
}

describe("a batch from upload to output", () => {
  test("20 lines run to completed; the output file has each custom_id once, in order, each a chat.completion on the served model", async () => {
    const ids = Array.from({ length: 20 }, (_, i) => `line-${i}`);
    const input = await uploadLines(
      s.client,
      ids.map((id) => chatLine(id, { max_tokens: 32 })),
    );
    const created = await s.client.batches.create({
      input_file_id: input,
      endpoint: CHAT,
      completion_window: "24h",
      metadata: { job: "test" },
    });
    expect(created.object).toBe("batch");
    expect(created.id).toMatch(/^batch_/);
    expect(["validating", "in_progress"]).toContain(created.status);
    expect(created.request_counts).toEqual({ total: 20, completed: 0, failed: 0 });
    expect(created.metadata).toEqual({ job: "test" });
    expect(created.expires_at! - created.created_at).toBe(24 * 3600);

    const done = await waitBatch(s.client, created.id, ended);
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ total: 20, completed: 20, failed: 0 });
    expect(done.error_file_id).toBeNull();
    expect(done.model).toBe(s.model);
    for (const at of [done.in_progress_at, done.finalizing_at, done.completed_at])
      expect(at).toBeGreaterThanOrEqual(done.created_at);
    expect(done.usage!.output_tokens).toBe(20 * 9);
    expect(done.usage!.total_tokens).toBe(done.usage!.input_tokens + done.usage!.output_tokens);

    const meta = await s.client.files.retrieve(done.output_file_id!);
    expect(meta.purpose).toBe("batch_output");
    const out = await fileLines(s.client, done.output_file_id!);
    expect(out.map((l) => l.custom_id)).toEqual(ids);
    for (const l of out) {
      expect(l.id).toMatch(/^batch_req_/);
      expect(l.error).toBeNull();
      expect(l.response.status_code).toBe(200);
      expect(l.response.request_id).toMatch(/^req_/);
      expect(l.response.body.object).toBe("chat.completion");
      expect(l.response.body.model).toBe(s.model); // the line named "any-model"
      expect(l.response.body.choices[0].message.content).toBe(SENTENCE);
    }
    expect(new Set(out.map((l) => l.id)).size).toBe(20);
  });

  test("lines that fail go to the error file; a line without max_tokens stops at 2048 tokens", async () => {
    const input = await uploadLines(s.client, [
      chatLine("streamed", { stream: true }),
      { custom_id: "no-messages", method: "POST", url: CHAT, body: { model: "m" } },
      chatLine("uncapped", { ignore_eos: true }),
      chatLine("capped", { ignore_eos: true, max_completion_tokens: 5 }),
    ]);
    const b = await waitBatch(
      s.client,
      (await s.client.batches.create({ input_file_id: input, endpoint: CHAT, completion_window: "24h" })).id,
      ended,
    );
    expect(b.status).toBe("completed");
    expect(b.request_counts).toEqual({ total: 4, completed: 2, failed: 2 });
    const out = await fileLines(s.client, b.output_file_id!);
    expect(out.map((l) => l.custom_id)).toEqual(["uncapped", "capped"]);
    expect(out[0].response.body.usage.completion_tokens).toBe(2048);
    expect(out[0].response.body.choices[0].finish_reason).toBe("length");
    expect(out[1].response.body.usage.completion_tokens).toBe(5);
    const errors = await fileLines(s.client, b.error_file_id!);
    expect(errors.map((l) => l.custom_id)).toEqual(["streamed", "no-messages"]);
    for (const l of errors) {
      expect(l.response.status_code).toBe(400);
      expect(envelope(l.response.body).param).toBe(l.custom_id === "streamed" ? "stream" : "messages");
      expect(l.error.message).toBe(l.response.body.error.message);
      expect(typeof l.error.code).toBe("string");
    }
  });

  test("GET /v1/batches lists newest first, with limit and after", async () => {
    const page = await s.client.batches.list({ limit: 1 });
    expect(page.data).toHaveLength(1);
    expect(page.has_more).toBe(true);
    const next = await s.client.batches.list({ limit: 100, after: page.data[0]!.id });
    expect(next.data.length).toBeGreaterThanOrEqual(1);
    const all = [page.data[0]!, ...next.data];
    expect(all.map((b) => b.created_at)).toEqual([...all.map((b) => b.created_at)].sort((a, b) => b - a));
    expect(new Set(all.map((b) => b.id)).size).toBe(all.length);
  });
});

describe("the operator's flags", () => {
  test("lines run on the model's sampling defaults and the 2048 cap, not --temperature and --max-tokens; interactive requests keep them", async () => {
    const t = await startTestServer({
      fixture: "tiny-chat",
      maxContext: 4096,
      extraArgs: ["--temperature", "1.3", "--max-tokens", "7"],
    });
    try {
      const sessions = t.server.sessions;
      const params = () =>
        (
          sessions.read(sessions.lastSession)[0]!.body as unknown as {
            Created: { params: { max_tokens: number; sampling: { temperature: number } } };
          }
        ).Created.params;
      const input = await uploadLines(t.client, [chatLine("only")]);
      const b = await waitBatch(
        t.client,
        (await t.client.batches.create({ input_file_id: input, endpoint: CHAT, completion_window: "24h" })).id,
        ended,
      );
      expect(b.status).toBe("completed");
      const line = params();
      expect(line.max_tokens).toBe(2048);
      expect(line.sampling.temperature).toBe(t.server.registry.default!.info.sampling.temperature ?? 1.0);
      expect(line.sampling.temperature).not.toBe(1.3);
      await t.client.chat.completions.create({ model: t.model, messages: [{ role: "user", content: "hi" }] });
      const chat = params();
      expect(chat.max_tokens).toBe(7);
      expect(chat.sampling.temperature).toBe(1.3);
    } finally {
      await t.server.close();
      rmSync(t.sessions, { recursive: true, force: true });
    }
  });
});

describe("input files that fail validation", () => {
  test("a duplicate custom_id, a wrong url, a line that is not JSON, a GET: the batch fails with every problem and its line", async () => {
    const input = await uploadLines(s.client, [
      chatLine("a"),
      chatLine("a"),
      { ...chatLine("b"), url: "/v1/completions" },
      "{not json",
      { ...chatLine("c"), method: "GET" },
      { custom_id: "d", method: "POST", url: CHAT, body: "hello" },
      { method: "POST", url: CHAT, body: {} },
    ]);
    const created = await s.client.batches.create({ input_file_id: input, endpoint: CHAT, completion_window: "24h" });
    const b = await waitBatch(s.client, created.id, ended);
    expect(b.status).toBe("failed");
    expect(b.failed_at).toBeGreaterThanOrEqual(b.created_at);
    expect(b.errors!.object).toBe("list");
    expect(b.errors!.data!.map((e) => [e.code, e.line, e.param])).toEqual([
      ["duplicate_custom_id", 2, "custom_id"],
      ["url_mismatch", 3, "url"],
      ["invalid_json_line", 4, null],
      ["invalid_method", 5, "method"],
      ["invalid_body", 6, "body"],
      ["missing_required_parameter", 7, "custom_id"],
    ]);
    for (const e of b.errors!.data!) expect(e.message!.length).toBeGreaterThan(0);
    expect(b.output_file_id).toBeNull();
  });

  test("an empty file fails with empty_file", async () => {
    const input = await uploadLines(s.client, [""]);
    const b = await waitBatch(
      s.client,
      (await s.client.batches.create({ input_file_id: input, endpoint: CHAT, completion_window: "24h" })).id,
      ended,
    );
    expect(b.status).toBe("failed");
    expect(b.errors!.data![0]!.code).toBe("empty_file");
  });
});

describe("refused requests", () => {
  test("an unknown input file is a 404 naming input_file_id", async () => {
    const r = await refusal(
      s.client.batches.create({ input_file_id: "file-0000", endpoint: CHAT, completion_window: "24h" }),
    );
    expect(r.status).toBe(404);
    expect(r.error.param).toBe("input_file_id");
  });

  test("an endpoint batches do not run is a 400; another window is a 400; so is a missing input_file_id", async () => {
    const input = await uploadLines(s.client, [chatLine("x")]);
    const endpoint = await refusal(
      s.client.batches.create({ input_file_id: input, endpoint: "/v1/completions", completion_window: "24h" }),
    );
    expect(endpoint.status).toBe(400);
    expect(endpoint.error.code).toBe("unsupported_endpoint");
    expect(endpoint.error.param).toBe("endpoint");
    expect(endpoint.error.message).toContain("/v1/embeddings");
    const window = await refusal(
      s.client.batches.create({ input_file_id: input, endpoint: CHAT, completion_window: "48h" as "24h" }),
    );
    expect(window.status).toBe(400);
    expect(window.error.param).toBe("completion_window");
    const missing = await refusal(s.client.batches.create({ endpoint: CHAT, completion_window: "24h" } as never));
    expect(missing.status).toBe(400);
    expect(missing.error.param).toBe("input_file_id");
  });

  test("a batch that cannot be written to disk is not created: a 500 in OpenAI's envelope, and nothing listed", async () => {
    const input = await uploadLines(s.client, [chatLine("unsaved")]);
    const listed = (await s.client.batches.list({ limit: 100 })).data.length;
    const save = spyOn(BatchState.prototype, "save").mockImplementation(() => {
      throw new Error("ENOSPC: no space left on device");
    });
    let r: Awaited<ReturnType<typeof refusal>>;
    try {
      r = await refusal(s.client.batches.create({ input_file_id: input, endpoint: CHAT, completion_window: "24h" }));
    } finally {
      save.mockRestore();
    }
    expect(r.status).toBe(500);
    expect(r.error.type).toBe("server_error");
    expect(r.error.code).toBe("batch_not_saved");
    expect((await s.client.batches.list({ limit: 100 })).data.length).toBe(listed);
  });

  test("an unknown batch is a 404 to retrieve and to cancel", async () => {
    expect((await refusal(s.client.batches.retrieve("batch_00"))).status).toBe(404);
    expect((await refusal(s.client.batches.cancel("batch_00"))).status).toBe(404);
  });
});

describe("cancelling", () => {
  test("a batch cancelled mid-line stops there: cancelling, then cancelled with what ran in its output file", async () => {
    // Long enough that the cancel lands while lines remain, however fast they run.
    const total = 40;
    const input = await uploadLines(
      s.client,
      Array.from({ length: total }, (_, i) => chatLine(`long-${i}`, { ignore_eos: true, max_tokens: 3000 })),
    );
    const created = await s.client.batches.create({ input_file_id: input, endpoint: CHAT, completion_window: "24h" });
    await waitBatch(s.client, created.id, (b) => b.request_counts!.completed >= 1 || ended(b));
    // Its lines hold one lane at a time, in the background class.
    let lanes = (await slots(s)).lanes;
    for (
      const started = performance.now();
      lanes.per_class.background === 0 && performance.now() - started < 60_000;
      lanes = (await slots(s)).lanes
    )
      await Bun.sleep(5);
    expect(lanes.per_class).toEqual({ interactive: 0, completion: 0, agent: 0, background: 1 });
    const cancelling = await s.client.batches.cancel(created.id);
    expect(["cancelling", "cancelled"]).toContain(cancelling.status);
    expect(cancelling.cancelling_at).toBeGreaterThanOrEqual(created.created_at);
    const b = await waitBatch(s.client, created.id, ended);
    expect(b.status).toBe("cancelled");
    expect(b.cancelled_at).toBeGreaterThanOrEqual(b.cancelling_at!);
    const ran = b.request_counts!.completed;
    expect(ran).toBeGreaterThanOrEqual(1);
    expect(ran).toBeLessThan(total);
    const out = await fileLines(s.client, b.output_file_id!);
    expect(out.map((l) => l.custom_id)).toEqual(Array.from({ length: ran }, (_, i) => `long-${i}`));
    for (const l of out) expect(l.response.body.usage.completion_tokens).toBe(3000);
    // Cancelling again answers the batch as it is; a finished batch cannot be cancelled.
    expect((await s.client.batches.cancel(created.id)).status).toBe("cancelled");
  });

  test("a completed batch is not cancellable (409)", async () => {
    const input = await uploadLines(s.client, [chatLine("one", { max_tokens: 4 })]);
    const b = await waitBatch(
      s.client,
      (await s.client.batches.create({ input_file_id: input, endpoint: CHAT, completion_window: "24h" })).id,
      ended,
    );
    expect(b.status).toBe("completed");
    const r = await refusal(s.client.batches.cancel(b.id));
    expect(r.status).toBe(409);
    expect(r.error.code).toBe("batch_not_cancellable");
  });
});
