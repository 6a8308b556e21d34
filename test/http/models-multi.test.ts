// Several models in one server (docs/cli.md#several-models): two fixtures
// served at once answer by name, each in its own worker with its own
// session log; the model-admin routes load, unload and reload; /health,
// /v1/models, /props and Ollama's discovery say what is known and loaded.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseServeOptions, UsageError, type ServeOptions } from "../../src/cli/serve-options.ts";
import { props } from "../../src/http/admin.ts";
import { fixturePath } from "../support/models.ts";
import { CHAT_ID, RANDOM_ID, chat, getJson, listed, loadsOf, send, useMulti } from "./models-support.ts";

const s = useMulti(async () => [
  await fixturePath("tiny-chat"),
  "--model",
  await fixturePath("tiny-random"),
  "--max-batch",
  "2",
  "--max-context",
  "1024",
  "--alias",
  `helper=${RANDOM_ID}`,
]);

describe("two models at once", () => {
  test("each answers by name (an alias reaches its model), the first is the default", async () => {
    const a = await chat(s, CHAT_ID);
    expect(a.status).toBe(200);
    expect(a.json.model).toBe(CHAT_ID);
    expect(a.json.choices[0].message.content).toBe("Hello from superfluid's built-in test model.");
    const b = await chat(s, RANDOM_ID);
    expect(b.status).toBe(200);
    expect(b.json.model).toBe(RANDOM_ID);
    expect(b.json.choices[0].message.content).not.toBe(a.json.choices[0].message.content);
    expect((await chat(s, "helper")).json.model).toBe(RANDOM_ID);
    expect(s.server.registry.default!.id).toBe(CHAT_ID);
    // Two workers, two processes.
    const [m1, m2] = s.server.registry.all();
    expect(m1!.worker.pid).not.toBe(m2!.worker.pid);
  });

  test("each has its own session log: the first <sessions>/, the second <sessions>/models/<id>/", async () => {
    const first = readFileSync(join(s.sessions, "wal.log"), "utf8");
    const secondPath = join(s.sessions, "models", RANDOM_ID, "wal.log");
    expect(existsSync(secondPath)).toBe(true);
    const second = readFileSync(secondPath, "utf8");
    expect(first).toContain(`"model":"${CHAT_ID}"`);
    expect(first).not.toContain(`"model":"${RANDOM_ID}"`);
    expect(second).toContain(`"model":"${RANDOM_ID}"`);
    expect(second).not.toContain(`"model":"${CHAT_ID}"`);
  });

  test("/health counts models loaded and known; /v1/models lists both loaded with window, runtime, capabilities", async () => {
    expect((await getJson(s, "/health")).json).toEqual({ status: "ok", models_loaded: 2, models_known: 2 });
    for (const id of [CHAT_ID, RANDOM_ID]) {
      const m = await listed(s, id);
      expect(m.loaded).toBe(true);
      expect(m.meta.n_ctx).toBe(1024);
      expect(m.architecture.input_modalities).toEqual(["text"]);
      expect(m.runtime.id).toBe("llamacpp");
      expect(m.capabilities.dialect).toBeDefined();
      expect(typeof m.sampling_defaults).toBe("object");
    }
    expect((await listed(s, RANDOM_ID)).aliases).toEqual(["helper"]);
  });

  test("/props?model= describes the model named", async () => {
    expect((await getJson(s, "/props")).json.model_alias).toBe(CHAT_ID);
    expect((await getJson(s, `/props?model=${RANDOM_ID}`)).json.model_alias).toBe(RANDOM_ID);
    expect((await getJson(s, "/props?model=nope")).status).toBe(404);
  });
});

describe("unload, reload on demand, load", () => {
  test("POST /v1/models/unload frees the worker; the model stays known and listed as not loaded", async () => {
    const worker = s.server.registry.entry(RANDOM_ID)!.served!.worker.pid!;
    const r = await send(s, "POST", "/v1/models/unload", { id: RANDOM_ID });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ id: RANDOM_ID, loaded: false });
    expect(() => process.kill(worker, 0)).toThrow();
    expect((await getJson(s, "/health")).json).toMatchObject({ models_loaded: 1, models_known: 2 });
    const m = await listed(s, RANDOM_ID);
    expect(m.loaded).toBe(false);
    expect(m.meta.n_ctx).toBeNull();
    expect(m.runtime).toBeUndefined();
    // Ollama lists it still (tags), not as running (ps).
    const tags = (await getJson(s, "/api/tags")).json.models.map((t: any) => t.name);
    const ps = (await getJson(s, "/api/ps")).json.models.map((t: any) => t.name);
    expect(tags).toContain(`${RANDOM_ID}:latest`);
    expect(ps).not.toContain(`${RANDOM_ID}:latest`);
    expect((await send(s, "POST", "/api/show", { model: RANDOM_ID })).status).toBe(200);
    expect((await getJson(s, "/health")).json.models_loaded).toBe(1);
  });

  test("the last loaded model cannot be unloaded (400)", async () => {
    const r = await send(s, "DELETE", `/v1/models/${CHAT_ID}`);
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe("last_model");
  });

  test("/props?model= of an unloaded model is 400 model_not_loaded (as llama-server) and loads nothing", async () => {
    const r = await getJson(s, `/props?model=${RANDOM_ID}`);
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe("model_not_loaded");
    expect((await listed(s, RANDOM_ID)).loaded).toBe(false);
  });

  test("a request naming it loads it again (one load for concurrent requests), in its own session log", async () => {
    const before = loadsOf(s, RANDOM_ID);
    const replies = await Promise.all([1, 2, 3].map(() => chat(s, RANDOM_ID)));
    for (const r of replies) expect(r.status).toBe(200);
    expect(loadsOf(s, RANDOM_ID)).toBe(before + 1);
    expect((await listed(s, RANDOM_ID)).loaded).toBe(true);
    expect(s.server.registry.default!.id).toBe(CHAT_ID);
  });

  test("props with autoload loads a known model (concurrent calls share one load)", async () => {
    expect((await send(s, "DELETE", `/v1/models/${RANDOM_ID}`)).status).toBe(200);
    const before = loadsOf(s, RANDOM_ID);
    const replies = await Promise.all([1, 2, 3].map(() => props(s.server.registry, {}, RANDOM_ID, "1")));
    for (const r of replies) expect(r.model_alias).toBe(RANDOM_ID);
    expect(loadsOf(s, RANDOM_ID)).toBe(before + 1);
  });

  test("POST /v1/models/load makes a model the default and returns its object; by path too", async () => {
    const r = await send(s, "POST", "/v1/models/load", { id: RANDOM_ID });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ id: RANDOM_ID, loaded: true, object: "model" });
    expect((await getJson(s, "/props")).json.model_alias).toBe(RANDOM_ID);
    // The default moves back when the default is unloaded.
    expect((await send(s, "POST", "/v1/models/unload", { id: RANDOM_ID })).status).toBe(200);
    expect((await getJson(s, "/props")).json.model_alias).toBe(CHAT_ID);
    const byPath = await send(s, "POST", "/v1/models/load", { id: await fixturePath("tiny-random") });
    expect(byPath.status).toBe(200);
    expect(byPath.json.id).toBe(RANDOM_ID);
    expect((await getJson(s, "/props")).json.model_alias).toBe(RANDOM_ID);
  });

  test("load refusals: a missing path 404, a file that is not GGUF 400 unsupported_runtime, an empty id 400", async () => {
    const missing = await send(s, "POST", "/v1/models/load", { id: "/nonexistent/model.gguf" });
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe("model_not_found");
    const notGguf = await send(s, "POST", "/v1/models/load", { id: join(import.meta.dir, "models-support.ts") });
    expect(notGguf.status).toBe(400);
    expect(notGguf.json.error.code).toBe("unsupported_runtime");
    expect((await send(s, "POST", "/v1/models/load", { id: "" })).status).toBe(400);
    expect((await send(s, "POST", "/v1/models/unload", { id: "nope" })).status).toBe(404);
  });
});

describe("flags", () => {
  test("--model is repeatable after the bare MODEL (the first is the default); --idle-timeout takes seconds", () => {
    const o = parseServeOptions([
      "a.gguf",
      "--model",
      "b.gguf",
      "--model=c.gguf",
      "--idle-timeout",
      "30",
    ]) as ServeOptions;
    expect(o.models).toEqual(["a.gguf", "b.gguf", "c.gguf"]);
    expect(o.idleTimeoutSec).toBe(30);
    expect((parseServeOptions([]) as ServeOptions).idleTimeoutSec).toBe(0);
    expect(() => parseServeOptions(["--idle-timeout", "-1"])).toThrow(UsageError);
  });
});
