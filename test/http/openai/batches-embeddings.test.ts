// Batches of embeddings (docs/api/batches.md#embedding-lines): a server with
// a chat model (the default) and an embedding model, `/v1/embeddings` lines
// run on the model each names, their output bodies the embedding lists
// /v1/embeddings itself answers for the same bodies; a line naming the chat
// model fails alone; an endpoint not served is refused.
import { describe, expect, test } from "bun:test";
import OpenAI, { APIError } from "openai";
import { servedIdOfPath } from "../../../src/daemon/model-ref.ts";
import { fixtureFileName } from "../../../src/fixtures/index.ts";
import { fixturePath } from "../../support/models.ts";
import { ended, fileLines, uploadLines, waitBatch } from "./batches-support.ts";
import { CHAT_ID, send, useMulti } from "../models-support.ts";

const EMBED_ID = servedIdOfPath(fixtureFileName("tiny-embed"));
const EMBEDDINGS = "/v1/embeddings";

const s = useMulti(async () => [
  await fixturePath("tiny-chat"),
  "--model",
  await fixturePath("tiny-embed"),
  "--max-batch",
  "2",
  "--max-context",
  "512",
  "--alias",
  `embedder=${EMBED_ID}`,
]);
const client = () => new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });

const embedLine = (customId: string, body: Record<string, unknown>) => ({
  custom_id: customId,
  method: "POST",
  url: EMBEDDINGS,
  body,
});

/** Ten bodies: every input form, both encodings, `dimensions`, the model by id and by alias. */
const BODIES: Record<string, unknown>[] = [
  { model: "embedder", input: "hello world" },
  { model: EMBED_ID, input: ["the cat sat on the mat", "a b c"] },
  { model: EMBED_ID, input: "superfluid serves embeddings", encoding_format: "base64" },
  { model: EMBED_ID, input: [1, 2, 3, 4] },
  { model: EMBED_ID, input: [[5, 6], "mixed with text"] },
  { model: EMBED_ID, input: "shortened", dimensions: 16 },
  { model: "embedder", input: ["one", "two three", "four five six"] },
  { model: EMBED_ID, input: "seven", encoding_format: "float" },
  { model: EMBED_ID, input: "eight nine ten eleven twelve" },
  { model: EMBED_ID, input: ["x"], user: "batch" },
];

describe("an embeddings batch", () => {
  test("10 lines run to completed on the model each names; each output body is what /v1/embeddings answers for it", async () => {
    const c = client();
    const ids = BODIES.map((_, i) => `embed-${i}`);
    const input = await uploadLines(
      c,
      BODIES.map((body, i) => embedLine(ids[i]!, body)),
    );
    const created = await c.batches.create({ input_file_id: input, endpoint: EMBEDDINGS, completion_window: "24h" });
    expect(created.endpoint).toBe(EMBEDDINGS);
    // The model the first line names (an alias), as its served id: not the default chat model.
    expect(created.model).toBe(EMBED_ID);
    const done = await waitBatch(c, created.id, ended);
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ total: 10, completed: 10, failed: 0 });
    expect(done.error_file_id).toBeNull();

    const out = await fileLines(c, done.output_file_id!);
    expect(out.map((l) => l.custom_id)).toEqual(ids);
    let promptTokens = 0;
    for (const [i, l] of out.entries()) {
      expect(l.error).toBeNull();
      expect(l.response.status_code).toBe(200);
      const direct = await send(s, "POST", EMBEDDINGS, BODIES[i]);
      expect(direct.status).toBe(200);
      expect(l.response.body.object).toBe("list");
      expect(l.response.body.model).toBe(EMBED_ID);
      expect(l.response.body).toEqual(direct.json);
      promptTokens += direct.json.usage.prompt_tokens;
    }
    // Embeddings have input tokens only.
    expect(done.usage).toMatchObject({ input_tokens: promptTokens, output_tokens: 0, total_tokens: promptTokens });
  });

  test("a line naming the default chat model fails with unsupported_model, one naming no served model with a 404; the others run", async () => {
    const c = client();
    const input = await uploadLines(c, [
      embedLine("chat-model", { model: CHAT_ID, input: "hello" }),
      embedLine("unknown-model", { model: "no-such-model", input: "hello" }),
      embedLine("no-input", { model: EMBED_ID }),
      embedLine("good", { model: EMBED_ID, input: "hello" }),
    ]);
    const b = await waitBatch(
      c,
      (await c.batches.create({ input_file_id: input, endpoint: EMBEDDINGS, completion_window: "24h" })).id,
      ended,
    );
    expect(b.status).toBe("completed");
    // The first line's model, though it cannot embed.
    expect(b.model).toBe(CHAT_ID);
    expect(b.request_counts).toEqual({ total: 4, completed: 1, failed: 3 });
    expect((await fileLines(c, b.output_file_id!)).map((l) => l.custom_id)).toEqual(["good"]);
    const errors = await fileLines(c, b.error_file_id!);
    expect(errors.map((l) => [l.custom_id, l.response.status_code, l.response.body.error.param, l.error.code])).toEqual(
      [
        ["chat-model", 400, "model", "unsupported_model"],
        ["unknown-model", 404, "model", "not_found_error"],
        ["no-input", 400, "input", "invalid_request_error"],
      ],
    );
  });

  test("a chat batch on the same server still runs on the default chat model", async () => {
    const c = client();
    const input = await uploadLines(c, [
      {
        custom_id: "chat",
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: EMBED_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 16 },
      },
    ]);
    const b = await waitBatch(
      c,
      (await c.batches.create({ input_file_id: input, endpoint: "/v1/chat/completions", completion_window: "24h" })).id,
      ended,
    );
    expect(b.model).toBe(CHAT_ID);
    expect(b.request_counts).toEqual({ total: 1, completed: 1, failed: 0 });
    const [line] = await fileLines(c, b.output_file_id!);
    expect(line.response.body.model).toBe(CHAT_ID);
  });

  test("an embeddings line in a chat batch is a url_mismatch; an endpoint not served is a 400 unsupported_endpoint", async () => {
    const c = client();
    const input = await uploadLines(c, [embedLine("e", { model: EMBED_ID, input: "x" })]);
    const b = await waitBatch(
      c,
      (await c.batches.create({ input_file_id: input, endpoint: "/v1/chat/completions", completion_window: "24h" })).id,
      ended,
    );
    expect(b.status).toBe("failed");
    expect(b.errors!.data!.map((e) => [e.code, e.line])).toEqual([["url_mismatch", 1]]);
    try {
      await c.batches.create({
        input_file_id: input,
        endpoint: "/v1/completions" as typeof EMBEDDINGS,
        completion_window: "24h",
      });
      throw new Error("the batch was created");
    } catch (err) {
      if (!(err instanceof APIError)) throw err;
      expect(err.status).toBe(400);
      expect((err.error as { code?: string; param?: string }).code).toBe("unsupported_endpoint");
      expect((err.error as { code?: string; param?: string }).param).toBe("endpoint");
    }
  });
});
