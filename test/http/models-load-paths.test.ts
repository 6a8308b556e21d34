// POST /v1/models/load given odd paths (docs/api/openai.md#loading-and-unloading-models):
// whatever a client names (the root folder, /proc, a folder it may not read,
// a path with NUL, a very long one, a symlink loop, a FIFO, a device), the
// answer is a 4xx in OpenAI's envelope (or, for a folder that does hold a
// GGUF, the model), never a 500, never a hang on a FIFO, and its message maps
// none of the server's folders.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fixturePath } from "../support/models.ts";
import { CHAT_ID, send, useMulti } from "./models-support.ts";

const s = useMulti(async () => [await fixturePath("tiny-chat"), "--max-context", "1024"]);

let dir = "";

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "superfluid-load-paths-"));
  mkdirSync(join(dir, "empty"));
  mkdirSync(join(dir, "closed"), { mode: 0o000 });
  writeFileSync(join(dir, "notes.txt"), "not a model");
  symlinkSync(join(dir, "loop-b"), join(dir, "loop-a"));
  symlinkSync(join(dir, "loop-a"), join(dir, "loop-b"));
  execFileSync("mkfifo", [join(dir, "pipe.gguf")]);
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * The load's answer: never a 5xx, always OpenAI's envelope when refused, and no folder of the server's in its message.
 */
async function load(id: string): Promise<{ status: number; json: any }> {
  const r = await send(s, "POST", "/v1/models/load", { id });
  expect(r.status).toBeLessThan(500);
  if (r.status !== 200) {
    expect(typeof r.json.error.message).toBe("string");
    expect(typeof r.json.error.type).toBe("string");
    // What the client sent may come back; nothing else with a folder in it.
    const told = (r.json.error.message as string).replace(JSON.stringify(id).slice(1, -1).slice(0, 200), "<id>");
    expect(told).not.toContain(dir);
    expect(told).not.toContain(process.cwd());
    expect(told).not.toMatch(/\/(proc|root|tmp|home|work)\b/);
  }
  return r;
}

/** A folder that happens to hold a GGUF loads it; unload it again so the server stays as it was. */
async function loadedOrMissing(id: string): Promise<void> {
  const r = await load(id);
  expect([200, 404]).toContain(r.status);
  if (r.status === 404) expect(r.json.error.code).toBe("model_not_found");
  else expect((await send(s, "POST", "/v1/models/unload", { id: r.json.id })).status).toBe(200);
}

describe("POST /v1/models/load with odd paths", () => {
  test("folders the server cannot walk whole (/, /proc, ., ..) are a 404 or the GGUF they hold, never a 500", async () => {
    for (const id of ["/", "/proc", ".", ".."]) await loadedOrMissing(id);
  });

  test("a folder with no GGUF, one nobody may read, a missing file: 404 model_not_found", async () => {
    for (const id of [join(dir, "empty"), join(dir, "closed"), join(dir, "missing.gguf")]) {
      const r = await load(id);
      expect(r.status).toBe(404);
      expect(r.json.error.code).toBe("model_not_found");
    }
  });

  test("a path with NUL, a very long path, a symlink loop: 404 model_not_found", async () => {
    for (const id of [
      `${dir}/a\u0000b.gguf`,
      `${dir}/${"x".repeat(5000)}.gguf`,
      `/${"d/".repeat(3000)}`,
      join(dir, "loop-a"),
    ]) {
      const r = await load(id);
      expect(r.status).toBe(404);
      expect(r.json.error.code).toBe("model_not_found");
    }
  });

  test("a FIFO and a device are not opened (a read would block or never end): 400 unsupported_runtime", async () => {
    for (const id of [join(dir, "pipe.gguf"), "/dev/zero", "/dev/null"]) {
      const r = await load(id);
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe("unsupported_runtime");
    }
  });

  test("a file that is not GGUF: 400 unsupported_runtime naming only its file name", async () => {
    const r = await load(join(dir, "notes.txt"));
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe("unsupported_runtime");
    expect(r.json.error.message).toContain("notes.txt");
  });

  test("the server still serves its model afterwards", async () => {
    const r = await send(s, "POST", "/v1/chat/completions", {
      model: CHAT_ID,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
    });
    expect(r.status).toBe(200);
    expect(s.server.registry.default!.id).toBe(CHAT_ID);
  });
});
