// --model-dir (docs/cli.md#several-models): every GGUF under the folder is
// known at startup and listed (/v1/models, /health, Ollama's /api/tags and
// /api/show) without a worker being started for it; the first request naming
// it loads it. --idle-timeout then unloads it again, never the default model.
import { describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "bun:test";
import { fixtureFileName } from "../../src/fixtures/index.ts";
import { fixturePath } from "../support/models.ts";
import { CHAT_ID, RANDOM_ID, chat, getJson, listed, loadsOf, send, until, useMulti } from "./models-support.ts";

const dir = mkdtempSync(join(tmpdir(), "superfluid-model-dir-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const s = useMulti(async () => {
  mkdirSync(join(dir, "nested"), { recursive: true });
  copyFileSync(await fixturePath("tiny-random"), join(dir, "nested", fixtureFileName("tiny-random")));
  // Same stem as the model named on the command line: registered under its full file name.
  copyFileSync(await fixturePath("tiny-chat"), join(dir, fixtureFileName("tiny-chat")));
  writeFileSync(join(dir, "broken.gguf"), "not a gguf file");
  return [await fixturePath("tiny-chat"), "--model-dir", dir, "--max-batch", "2", "--idle-timeout", "1"];
});

describe("--model-dir", () => {
  test("its models are known, listed not loaded, and no worker was started for them", async () => {
    expect((await getJson(s, "/health")).json).toEqual({ status: "ok", models_loaded: 1, models_known: 3 });
    const random = await listed(s, RANDOM_ID);
    expect(random).toMatchObject({ id: RANDOM_ID, loaded: false, meta: { n_ctx: null } });
    expect(random.meta.n_ctx_train).toBeGreaterThan(0);
    const dup = await listed(s, fixtureFileName("tiny-chat"));
    expect(dup.loaded).toBe(false);
    expect(s.lines.some((l) => l.includes("is registered as") && l.includes(fixtureFileName("tiny-chat")))).toBe(true);
    expect(s.lines.some((l) => l.includes("skipping broken.gguf"))).toBe(true);
    expect(s.server.registry.all().map((m) => m.id)).toEqual([CHAT_ID]);
    expect(loadsOf(s, RANDOM_ID)).toBe(0);
    // Several models may be loaded: a fixed window without --max-context.
    expect((await listed(s, CHAT_ID)).meta.n_ctx).toBe(8192);
  });

  test("Ollama's /api/tags and /api/show describe it without loading it; /api/ps does not list it", async () => {
    const tags = (await getJson(s, "/api/tags")).json.models;
    const entry = tags.find((t: any) => t.name === `${RANDOM_ID}:latest`);
    expect(entry.size).toBeGreaterThan(0);
    expect(entry.details.format).toBe("gguf");
    const show = await send(s, "POST", "/api/show", { model: RANDOM_ID });
    expect(show.status).toBe(200);
    expect(show.json.capabilities).toContain("completion");
    expect((await getJson(s, "/api/ps")).json.models.map((m: any) => m.name)).toEqual([`${CHAT_ID}:latest`]);
    expect((await getJson(s, `/v1/models/${RANDOM_ID}`)).json.loaded).toBe(false);
    expect((await getJson(s, "/health")).json.models_loaded).toBe(1);
    expect(loadsOf(s, RANDOM_ID)).toBe(0);
  });

  test("the first request naming it loads it, in a worker of its own", async () => {
    const r = await chat(s, RANDOM_ID);
    expect(r.status).toBe(200);
    expect(r.json.model).toBe(RANDOM_ID);
    expect(loadsOf(s, RANDOM_ID)).toBe(1);
    expect((await getJson(s, "/health")).json.models_loaded).toBe(2);
  });

  test("--idle-timeout unloads it once unused; the default model stays; a request loads it again", async () => {
    // Wait for the event (hang guard only): the idle check unloads it.
    expect(await until(async () => (await listed(s, RANDOM_ID)).loaded === false)).toBe(true);
    expect(s.lines.some((l) => l.includes(`unloading ${RANDOM_ID}: idle`))).toBe(true);
    expect((await listed(s, CHAT_ID)).loaded).toBe(true);
    expect((await getJson(s, "/health")).json).toMatchObject({ models_loaded: 1, models_known: 3 });
    const again = await chat(s, RANDOM_ID);
    expect(again.status).toBe(200);
    expect(loadsOf(s, RANDOM_ID)).toBe(2);
    // The default model is never unloaded for idleness, however long it waits.
    expect(s.lines.some((l) => l.includes(`unloading ${CHAT_ID}`))).toBe(false);
  });
});
