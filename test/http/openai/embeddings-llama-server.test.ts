// /v1/embeddings against llama.cpp's own llama-server (--embeddings) on the
// same fixture file and inputs: every vector within cosine 0.9999 of
// llama-server's, and the same token counts. Needs ../shared/anchors (the
// llama-server binary); skips without it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { HAVE_LLAMA_SERVER, startLlamaServer, type LlamaServer } from "../../support/llama-server.ts";
import { fixturePath } from "../../support/models.ts";
import { postJson, startTestServer, type TestServer } from "../support.ts";

const norm = (v: number[]) => Math.sqrt(v.reduce((sum, x) => sum + x * x, 0));
const cos = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0) / (norm(a) * norm(b));

const INPUTS: (string | number[])[] = [
  "hello world",
  "The quick brown fox jumps over the lazy dog.",
  "a",
  "superfluid serves embeddings batched into one decode, as llama-server does with its slots",
  "word ".repeat(120).trim(),
  [5, 6, 7, 8, 9, 10],
];

describe.skipIf(!HAVE_LLAMA_SERVER)("embeddings equal llama-server's", () => {
  let llama: LlamaServer | undefined;
  let s: TestServer;

  beforeAll(async () => {
    llama = await startLlamaServer(["-m", await fixturePath("tiny-embed"), "--embeddings", "-t", "1", "-c", "4096"]);
    s = await startTestServer({ fixture: "tiny-embed", maxContext: 512 });
  });

  afterAll(async () => {
    await llama?.stop();
    await s?.server.close();
  });

  test("each vector within cosine 0.9999, the same token counts", async () => {
    const ours = await postJson(s, "/v1/embeddings", { model: s.model, input: INPUTS });
    expect(ours.status).toBe(200);
    const res = await fetch(`${llama!.url}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input: INPUTS }),
    });
    expect(res.status).toBe(200);
    const theirs = (await res.json()) as any;
    expect(ours.json.data).toHaveLength(INPUTS.length);
    expect(theirs.data).toHaveLength(INPUTS.length);
    for (let i = 0; i < INPUTS.length; i++) {
      const a = ours.json.data[i].embedding as number[];
      const b = theirs.data.find((d: any) => d.index === i).embedding as number[];
      expect(a).toHaveLength(b.length);
      expect(cos(a, b)).toBeGreaterThanOrEqual(0.9999);
      // Both scale to unit length.
      expect(norm(a)).toBeCloseTo(norm(b), 5);
    }
    expect(ours.json.usage.prompt_tokens).toBe(theirs.usage.prompt_tokens);
  });

  test("one input at a time too", async () => {
    for (const input of INPUTS.slice(0, 3)) {
      const ours = await postJson(s, "/v1/embeddings", { model: s.model, input });
      const theirs = (await (
        await fetch(`${llama!.url}/v1/embeddings`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ input }),
        })
      ).json()) as any;
      expect(cos(ours.json.data[0].embedding, theirs.data[0].embedding)).toBeGreaterThanOrEqual(0.9999);
    }
  });
});
