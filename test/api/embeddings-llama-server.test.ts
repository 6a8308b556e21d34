// /v1/embeddings against llama.cpp's own llama-server (--embeddings) on the
// same fixture file and inputs: every vector within cosine 0.9999 of
// llama-server's, and the same token counts. Needs ../shared/anchors (the
// llama-server binary); skips without it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { fixturePath } from "../support/models.ts";
import { postJson, startTestServer, type TestServer } from "./support.ts";

const LLAMA_DIR = join(import.meta.dir, "../../../shared/anchors/llama.cpp");
const HAVE_LLAMA = existsSync(join(LLAMA_DIR, "llama-server"));

function freePort(): Promise<number> {
  return new Promise((done, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => done(port));
    });
  });
}

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

describe.skipIf(!HAVE_LLAMA)("embeddings equal llama-server's", () => {
  let llama: ChildProcess | undefined;
  let llamaUrl = "";
  let s: TestServer;

  beforeAll(async () => {
    const model = await fixturePath("tiny-embed");
    const port = await freePort();
    llama = spawn(join(LLAMA_DIR, "llama-server"), ["-m", model, "--embeddings", "-t", "1", "-c", "4096", "--host", "127.0.0.1", "--port", String(port)], {
      env: { ...process.env, LD_LIBRARY_PATH: LLAMA_DIR },
      stdio: "ignore",
    });
    llamaUrl = `http://127.0.0.1:${port}`;
    s = await startTestServer({ fixture: "tiny-embed", maxContext: 512 });
    // Ready once /health answers 200 (503 while loading); the count only stops a hung start.
    for (let i = 0; i < 600; i++) {
      const ok = await fetch(`${llamaUrl}/health`).then((r) => r.ok, () => false);
      if (ok) break;
      if (llama.exitCode !== null) throw new Error(`llama-server exited with ${llama.exitCode}`);
      await Bun.sleep(100);
    }
  });

  afterAll(async () => {
    if (llama && llama.exitCode === null) {
      const gone = new Promise((done) => llama!.once("exit", done));
      llama.kill("SIGKILL");
      await gone;
    }
    await s?.server.close();
  });

  test("each vector within cosine 0.9999, the same token counts", async () => {
    const ours = await postJson(s, "/v1/embeddings", { model: s.model, input: INPUTS });
    expect(ours.status).toBe(200);
    const res = await fetch(`${llamaUrl}/v1/embeddings`, {
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
      const theirs = (await (await fetch(`${llamaUrl}/v1/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input }) })).json()) as any;
      expect(cos(ours.json.data[0].embedding, theirs.data[0].embedding)).toBeGreaterThanOrEqual(0.9999);
    }
  });
});
