// The fit check (docs/cli.md#several-models): before a model loads, its
// weights plus its KV for the window it would get are compared with the free
// memory, and a model that does not fit is refused naming both figures: at
// startup (exit 1), on demand (507 insufficient_memory). The fixture's
// metadata claims a KV of 64 MiB a token (it is never loaded, so it needs no
// real tensors).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkFit, kvBytesPerToken } from "../../src/daemon/fit-check.ts";
import { readGguf, writeGgufFile } from "../../src/gguf/index.ts";
import { fixturePath } from "../support/models.ts";
import { chat, getJson, listed, send, startMulti, useMulti } from "./models-support.ts";

const dir = mkdtempSync(join(tmpdir(), "superfluid-fit-"));
const HUGE = join(dir, "huge-kv.gguf");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

beforeAll(async () => {
  await writeGgufFile(
    {
      metadata: [
        ["general.architecture", "llama"],
        ["general.name", "huge-kv"],
        ["llama.context_length", 1 << 20],
        ["llama.embedding_length", 64],
        ["llama.block_count", 2],
        ["llama.attention.head_count", 1],
        ["llama.attention.head_count_kv", 1],
        ["llama.attention.key_length", 1 << 24],
        ["llama.attention.value_length", 1 << 24],
      ],
      tensors: [],
    },
    HUGE,
  );
});

const s = useMulti(async () => [await fixturePath("tiny-chat"), "--max-batch", "2", "--max-context", "1024"]);

describe("the fit check", () => {
  test("KV bytes a token from the metadata match the worker's own figure", async () => {
    const file = await readGguf(HUGE);
    expect(kvBytesPerToken(file)).toBe(2 * 1 * (2 << 24) * 2);
    const tiny = await readGguf(await fixturePath("tiny-chat"));
    // The built-in model's KV takes 128 bytes a token (README, /props kv_cache.bytes_per_token).
    expect(kvBytesPerToken(tiny)).toBe((await getJson(s, "/props")).json.kv_cache.bytes_per_token);
  });

  test("auto sizing still needs one window of min(trained, 4096) tokens: far more than any machine has", async () => {
    const file = await readGguf(HUGE);
    expect(() => checkFit("huge-kv", HUGE, file, 1 << 20, { lanes: 2 })).toThrow(
      /does not fit in memory: it needs .* \(weights .* \+ KV .* for 4096 tokens at 128 MiB a token\) but .* of (host|device) memory is free/,
    );
  });

  test("on demand: POST /v1/models/load is 507 insufficient_memory naming both figures; nothing is loaded", async () => {
    const r = await send(s, "POST", "/v1/models/load", { id: HUGE });
    expect(r.status).toBe(507);
    expect(r.json.error.code).toBe("insufficient_memory");
    expect(r.json.error.message).toMatch(
      /needs \d+(\.\d+)? [KMGT]iB .*but \d+(\.\d+)? [KMGT]iB of (host|device) memory is free/,
    );
    expect((await listed(s, "huge-kv")).loaded).toBe(false);
    expect((await getJson(s, "/health")).json.models_loaded).toBe(1);
    // A request naming it is told the same (after the 503 that started the load).
    const asked = await chat(s, "huge-kv");
    expect(asked.status).toBe(507);
    expect(asked.json.error.code).toBe("insufficient_memory");
    // The server is undisturbed.
    expect((await chat(s, (await getJson(s, "/props")).json.model_alias)).status).toBe(200);
  });

  test("at startup: the start fails with the message (the CLI exits 1 with it)", async () => {
    const sessions = mkdtempSync(join(tmpdir(), "superfluid-fit-start-"));
    try {
      await expect(startMulti([HUGE, "--max-batch", "2"], sessions)).rejects.toThrow(/does not fit in memory/);
      const cli = Bun.spawn(
        [
          process.execPath,
          `${import.meta.dir}/../../src/main.ts`,
          "serve",
          HUGE,
          "--port",
          "0",
          "--threads",
          "1",
          "--sessions",
          sessions,
        ],
        {
          stdout: "ignore",
          stderr: "pipe",
        },
      );
      const timer = setTimeout(() => cli.kill("SIGKILL"), 60_000);
      const code = await cli.exited;
      clearTimeout(timer);
      expect(code).toBe(1);
      expect(await new Response(cli.stderr).text()).toMatch(
        /model 'huge-kv' does not fit in memory: it needs .* but .* free/,
      );
    } finally {
      rmSync(sessions, { recursive: true, force: true });
    }
  });
});
