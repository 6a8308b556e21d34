// Fill-in-the-middle on POST /v1/completions
// (docs/api/openai.md#fill-in-the-middle): prompt assembly per fim_mode checked token by token
// against the tiny-fim fixture's FIM tokens, the refusals, the reply's
// superfluid object, the completion class, no session log, the per-client
// bucket's 429 + Retry-After, the start deadline, --fim-model, and arrays of
// prompts (token-id prefixes too) with n choices.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { readGguf, describeModel } from "../../../src/gguf/index.ts";
import { assembleFimPrompt, fimMarkersOf, fimPrompt } from "../../../src/pipeline/fim-prompt.ts";
import { fixturePath } from "../../support/models.ts";
import {
  envelope,
  getJson,
  post,
  postJson,
  readSse,
  slots,
  startTestServer,
  useServer,
  user,
  waitIdle,
  type TestServer,
} from "../support.ts";

const s = useServer({ fixture: "tiny-fim", maxContext: 4096, maxBatch: 2 });

const PREFIX = "def add(a, b):\n    ";
const SUFFIX = "\n\nprint(add(1, 2))";
const fim = (extra: Record<string, unknown> = {}) => ({
  model: s.model,
  prompt: PREFIX,
  suffix: SUFFIX,
  max_tokens: 8,
  temperature: 0,
  ...extra,
});

/** The fixture's marker ids, read from the GGUF itself and from its vocabulary text. */
async function markerIds() {
  const info = describeModel(await readGguf(await fixturePath("tiny-fim")));
  const model = s.server.registry.default!;
  const single = (text: string) => {
    const t = model.tokenizer.tokenize(text, { parseSpecial: true });
    expect(t).toHaveLength(1);
    return t[0]!;
  };
  const ids = { pre: single("<|fim_prefix|>"), suf: single("<|fim_suffix|>"), mid: single("<|fim_middle|>") };
  expect(info.fimTokens).toMatchObject({ prefix: ids.pre, suffix: ids.suf, middle: ids.mid });
  return ids;
}

const plain = (text: string) => s.server.registry.default!.tokenizer.tokenize(text, { parseSpecial: false });

describe("prompt assembly", () => {
  test("the pure framing: psm and spm, with and without BOS", () => {
    const m = { prefix: 900, suffix: 901, middle: 902 };
    expect(assembleFimPrompt(m, [1, 2], [3], "psm")).toEqual([900, 1, 2, 901, 3, 902]);
    expect(assembleFimPrompt(m, [1, 2], [3], "spm")).toEqual([901, 3, 900, 1, 2, 902]);
    expect(assembleFimPrompt(m, [1, 2], [3], "psm", 7)).toEqual([7, 900, 1, 2, 901, 3, 902]);
    expect(assembleFimPrompt(m, [1, 2], [3], "spm", 7)).toEqual([7, 901, 3, 900, 1, 2, 902]);
    expect(fimMarkersOf({ prefix: 1, suffix: 2 })).toBeUndefined();
  });

  test("psm and spm token by token on the fixture (no BOS: tiny-fim's add_bos is false)", async () => {
    const ids = await markerIds();
    const model = s.server.registry.default!;
    expect(model.tokenizer.vocabInfo.addBos).toBe(false);
    const markers = fimMarkersOf(model.info.fimTokens)!;
    const p = plain(PREFIX);
    const q = plain(SUFFIX);
    expect(p.length).toBeGreaterThan(1);
    expect(await fimPrompt(model, markers, PREFIX, SUFFIX, "psm")).toEqual([ids.pre, ...p, ids.suf, ...q, ids.mid]);
    expect(await fimPrompt(model, markers, PREFIX, SUFFIX, "spm")).toEqual([ids.suf, ...q, ids.pre, ...p, ids.mid]);
  });

  test("marker text in client text stays text", async () => {
    const ids = await markerIds();
    const model = s.server.registry.default!;
    const prompt = await fimPrompt(
      model,
      fimMarkersOf(model.info.fimTokens)!,
      "a<|fim_middle|>b",
      "<|fim_prefix|>",
      "psm",
    );
    expect(prompt.filter((t) => t === ids.mid)).toHaveLength(1);
    expect(prompt.filter((t) => t === ids.pre)).toHaveLength(1);
    expect(prompt.at(-1)).toBe(ids.mid);
  });

  test("a real request runs exactly that prompt: usage.prompt_tokens, and greedy text equal to the marked-up plain prompt", async () => {
    for (const [mode, text] of [
      ["psm", `<|fim_prefix|>${PREFIX}<|fim_suffix|>${SUFFIX}<|fim_middle|>`],
      ["spm", `<|fim_suffix|>${SUFFIX}<|fim_prefix|>${PREFIX}<|fim_middle|>`],
    ] as const) {
      const r = await postJson(s, "/v1/completions", fim({ fim_mode: mode }));
      expect(r.status).toBe(200);
      expect(r.json.usage.prompt_tokens).toBe(plain(PREFIX).length + plain(SUFFIX).length + 3);
      // Plain completions parse special-token text, so this is the same token sequence.
      const ref = await postJson(s, "/v1/completions", { model: s.model, prompt: text, max_tokens: 8, temperature: 0 });
      expect(ref.json.usage.prompt_tokens).toBe(r.json.usage.prompt_tokens);
      expect(r.json.choices[0].text).toBe(ref.json.choices[0].text);
    }
    const psm = await postJson(s, "/v1/completions", fim());
    const spm = await postJson(s, "/v1/completions", fim({ fim_mode: "spm" }));
    expect(psm.json.choices[0].text).not.toBe(spm.json.choices[0].text);
  });
});

describe("refusals and validation", () => {
  test("echo and logprobs: 400 unsupported_parameter", async () => {
    for (const [extra, param] of [
      [{ echo: true }, "echo"],
      [{ logprobs: 2 }, "logprobs"],
      [{ logprobs: 0 }, "logprobs"],
    ] as const) {
      const { status, json } = await postJson(s, "/v1/completions", fim(extra));
      expect(status).toBe(400);
      const e = envelope(json);
      expect(e.code).toBe("unsupported_parameter");
      expect(e.param).toBe(param);
    }
    // echo: false asks for nothing.
    expect((await postJson(s, "/v1/completions", fim({ echo: false }))).status).toBe(200);
  });

  test("fim_mode other than psm or spm: 400 naming it", async () => {
    const { status, json } = await postJson(s, "/v1/completions", fim({ fim_mode: "pms" }));
    expect(status).toBe(400);
    const e = envelope(json);
    expect(e.param).toBe("fim_mode");
    expect(e.message).toContain("psm");
  });

  test("an empty suffix is a plain completion", async () => {
    const r = await postJson(s, "/v1/completions", fim({ suffix: "" }));
    expect(r.status).toBe(200);
    expect(r.json.superfluid.served_by).toBeUndefined();
    expect(r.json.usage.prompt_tokens).toBe(plain(PREFIX).length);
  });
});

describe("the reply", () => {
  test("superfluid object: cached, expired, served_by; x-superfluid-warm; max_tokens defaults to 128", async () => {
    const first = await postJson(s, "/v1/completions", fim({ max_tokens: undefined, ignore_eos: true }));
    expect(first.status).toBe(200);
    expect(first.json.object).toBe("text_completion");
    expect(first.json.model).toBe(s.model);
    expect(first.json.usage.completion_tokens).toBe(128);
    expect(first.json.choices[0].finish_reason).toBe("length");
    expect(first.json.superfluid).toEqual({
      cached: first.json.usage.prompt_tokens_details.cached_tokens,
      expired: false,
      served_by: s.model,
    });
    // The same prompt again reuses its prefix from the cache.
    const again = await postJson(s, "/v1/completions", fim());
    expect(again.json.superfluid.cached).toBeGreaterThan(0);
    expect(again.json.superfluid.cached).toBe(again.json.usage.prompt_tokens_details.cached_tokens);
    expect(again.headers.get("x-superfluid-warm")).toBe(String(again.json.superfluid.cached));
  });

  test("streamed: the terminal chunk carries finish_reason, usage and the superfluid object", async () => {
    const sse = await readSse(await post(s, "/v1/completions", fim({ stream: true })));
    expect(sse.data.at(-1)).toBe("[DONE]");
    const last = sse.events.at(-1);
    expect(last.choices[0].finish_reason).toBe("length");
    expect(last.usage.completion_tokens).toBe(8);
    expect(last.superfluid).toMatchObject({ expired: false, served_by: s.model });
    expect(typeof last.superfluid.cached).toBe("number");
    expect(sse.events.slice(0, -1).every((e) => e.superfluid === undefined)).toBe(true);
  });

  test("FIM is not written to the session log; a plain completion is", async () => {
    const sessions = s.server.sessions;
    const before = sessions.lastSession;
    expect((await postJson(s, "/v1/completions", fim())).status).toBe(200);
    expect((await readSse(await post(s, "/v1/completions", fim({ stream: true })))).events.length).toBeGreaterThan(0);
    expect(sessions.lastSession).toBe(before);
    expect((await postJson(s, "/v1/completions", fim({ suffix: undefined }))).status).toBe(200);
    expect(sessions.lastSession).toBe(before + 1);
  });

  test("FIM runs in the completion class whatever x-superfluid-qos says", async () => {
    const controller = new AbortController();
    const res = await post(s, "/v1/completions", fim({ stream: true, max_tokens: 3500, ignore_eos: true }), {
      signal: controller.signal,
      headers: { "content-type": "application/json", "x-superfluid-qos": "background" },
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    await reader.read();
    const entry = await slots(s);
    controller.abort();
    await reader.cancel().catch(() => {});
    expect(entry.lanes.per_class).toMatchObject({ completion: 1, background: 0 });
    expect((await waitIdle(s)).idle).toBe(true);
  });
});

describe("several prompts and choices (OpenAI takes arrays with suffix)", () => {
  const OTHER_PREFIX = "def mul(a, b):\n    ";
  const texts = (json: any) => json.choices.map((c: any) => c.text);

  test("an array prompt: one FIM per prompt, same suffix, each its single-prompt reply; usage sums the prompts", async () => {
    const a = await postJson(s, "/v1/completions", fim());
    const b = await postJson(s, "/v1/completions", fim({ prompt: OTHER_PREFIX }));
    expect(a.json.choices[0].text).not.toBe(b.json.choices[0].text);
    const both = await postJson(s, "/v1/completions", fim({ prompt: [PREFIX, OTHER_PREFIX], n: 2 }));
    expect(both.status).toBe(200);
    expect(both.json.choices.map((c: any) => c.index)).toEqual([0, 1, 2, 3]);
    expect(texts(both.json)).toEqual([a, a, b, b].map((r) => r.json.choices[0].text));
    expect(both.json.usage.prompt_tokens).toBe(a.json.usage.prompt_tokens + b.json.usage.prompt_tokens);
    expect(both.json.superfluid).toMatchObject({ expired: false, served_by: s.model });
    expect(both.json.superfluid.cached).toBe(both.json.usage.prompt_tokens_details.cached_tokens);
  });

  test("a prefix given as token ids is used as it is: the same prompt and reply as its text", async () => {
    const text = await postJson(s, "/v1/completions", fim());
    const ids = await postJson(s, "/v1/completions", fim({ prompt: plain(PREFIX) }));
    expect(ids.json.usage.prompt_tokens).toBe(text.json.usage.prompt_tokens);
    expect(ids.json.choices[0].text).toBe(text.json.choices[0].text);
    const bad = await postJson(s, "/v1/completions", fim({ prompt: [[1, 1e9]] }));
    expect(bad.status).toBe(400);
    expect(envelope(bad.json).param).toBe("prompt");
  });

  test("streamed with two prompts: chunks name their choice; stop strings apply", async () => {
    const a = (await postJson(s, "/v1/completions", fim({ max_tokens: 16 }))).json.choices[0].text as string;
    const b = (await postJson(s, "/v1/completions", fim({ prompt: OTHER_PREFIX, max_tokens: 16 }))).json.choices[0]
      .text as string;
    const sse = await readSse(
      await post(s, "/v1/completions", fim({ prompt: [PREFIX, OTHER_PREFIX], max_tokens: 16, stream: true })),
    );
    const joined = [0, 1].map((i) =>
      sse.events.flatMap((e) => e.choices.filter((c: any) => c.index === i).map((c: any) => c.text)).join(""),
    );
    expect(joined).toEqual([a, b]);
    expect(sse.events.at(-1).superfluid).toMatchObject({ expired: false, served_by: s.model });
    // A stop taken from the greedy reply itself, so the cut cannot pass by chance.
    const stop = a.slice(4, 6);
    expect(a.indexOf(stop)).toBeGreaterThan(0);
    const cut = await postJson(s, "/v1/completions", fim({ max_tokens: 16, stop }));
    expect(cut.json.choices[0].text).toBe(a.slice(0, a.indexOf(stop)));
    expect(cut.json.choices[0].finish_reason).toBe("stop");
  });

  test("no FIM choice reaches the session log, however many", async () => {
    const before = s.server.sessions.lastSession;
    expect((await postJson(s, "/v1/completions", fim({ prompt: [PREFIX, PREFIX], n: 2 }))).json.choices).toHaveLength(
      4,
    );
    expect(s.server.sessions.lastSession).toBe(before);
  });
});

describe("per-client bucket", () => {
  // Two tokens, one back every second.
  const b = useServer({
    fixture: "tiny-fim",
    maxBatch: 1,
    extraArgs: ["--completion-burst", "2", "--completion-rate", "1"],
  });

  test("an empty bucket answers 429 completion_rate_limited with Retry-After in whole seconds; plain completions are not metered", async () => {
    const req = { model: b.model, prompt: PREFIX, suffix: SUFFIX, max_tokens: 2 };
    expect((await postJson(b, "/v1/completions", req)).status).toBe(200);
    expect((await postJson(b, "/v1/completions", req)).status).toBe(200);
    const res = await post(b, "/v1/completions", req);
    expect(res.status).toBe(429);
    const e = envelope(await res.json());
    expect(e.code).toBe("completion_rate_limited");
    expect(e.type).toBe("rate_limit_error");
    const retry = res.headers.get("retry-after");
    expect(retry).toMatch(/^\d+$/);
    // Less than one token left at 1/s: ceil(1 - left) = 1 s.
    expect(retry).toBe("1");
    expect((await postJson(b, "/v1/completions", { ...req, suffix: undefined })).status).toBe(200);
    // A refused request takes no token: after Retry-After there is one again.
    await Bun.sleep(Number(retry) * 1000 + 50);
    expect((await postJson(b, "/v1/completions", req)).status).toBe(200);
    expect((await post(b, "/v1/completions", req)).status).toBe(429);
  });

  test("a request refused for its own content (too long for the window) takes no token", async () => {
    await Bun.sleep(2100); // the bucket is full again
    const tooLong = { model: b.model, prompt: "word ".repeat(5000), suffix: SUFFIX, max_tokens: 2 };
    for (let i = 0; i < 3; i++) expect((await post(b, "/v1/completions", tooLong)).status).toBe(400);
    const req = { model: b.model, prompt: PREFIX, suffix: SUFFIX, max_tokens: 2 };
    expect((await postJson(b, "/v1/completions", req)).status).toBe(200);
    expect((await postJson(b, "/v1/completions", req)).status).toBe(200);
  });
});

describe("start deadline", () => {
  // One lane and a 300 ms deadline: a completion cannot preempt an interactive lane, so it waits and expires.
  const d = useServer({
    fixture: "tiny-fim",
    maxBatch: 1,
    maxContext: 4096,
    extraArgs: ["--completion-deadline-ms", "300"],
  });

  async function holdTheLane(): Promise<() => Promise<void>> {
    const controller = new AbortController();
    const res = await post(
      d,
      "/v1/chat/completions",
      { model: d.model, messages: user("go on"), stream: true, ignore_eos: true, max_tokens: 100000 },
      {
        signal: controller.signal,
        headers: { "content-type": "application/json", "x-superfluid-qos": "interactive" },
      },
    );
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    expect((await slots(d)).lanes.per_class.interactive).toBe(1);
    return async () => {
      controller.abort();
      await reader.cancel().catch(() => {});
      expect((await waitIdle(d)).idle).toBe(true);
    };
  }

  test("a completion still queued at --completion-deadline-ms answers 200, empty text, superfluid.expired", async () => {
    const expiredBefore = (await slots(d)).totals.expired;
    const release = await holdTheLane();
    try {
      const started = performance.now();
      const r = await postJson(d, "/v1/completions", { model: d.model, prompt: PREFIX, suffix: SUFFIX, max_tokens: 8 });
      const ms = performance.now() - started;
      expect(r.status).toBe(200);
      expect(r.json.choices[0]).toMatchObject({ text: "", finish_reason: "stop" });
      expect(r.json.usage.completion_tokens).toBe(0);
      expect(r.json.superfluid).toMatchObject({ expired: true, served_by: d.model });
      expect(ms).toBeGreaterThanOrEqual(280);
      const sse = await readSse(
        await post(d, "/v1/completions", {
          model: d.model,
          prompt: PREFIX,
          suffix: SUFFIX,
          max_tokens: 8,
          stream: true,
        }),
      );
      expect(sse.events.at(-1).superfluid.expired).toBe(true);
      expect(sse.events.at(-1).choices[0].finish_reason).toBe("stop");
      expect((await slots(d)).totals.expired).toBe(expiredBefore + 2);
    } finally {
      await release();
    }
    // With the lane free it starts in time.
    const r = await postJson(d, "/v1/completions", { model: d.model, prompt: PREFIX, suffix: SUFFIX, max_tokens: 8 });
    expect(r.json.superfluid.expired).toBe(false);
    expect(r.json.usage.completion_tokens).toBeGreaterThan(0);
  });
});

describe("a model without FIM tokens", () => {
  const c = useServer({ fixture: "tiny-random", maxBatch: 1 });

  test("400 fim_unsupported; dialect.fim and fim_model false", async () => {
    const m = await getJson(c, "/v1/models");
    expect(m.json.data[0].capabilities.dialect).toMatchObject({ fim: false, fim_model: false });
    const { status, json } = await postJson(c, "/v1/completions", { model: c.model, prompt: PREFIX, suffix: SUFFIX });
    expect(status).toBe(400);
    expect(envelope(json).code).toBe("fim_unsupported");
  });
});

describe("--fim-model", () => {
  let f: TestServer & { sessions: string };
  beforeAll(async () => {
    f = await startTestServer({
      fixture: "tiny-random",
      maxBatch: 1,
      extraArgs: ["--fim-model", await fixturePath("tiny-fim"), "--fim-max-batch", "1"],
    });
  });
  afterAll(async () => {
    await f?.server.close();
    if (f) rmSync(f.sessions, { recursive: true, force: true });
  });

  test("FIM on a model without FIM tokens runs on the dedicated model; /v1/models says fim_model", async () => {
    const m = await getJson(f, "/v1/models");
    expect(m.json.data).toHaveLength(1);
    expect(m.json.data[0].capabilities.dialect).toMatchObject({ fim: false, fim_model: true });
    const r = await postJson(f, "/v1/completions", {
      model: f.model,
      prompt: PREFIX,
      suffix: SUFFIX,
      max_tokens: 4,
      temperature: 0,
    });
    expect(r.status).toBe(200);
    expect(r.json.model).toBe(f.model);
    expect(r.json.superfluid.served_by).toBe("tiny-fim-1-v2");
    // Its own window: min(main window, 8192) = 2048 here.
    expect(f.server.registry.default!.fimModel!.contextWindow).toBe(2048);
    // Same greedy middle as the FIM model serving it itself.
    const direct = await postJson(s, "/v1/completions", {
      model: s.model,
      prompt: PREFIX,
      suffix: SUFFIX,
      max_tokens: 4,
      temperature: 0,
    });
    expect(r.json.choices[0].text).toBe(direct.json.choices[0].text);
  });
});
