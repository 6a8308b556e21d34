// Agent-sized prompts on default flags (no --max-context): the KV is sized
// from free memory (per-lane buffers of the trained window where they fit,
// else one shared pool), a conversation may use up to the model's trained
// window, and a 16k-token prompt is served while 8 short requests run. Then
// small explicit shared pools (--kv-pool): a long prompt beside short ones,
// and more work in flight than the pool holds; every request completes in
// full. And max_tokens past what the window leaves is cut to what it leaves,
// never refused.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, type RunningServer } from "../../src/cli/serve.ts";
import { parseServeOptions, type ServeOptions } from "../../src/cli/serve-options.ts";
import type { FixtureKind } from "../../src/fixtures/index.ts";
import { fixturePath } from "../support/models.ts";

process.env.SUPERFLUID_QUIET ??= "1";

interface Server {
  running: RunningServer;
  url: string;
  model: string;
  log: string[];
  sessions: string;
}

/** A server on `fixture` with only the flags given (no sizing flags unless named), one compute thread. */
async function serve(fixture: FixtureKind, flags: string[]): Promise<Server> {
  const sessions = mkdtempSync(join(tmpdir(), "superfluid-default-ctx-"));
  const opts = parseServeOptions([
    await fixturePath(fixture),
    "--port",
    "0",
    "--threads",
    "1",
    "--sessions",
    sessions,
    ...flags,
  ]) as ServeOptions;
  const log: string[] = [];
  const running = await startServer(opts, (line) => log.push(line));
  const models = (await (await fetch(`${running.url}/v1/models`)).json()) as { data: { id: string }[] };
  return { running, url: running.url, model: models.data[0]!.id, log, sessions };
}

async function stop(s: Server | undefined): Promise<void> {
  if (!s) return;
  await s.running.close();
  rmSync(s.sessions, { recursive: true, force: true });
}

async function post(s: Server, path: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${s.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const get = async (s: Server, path: string): Promise<any> => (await fetch(`${s.url}${path}`)).json();

/** Token ids from `seed` (prompts the prefix cache cannot shorten), within [100, 100 + range) of the vocabulary. */
const ids = (seed: number, n: number, range = 90_000) =>
  Array.from({ length: n }, (_, i) => 100 + ((seed * 7919 + i * 104729) % range));

describe("default flags on the large-vocabulary model (trained window 32768)", () => {
  let s: Server;
  beforeAll(async () => {
    s = await serve("large-vocab", []);
  });
  afterAll(() => stop(s));

  test("the window is the trained window; the startup log, /v1/models, /props and /slots say how the KV was sized", async () => {
    const line = s.log.find((l) => l.includes("per conversation"));
    expect(line).toBeDefined();
    console.log(line);
    expect(line).toContain("window 32768 per conversation (the model's trained window); ");
    // Which layout depends on this machine's free memory; either way the log says so and why.
    expect(line).toMatch(
      /(10 KV buffers of 32768 cells, one per sequence|shared KV pool of \d+ cells) \(.*, 2 KiB a token\) = .*free (host|device) memory after the weights/,
    );

    const model = (await get(s, "/v1/models")).data[0];
    expect(model.meta.n_ctx).toBe(32768);
    expect(model.meta.n_ctx_train).toBe(32768);
    const layout = model.meta.kv_layout;
    expect(["per-lane", "shared"]).toContain(layout);
    expect(model.meta.kv_cells).toBe(layout === "per-lane" ? 10 * 32768 : model.meta.kv_cells);
    expect(model.meta.kv_cells).toBeGreaterThanOrEqual(32768);

    const props = await get(s, "/props");
    expect(props.default_generation_settings.n_ctx).toBe(32768);
    expect(props.max_context).toBe(32768);
    expect(props.total_slots).toBe(8);
    expect(props.kv_cache).toMatchObject({
      layout,
      sequences: 10,
      cells_per_sequence: 32768,
      cells_total: model.meta.kv_cells,
      bytes_per_token: 2048,
      sizing: line!.replace("superfluid: ", ""),
    });
    expect(props.kv_cache.bytes).toBe(model.meta.kv_cells * 2048);

    const slot = (await get(s, "/slots"))[0];
    expect(slot.n_ctx).toBe(32768);
    expect(slot.kv_pool).toMatchObject({ layout, cells_per_sequence: 32768, cells_total: model.meta.kv_cells });
  });

  test("a 16k-token prompt is served while 8 short requests run beside it", async () => {
    const prompt = ids(1, 16_000);
    let longDone = false;
    // 256 tokens after its 16k-token prefill: hundreds of ticks more than the short ones need, so
    // their finishing first depends on the tick order, not on how fast this machine is.
    const long = post(s, "/v1/completions", {
      model: s.model,
      prompt,
      max_tokens: 256,
      temperature: 0,
      ignore_eos: true,
    }).then((r) => {
      longDone = true;
      return r;
    });
    // Once the long prompt holds a lane, the short ones arrive.
    // (The test's timeout is the hang guard.)
    while ((await get(s, "/slots"))[0].lanes.active === 0) await Bun.sleep(10);
    const shorts = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        post(s, "/v1/completions", {
          model: s.model,
          prompt: ids(100 + i, 40),
          max_tokens: 24,
          temperature: 0,
          ignore_eos: true,
        }),
      ),
    );
    for (const r of shorts) {
      expect(r.status).toBe(200);
      expect(r.json.usage.completion_tokens).toBe(24);
    }
    // Prefill goes a micro-batch per tick, so the short ones are not held behind the long prompt.
    expect(longDone).toBe(false);
    const r = await long;
    expect(r.status).toBe(200);
    expect(r.json.usage).toMatchObject({ prompt_tokens: 16_000, completion_tokens: 256 });
    expect(r.json.choices[0].finish_reason).toBe("length");
  });
});

describe("a shared pool one long prompt nearly fills (--kv-pool 4096, 8 lanes)", () => {
  let s: Server;
  beforeAll(async () => {
    s = await serve("tiny-random", ["--kv-pool", "4096"]);
  });
  afterAll(() => stop(s));

  test("a 3500-token prompt and 8 short requests: the short ones wait for cells when they must, and all complete", async () => {
    expect((await get(s, "/v1/models")).data[0].meta).toMatchObject({
      n_ctx: 4096,
      kv_layout: "shared",
      kv_cells: 4096,
    });
    const long = post(s, "/v1/completions", {
      model: s.model,
      prompt: ids(7, 3500, 1000),
      max_tokens: 200,
      temperature: 0,
      ignore_eos: true,
    });
    const shorts = Array.from({ length: 8 }, (_, i) =>
      post(s, "/v1/completions", {
        model: s.model,
        prompt: ids(40 + i, 40, 1000),
        max_tokens: 24,
        temperature: 0,
        ignore_eos: true,
      }),
    );
    for (const r of await Promise.all(shorts)) {
      expect(r.status).toBe(200);
      expect(r.json.usage).toMatchObject({ prompt_tokens: 40, completion_tokens: 24 });
    }
    const r = await long;
    expect(r.status).toBe(200);
    expect(r.json.usage).toMatchObject({ prompt_tokens: 3500, completion_tokens: 200 });
  });
});

describe("a small explicit shared pool (--kv-pool 1024, 4 lanes)", () => {
  let s: Server;
  beforeAll(async () => {
    s = await serve("tiny-random", ["--kv-pool", "1024", "--max-batch", "4"]);
  });
  afterAll(() => stop(s));

  test("its window is the pool (below the trained window)", async () => {
    expect((await get(s, "/v1/models")).data[0].meta).toMatchObject({
      n_ctx: 1024,
      kv_layout: "shared",
      kv_cells: 1024,
    });
    expect(s.log.find((l) => l.includes("per conversation"))).toContain(
      "window 1024 per conversation (the whole pool); shared KV pool of 1024 cells",
    );
  });

  test("6 concurrent requests of ~300 + 250 tokens (over 3x the pool): every one completes in full", async () => {
    const replies = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        post(s, "/v1/completions", {
          model: s.model,
          prompt: ids(200 + i, 300, 1000),
          max_tokens: 250,
          temperature: 0,
          ignore_eos: true,
        }),
      ),
    );
    for (const r of replies) {
      expect(r.status).toBe(200);
      expect(r.json.choices[0].finish_reason).toBe("length");
      expect(r.json.usage).toMatchObject({ prompt_tokens: 300, completion_tokens: 250 });
    }
    const slot = (await get(s, "/slots"))[0];
    expect(slot.totals.space_pauses + slot.totals.space_evictions).toBeGreaterThan(0);
    expect(slot.lanes.active + slot.lanes.queued).toBe(0);
    expect(slot.respawns).toBe(0);
  });

  test("max_tokens past what the window leaves is cut to it (completions and chat), not refused", async () => {
    const prompt = ids(300, 100, 1000);
    const c = await post(s, "/v1/completions", {
      model: s.model,
      prompt,
      max_tokens: 32000,
      temperature: 0,
      ignore_eos: true,
    });
    expect(c.status).toBe(200);
    expect(c.json.choices[0].finish_reason).toBe("length");
    expect(c.json.usage).toMatchObject({ prompt_tokens: 100, completion_tokens: 1024 - 100 });

    for (const field of ["max_tokens", "max_completion_tokens"]) {
      const r = await post(s, "/v1/chat/completions", {
        model: s.model,
        messages: [{ role: "user", content: "tell me everything" }],
        [field]: 32000,
        temperature: 0,
        ignore_eos: true,
      });
      expect(r.status).toBe(200);
      expect(r.json.choices[0].finish_reason).toBe("length");
      expect(r.json.usage.prompt_tokens + r.json.usage.completion_tokens).toBe(1024);
    }
  });
});
