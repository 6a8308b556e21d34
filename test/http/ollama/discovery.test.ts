// Ollama's discovery routes (docs/api/ollama.md) through the official `ollama`
// client: /api/version, /api/tags, /api/ps and /api/show on the built-in
// model and on the FIM fixture, the 501 for the model-management routes,
// the 404 and 400 refusals, and that none of it reaches the engine.
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ollama } from "ollama";
import pkg from "../../../package.json";
import { servedIdOfPath } from "../../../src/daemon/model-ref.ts";
import type { ServedModel } from "../../../src/daemon/served-model.ts";
import { fixtureFileName } from "../../../src/fixtures/index.ts";
import { fileTypeName } from "../../../src/gguf/file-types.ts";
import { describeModel, readGguf, writeGgufFile } from "../../../src/gguf/index.ts";
import { humanCount, modelFacts, warmModelFacts } from "../../../src/http/ollama/model-facts.ts";
import { fixturePath } from "../../support/models.ts";
import { getJson, post, postJson, slots, useServer, type TestServer } from "../support.ts";

const CHAT_ID = servedIdOfPath(fixtureFileName("tiny-chat"));
const s = useServer({ fixture: "tiny-chat", extraArgs: ["--alias", `assistant=${CHAT_ID}`] });
const fim = useServer({ fixture: "tiny-fim", maxBatch: 2 });

const client = (server: TestServer) => new Ollama({ host: server.url });

/** The client's ResponseError (its class is not exported): the server's `error` and the status. */
interface ResponseError extends Error {
  error: string;
  status_code: number;
}

/** The refusal an `ollama` client call ends in. */
async function refusal(call: Promise<unknown>): Promise<ResponseError> {
  try {
    await call;
  } catch (err) {
    expect((err as Error).name).toBe("ResponseError");
    return err as ResponseError;
  }
  throw new Error("the call succeeded; a refusal was expected");
}

describe("/api/version", () => {
  test("the package version, through the client and raw", async () => {
    expect((await client(s).version()).version).toBe(pkg.version);
    const { status, json } = await getJson(s, "/api/version");
    expect(status).toBe(200);
    expect(json).toEqual({ version: pkg.version, server: "superfluid", compatibility: "ollama-inference" });
  });
});

describe("/api/tags", () => {
  test("every served model under its id with Ollama's default tag, with the file's size and time", async () => {
    expect(s.model).toBe(CHAT_ID);
    const path = await fixturePath("tiny-chat");
    const info = describeModel(await readGguf(path));
    const { models } = await client(s).list();
    expect(models).toHaveLength(1);
    const m = models[0]!;
    expect(m.name).toBe(`${CHAT_ID}:latest`);
    expect(m.model).toBe(m.name);
    expect(m.size).toBe(statSync(path).size);
    expect(new Date(m.modified_at).getTime()).toBe(statSync(path).mtime.getTime());
    expect(m.digest).toBe(createHash("sha256").update(CHAT_ID).digest("hex"));
    expect(m.details).toEqual({
      parent_model: "",
      format: "gguf",
      family: "llama",
      families: ["llama"],
      parameter_size: m.details.parameter_size,
      quantization_level: fileTypeName(info.fileType)!,
    });
    expect(m.details.quantization_level).toBe("F32");
    expect(m.details.parameter_size).toMatch(/^\d+(\.\d+)?[KMBT]$/);
  });

  test("the name listed is one requests can send back", async () => {
    const { models } = await client(s).list();
    const shown = await client(s).show({ model: models[0]!.name });
    expect(shown.details).toEqual(models[0]!.details);
  });
});

describe("/api/ps", () => {
  test("loaded models with the served window, a far expiry and the memory they hold", async () => {
    const [{ models: tags }, { models }] = await Promise.all([client(s).list(), client(s).ps()]);
    const served = (await getJson(s, "/v1/models")).json.data[0];
    expect(models).toHaveLength(1);
    const m = models[0]! as (typeof models)[number] & { context_length: number };
    expect(m.name).toBe(tags[0]!.name);
    expect(m.model).toBe(tags[0]!.model);
    expect(m.digest).toBe(tags[0]!.digest);
    expect(m.details).toEqual(tags[0]!.details);
    expect(m.context_length).toBe(served.meta.n_ctx);
    expect(m.context_length).toBe(2048);
    expect(m.size_vram).toBe(0);
    // The weights and the KV buffers: more than the file alone.
    expect(m.size).toBeGreaterThan(tags[0]!.size);
    // `keep_alive: -1` in Ollama: about 292 years on, which `ollama ps` shows as "Forever" (more than 20 years).
    const years = (new Date(m.expires_at).getTime() - Date.now()) / (365 * 24 * 3600 * 1000);
    expect(years).toBeGreaterThan(200);
  });
});

describe("/api/show", () => {
  test("the built-in model: template, details, model_info and capabilities", async () => {
    const info = describeModel(await readGguf(await fixturePath("tiny-chat")));
    const shown = await client(s).show({ model: s.model });
    expect(shown.license).toBe("");
    expect(shown.modelfile).toBe("");
    // The fixture publishes no sampling defaults.
    expect(shown.parameters).toBe("");
    expect(shown.template).toBe(info.chatTemplate!);
    const tags = (await client(s).list()).models[0]!;
    expect(shown.details).toEqual(tags.details);
    expect(new Date(shown.modified_at).getTime()).toBe(new Date(tags.modified_at).getTime());
    // The built-in model calls tools when forced and thinks when asked; it has no FIM tokens.
    expect(shown.capabilities).toEqual(["completion", "tools", "thinking"]);

    const mi = shown.model_info as unknown as Record<string, unknown>;
    expect(mi["general.architecture"]).toBe("llama");
    expect(mi["llama.context_length"]).toBe(info.contextLength!);
    expect(mi["llama.block_count"]).toBe(info.blockCount!);
    expect(mi["general.file_type"]).toBe(info.fileType!);
    // 32-bit floats in their shortest form, as Ollama's Go encoder writes them.
    expect(mi["llama.attention.layer_norm_rms_epsilon"]).toBe(1e-5);
    const count = mi["general.parameter_count"] as number;
    expect(count).toBeGreaterThan(0);
    expect(humanCount(count)).toBe(shown.details.parameter_size);
    // The vocabulary stays out (present, empty), as in Ollama's non-verbose reply; the template and name are elsewhere.
    expect(mi["tokenizer.ggml.tokens"]).toEqual([]);
    expect(mi["tokenizer.ggml.model"]).toBe("llama");
    expect(mi["tokenizer.ggml.eos_token_id"]).toBe(info.specialTokens.eos!);
    expect(mi).not.toHaveProperty("tokenizer.chat_template");
    expect(mi).not.toHaveProperty("general.name");
  });

  test("`id:latest`, an --alias and the older `name` field name the same model", async () => {
    const plain = await client(s).show({ model: s.model });
    expect(await client(s).show({ model: `${s.model}:latest` })).toEqual(plain);
    expect(await client(s).show({ model: "assistant" })).toEqual(plain);
    const byName = await postJson(s, "/api/show", { name: s.model });
    expect(byName.status).toBe(200);
    expect(byName.json).toEqual(JSON.parse(JSON.stringify(plain)));
  });

  test("system, template, options and verbose change nothing", async () => {
    const plain = await postJson(s, "/api/show", { model: s.model });
    const dressed = await postJson(s, "/api/show", {
      model: s.model,
      system: "be brief",
      template: "{{ .Prompt }}",
      options: { temperature: 0 },
      verbose: true,
    });
    expect(dressed.status).toBe(200);
    expect(dressed.json).toEqual(plain.json);
  });

  test("an unknown model is Ollama's 404", async () => {
    const err = await refusal(client(s).show({ model: "nope" }));
    expect(err.status_code).toBe(404);
    expect(err.error).toBe("model 'nope' not found");
    const raw = await postJson(s, "/api/show", { model: "nope:latest" });
    expect(raw.status).toBe(404);
    expect(raw.json).toEqual({ error: "model 'nope:latest' not found" });
  });

  test("no model, or a body that is not an object, is a 400", async () => {
    for (const body of [{}, { model: "" }, { system: "x" }]) {
      const r = await postJson(s, "/api/show", body);
      expect(r.status).toBe(400);
      expect(r.json).toEqual({ error: "model is required" });
    }
    const r = await postJson(s, "/api/show", []);
    expect(r.status).toBe(400);
    expect(Object.keys(r.json)).toEqual(["error"]);
  });

  test("a model with FIM tokens can insert", async () => {
    const shown = await client(fim).show({ model: `${fim.model}:latest` });
    expect(shown.capabilities).toContain("insert");
    expect(shown.capabilities).toContain("completion");
    const tags = await client(fim).list();
    expect(tags.models.map((m) => m.name)).toEqual([`${fim.model}:latest`]);
  });
});

describe("the routes that manage a model store", () => {
  const MESSAGE = /does not push, create, copy or delete models/;

  test("the client's push, create, copy and delete are 501", async () => {
    const c = client(s);
    const calls: (() => Promise<unknown>)[] = [
      () => c.push({ model: "llama3" }),
      () => c.create({ model: "mine", from: s.model }),
      () => c.copy({ source: s.model, destination: "mine" }),
      () => c.delete({ model: s.model }),
    ];
    for (const call of calls) {
      const err = await refusal(call());
      expect(err.status_code).toBe(501);
      expect(err.error).toMatch(MESSAGE);
    }
  });

  test("raw, on any method, blobs included", async () => {
    const cases: [string, string][] = [
      ["POST", "/api/push"],
      ["POST", "/api/create"],
      ["POST", "/api/copy"],
      ["DELETE", "/api/delete"],
      ["POST", "/api/blobs/sha256:29fdb92e57cf0827ded04ae6461b5931d01fa595843f55d36f5b275a52087dd2"],
      ["GET", "/api/blobs/sha256:29fdb92e57cf0827ded04ae6461b5931d01fa595843f55d36f5b275a52087dd2"],
    ];
    for (const [method, path] of cases) {
      const body = method === "GET" ? undefined : JSON.stringify({ model: "x" });
      const res = await fetch(`${s.url}${path}`, { method, headers: { "content-type": "application/json" }, body });
      expect(res.status).toBe(501);
      const reply = (await res.json()) as Record<string, unknown>;
      expect(Object.keys(reply)).toEqual(["error"]);
      expect(reply.error).toMatch(MESSAGE);
    }
    // Pull is served for Hugging Face names only: a library name is a 400 saying so.
    const pull = await refusal(client(s).pull({ model: "llama3" }));
    expect(pull.status_code).toBe(400);
    expect(pull.error).toContain("superfluid pulls only from the Hugging Face Hub");
    // Ollama's blob check is a HEAD: the status alone.
    const head = await fetch(`${s.url}/api/blobs/sha256:00`, { method: "HEAD" });
    expect(head.status).toBe(501);
  });
});

test("discovery does no engine work", async () => {
  const before = (await slots(s)).totals;
  const c = client(s);
  await c.version();
  await c.list();
  await c.ps();
  await c.show({ model: s.model });
  await post(s, "/api/show", { model: "nope" });
  await refusal(c.pull({ model: "llama3" }));
  const after = await slots(s);
  expect(after.totals).toEqual(before);
  expect(after.lanes.active).toBe(0);
  expect(after.lanes.queued).toBe(0);
});

describe("model facts", () => {
  test("parameter counts print as Ollama prints them", () => {
    expect(humanCount(8_030_261_248)).toBe("8.0B");
    expect(humanCount(4_000_000_000)).toBe("4B");
    expect(humanCount(494_032_768)).toBe("494.03M");
    expect(humanCount(143_648)).toBe("144K");
    expect(humanCount(999)).toBe("999");
  });

  test("a split model counts every shard's bytes and tensors", async () => {
    const dir = mkdtempSync(join(tmpdir(), "superfluid-split-"));
    try {
      const shard = (no: number, dims: number[]) =>
        writeGgufFile(
          {
            metadata: [
              ["general.architecture", "llama"],
              ["general.file_type", { type: "u32", value: 15 }],
              ["split.no", { type: "u16", value: no }],
              ["split.count", { type: "u16", value: 2 }],
            ],
            tensors: [{ name: `t${no}`, dims, type: "F32", data: new Float32Array(dims.reduce((a, b) => a * b, 1)) }],
          },
          join(dir, `m-0000${no + 1}-of-00002.gguf`),
        );
      await shard(0, [8, 4]);
      await shard(1, [16, 2]);
      const path = join(dir, "m-00001-of-00002.gguf");
      const file = await readGguf(path);
      const fake = { path, info: describeModel(file), loadedAt: new Date(0) } as unknown as ServedModel;
      warmModelFacts([fake]);
      const facts = modelFacts(fake);
      // Read once, then kept: the shards may go away without the facts changing.
      expect(modelFacts(fake)).toBe(facts);
      expect(facts.fileBytes).toBe(statSync(path).size + statSync(join(dir, "m-00002-of-00002.gguf")).size);
      expect(facts.modelInfo["general.parameter_count"]).toBe(64);
      expect(facts.parameterSize).toBe("64");
      expect(facts.quantization).toBe("Q4_K_M");
      expect(facts.modifiedAt.getTime()).toBe(statSync(path).mtime.getTime());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
