// Hostile prompts (the d1 and d3 reproductions): a request too large for the
// context window is refused (400 naming the field and the limit) before it is
// rendered or tokenized, and rendering and tokenizing happen on the model's
// prompt thread, so /health and other requests keep being answered while a
// large prompt is worked on. The server runs in this process: /health is
// polled from the same event loop it is served on, so any stall shows up as a
// reply that waits. Nothing here is timed against a bound; the events' order
// is asserted and the latencies are printed.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { TemplateError } from "../../src/codec/index.ts";
import { PromptThread } from "../../src/daemon/prompt-thread.ts";
import { TOKENIZE_MAX_CHARS } from "../../src/http/admin.ts";
import { MAX_TOOLS } from "../../src/http/chat-limits.ts";
import { CHATML_TOOLS_TEMPLATE } from "../../src/fixtures/index.ts";
import { fixturePath } from "../support/models.ts";
import { envelope, post, postJson, startTestServer, useServer, user } from "./support.ts";

// Wide enough that 2,000 chat turns fit; 30,000 do not.
const s = useServer({ maxContext: 16384 });

/** One piece of work done for a request: when it was sent and when its answer came. */
interface Span {
  sent: number;
  at: number;
}

interface Watched {
  status: number;
  json: any;
  sentAt: number;
  repliedAt: number;
  /** Every /health poll answered while the watched request was in flight. */
  health: Span[];
  /** Renders the prompt thread did meanwhile, by message count. */
  renders: (Span & { messages: number })[];
  /** Tokenize requests it did meanwhile, by text length. */
  tokenizes: (Span & { chars: number })[];
  rssGrowthMb: number;
  /** The small chat request sent beside it. */
  sideStatus: number;
}

const POLLERS = 3;

/** Records the prompt thread's work while `body` runs. */
async function spyingOnPrompts<T>(
  body: (renders: Watched["renders"], tokenizes: Watched["tokenizes"]) => Promise<T>,
): Promise<T> {
  const thread = s.server.registry.default!.prompts;
  const renders: Watched["renders"] = [];
  const tokenizes: Watched["tokenizes"] = [];
  const render = thread.render.bind(thread);
  const tokenize = thread.tokenize.bind(thread);
  thread.render = async (req) => {
    const sent = performance.now();
    const out = await render(req);
    renders.push({ sent, at: performance.now(), messages: req.input.messages.length });
    return out;
  };
  thread.tokenize = async (text, opts) => {
    const sent = performance.now();
    const out = await tokenize(text, opts);
    tokenizes.push({ sent, at: performance.now(), chars: text.length });
    return out;
  };
  try {
    return await body(renders, tokenizes);
  } finally {
    delete (thread as Partial<typeof thread>).render;
    delete (thread as Partial<typeof thread>).tokenize;
  }
}

/**
 * Sends one request while /health is polled by a few loops (each waiting a
 * moment between polls, so they leave the CPU to the work watched) and a
 * small chat request goes to the same model; reports what was seen.
 */
async function watch(path: string, body: string): Promise<Watched> {
  Bun.gc(true);
  const rssBefore = process.memoryUsage().rss;
  let maxRss = rssBefore;
  let sentAt = Infinity;
  let repliedAt = Infinity;
  const health: Span[] = [];
  let warm = 0;
  let onWarm!: () => void;
  const allWarm = new Promise<void>((resolve) => (onWarm = resolve));
  const poll = async () => {
    let first = true;
    while (repliedAt === Infinity) {
      const sent = performance.now();
      const res = await fetch(`${s.url}/health`);
      await res.arrayBuffer();
      const at = performance.now();
      expect(res.status).toBe(200);
      if (at > sentAt) health.push({ sent, at });
      maxRss = Math.max(maxRss, process.memoryUsage().rss);
      if (first && ++warm === POLLERS) onWarm();
      first = false;
      await Bun.sleep(1);
    }
  };
  return spyingOnPrompts(async (renders, tokenizes) => {
    const pollers = Array.from({ length: POLLERS }, poll);
    await allWarm;
    sentAt = performance.now();
    const side = postJson(s, "/v1/chat/completions", { model: s.model, messages: user("hi"), max_tokens: 4 });
    const res = await post(s, path, body);
    const json = await res.json();
    repliedAt = performance.now();
    await Promise.all(pollers);
    const sideStatus = (await side).status;
    maxRss = Math.max(maxRss, process.memoryUsage().rss);
    return {
      status: res.status,
      json,
      sentAt,
      repliedAt,
      health,
      renders,
      tokenizes,
      rssGrowthMb: (maxRss - rssBefore) / 2 ** 20,
      sideStatus,
    };
  });
}

/** /health replies to polls sent after `from` that came before `to`. */
const healthBetween = (w: Watched, from: number, to: number) =>
  w.health.filter((h) => h.sent >= from && h.at < to).length;

function report(name: string, w: Watched): void {
  const slowest = Math.max(...w.health.map((h) => h.at - h.sent));
  console.log(
    `${name}: ${w.status} after ${(w.repliedAt - w.sentAt).toFixed(0)} ms; ${w.health.length} /health replies meanwhile, ` +
      `${healthBetween(w, w.sentAt, w.repliedAt)} of them before it, slowest ${slowest.toFixed(1)} ms; RSS +${w.rssGrowthMb.toFixed(0)} MB`,
  );
}

/** What every watched request must show, whatever its answer. */
function expectServedAround(w: Watched): void {
  expect(w.health.length).toBeGreaterThan(0);
  expect(w.rssGrowthMb).toBeLessThan(200);
  expect(w.sideStatus).toBe(200);
}

describe("hostile prompts are refused before any rendering, the event loop free meanwhile", () => {
  // A refusal comes within a few /health round trips of the body's arrival,
  // so what shows it came first is that the prompt thread never saw the
  // request (the small chat request beside it is the only render).
  const onlySideRenders = (w: Watched) => expect(w.renders.map((r) => r.messages)).toEqual([1]);

  test("d1: 30,000 empty user messages: 400 naming messages and the window", async () => {
    const body = JSON.stringify({
      model: s.model,
      max_tokens: 4,
      messages: Array(30_000).fill({ role: "user", content: "" }),
    });
    const w = await watch("/v1/chat/completions", body);
    report("d1 30,000 messages", w);
    expect(w.status).toBe(400);
    const e = envelope(w.json);
    expect(e).toMatchObject({ code: "context_length_exceeded", param: "messages" });
    expect(e.message).toContain("16384 tokens");
    expect(e.message).toContain("30000 messages");
    onlySideRenders(w);
    expectServedAround(w);
  });

  test("d3: a 10 MB tool description: 400 naming tools", async () => {
    const tools = [{ type: "function", function: { name: "f", description: "ab ".repeat(3_333_333) } }];
    const w = await watch(
      "/v1/chat/completions",
      JSON.stringify({ model: s.model, max_tokens: 4, messages: user("hi"), tools }),
    );
    report("d3 10 MB tool description", w);
    expect(w.status).toBe(400);
    const e = envelope(w.json);
    expect(e).toMatchObject({ code: "context_length_exceeded", param: "tools" });
    expect(e.message).toContain("16384 tokens");
    expect(w.renders).toHaveLength(1);
    expectServedAround(w);
  });

  test("d3: 10 MB to /v1/tokenize: 400 naming content and the documented maximum", async () => {
    const w = await watch("/v1/tokenize", JSON.stringify({ content: "ab ".repeat(3_333_333) }));
    report("d3 10 MB to /v1/tokenize", w);
    expect(w.status).toBe(400);
    const e = envelope(w.json);
    expect(e).toMatchObject({ code: "text_too_long", param: "content" });
    expect(e.message).toContain(String(TOKENIZE_MAX_CHARS));
    expect(w.tokenizes).toHaveLength(0);
    expectServedAround(w);
  });

  test("2,000 messages within the limits are rendered and served, /health answering throughout", async () => {
    const messages = Array.from({ length: 2000 }, (_, i) => ({
      role: i % 2 ? "assistant" : "user",
      content: i % 2 ? "" : `q${i}`,
    }));
    const w = await watch("/v1/chat/completions", JSON.stringify({ model: s.model, max_tokens: 4, messages }));
    report("2,000 messages", w);
    expect(w.status).toBe(200);
    // Each turn is at least its two markers.
    expect(w.json.usage.prompt_tokens).toBeGreaterThan(4000);
    expect(w.json.choices[0].message.content).toBeString();
    expectServedAround(w);
    expect(healthBetween(w, w.sentAt, w.repliedAt)).toBeGreaterThanOrEqual(3);
    // While its 2,000 turns were rendered and tokenized, /health was answered.
    const render = w.renders.find((r) => r.messages === 2000)!;
    console.log(
      `  its render took ${(render.at - render.sent).toFixed(0)} ms on the prompt thread, ${healthBetween(w, render.sent, render.at)} /health replies within it`,
    );
    expect(healthBetween(w, render.sent, render.at)).toBeGreaterThanOrEqual(1);
  });
});

describe("the other limits", () => {
  test(`more than ${MAX_TOOLS} tools: 400 naming tools`, async () => {
    const tools = Array.from({ length: MAX_TOOLS + 1 }, (_, i) => ({ type: "function", function: { name: `f${i}` } }));
    const r = await postJson(s, "/v1/chat/completions", { model: s.model, messages: user("hi"), tools });
    expect(r.status).toBe(400);
    expect(envelope(r.json)).toMatchObject({ code: "array_above_max_length", param: "tools" });
    // As many as the limit are fine.
    const ok = await postJson(s, "/v1/chat/completions", {
      model: s.model,
      messages: user("hi"),
      tools: tools.slice(0, MAX_TOOLS),
      tool_choice: "none",
      max_tokens: 2,
    });
    expect(ok.status).toBe(200);
  });

  test("chat_template_kwargs count toward the window; the error names the largest part", async () => {
    const kwargs = { note: "x".repeat(300_000) };
    const r = await postJson(s, "/v1/chat/completions", {
      model: s.model,
      messages: user("hi"),
      chat_template_kwargs: kwargs,
    });
    expect(r.status).toBe(400);
    const e = envelope(r.json);
    expect(e).toMatchObject({ code: "context_length_exceeded", param: "chat_template_kwargs" });
    expect(e.message).toContain("chat_template_kwargs and messages are at least");
  });

  test("/v1/completions: a prompt that cannot fit is refused before tokenizing", async () => {
    const r = await spyingOnPrompts(async (_, tokenizes) => {
      const reply = await postJson(s, "/v1/completions", { model: s.model, prompt: ["ab ".repeat(100_000), "short"] });
      expect(tokenizes).toHaveLength(0);
      return reply;
    });
    expect(r.status).toBe(400);
    expect(envelope(r.json)).toMatchObject({ code: "context_length_exceeded", param: "prompt" });
  });

  test("/v1/tokenize at the maximum is served", async () => {
    const r = await postJson(s, "/v1/tokenize", { content: "a".repeat(TOKENIZE_MAX_CHARS) });
    expect(r.status).toBe(200);
    expect(r.json.tokens.length).toBeGreaterThan(0);
    const over = await postJson(s, "/v1/tokenize", { text: "a".repeat(TOKENIZE_MAX_CHARS + 1) });
    expect(envelope(over.json)).toMatchObject({ code: "text_too_long", param: "text" });
  });
});

/**
 * What a promise rejects with. (bun:test's `expect(p).rejects` waits without
 * running the event loop, so it never sees a thread's answer.)
 */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => {
      throw new Error("expected a rejection");
    },
    (err: Error) => err,
  );
}

describe("the prompt thread", () => {
  test("a template error is a 400, and the thread goes on serving", async () => {
    const bad = await postJson(s, "/v1/chat/completions", {
      model: s.model,
      messages: user("hi"),
      chat_template_kwargs: { messages: [] },
    });
    expect(bad.status).toBe(400);
    expect(envelope(bad.json).message).toContain("the chat template refused this request");
    const good = await postJson(s, "/v1/chat/completions", { model: s.model, messages: user("hi"), max_tokens: 2 });
    expect(good.status).toBe(200);
  });

  test("answers render and tokenize requests, rejects with TemplateError, and stops on close", async () => {
    const thread = await PromptThread.start({
      model: await fixturePath("tiny-random"),
      chatTemplate: CHATML_TOOLS_TEMPLATE,
      loadedAt: new Date(),
    });
    try {
      const rendered = await thread.render({
        tools: false,
        input: { messages: [{ role: "user", content: "hi" }] },
        addBos: false,
      });
      expect(rendered.tokens).toBeInstanceOf(Int32Array);
      expect(rendered.tokens[0]).toBe(3); // <|im_start|>
      const refused = thread.render({ tools: false, input: { messages: [], kwargs: { tools: [] } }, addBos: false });
      expect(await rejection(refused)).toBeInstanceOf(TemplateError);
      expect(Array.from(await thread.tokenize("<|im_end|>", { addSpecial: false, parseSpecial: true }))).toEqual([4]);
      expect((await thread.tokenize("<|im_end|>", { addSpecial: false, parseSpecial: false })).length).toBeGreaterThan(
        1,
      );
    } finally {
      await thread.close();
    }
    expect((await rejection(thread.tokenize("x", { addSpecial: false, parseSpecial: false }))).message).toContain(
      "closed",
    );
  });

  test.skipIf(!existsSync("/proc/self/task"))("servers that close leave no thread behind", async () => {
    const threads = () => readdirSync("/proc/self/task").length;
    const cycle = async () => {
      const started = await startTestServer();
      await started.server.close();
      rmSync(started.sessions, { recursive: true, force: true });
    };
    await cycle(); // the first start may bring up threads of Bun's own that stay
    const before = threads();
    for (let i = 0; i < 3; i++) await cycle();
    expect(threads()).toBeLessThan(before + 3);
  });
});
