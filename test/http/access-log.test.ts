// The access log (docs/cli.md#logging): one record per generation on every
// generation route, read through the access sink (not stderr) and checked
// field by field against the reply's own usage; a cancelled request logs
// finish=cancelled and a stop string finish=stop; the plain line's format;
// --log-dir JSON lines, rotation and 0600 files; --log-file; the flags.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer } from "../../src/cli/serve.ts";
import { parseServeOptions, type ServeOptions } from "../../src/cli/serve-options.ts";
import { accessJson, formatAccess, setAccessSink, type AccessEntry } from "../../src/http/access-log.ts";
import { Logger } from "../../src/logging/logger.ts";
import { logFileNumbers, RotatingLog } from "../../src/logging/rotating-log.ts";
import { fixturePath } from "../support/models.ts";
import { parseSse, post, postJson, slots, useServer, user } from "./support.ts";

/** The `data:` payloads of an SSE stream with named events (Anthropic, Responses), parsed. */
const namedEvents = (raw: string): any[] =>
  raw
    .split("\n")
    .filter((l) => l.startsWith("data: "))
    .map((l) => JSON.parse(l.slice(6)));

const chat = useServer({ fixture: "tiny-chat", maxContext: 4096, maxBatch: 4 });
const fim = useServer({ fixture: "tiny-fim", maxContext: 4096, maxBatch: 2 });

const records: AccessEntry[] = [];
let unsink = () => {};
// Registered after the servers' own hooks, so this sink is the newest one installed.
beforeAll(() => void (unsink = setAccessSink((e) => records.push(e))));
afterAll(() => unsink());

const temp: string[] = [];
afterAll(() => temp.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "superfluid-access-log-"));
  temp.push(dir);
  return dir;
}

/** Waits for the record after the first `seen` (hang guard only). */
async function recordAfter(seen: number): Promise<AccessEntry> {
  const started = performance.now();
  while (records.length <= seen) {
    if (performance.now() - started > 60_000) throw new Error("no access record arrived");
    await Bun.sleep(10);
  }
  return records[seen]!;
}

/**
 * Runs `call` and returns the one record it logged; a reply is only delivered after its record is written, so a second
 * one would be here too.
 */
async function oneRecord<T>(call: () => Promise<T>): Promise<{ reply: T; record: AccessEntry }> {
  const seen = records.length;
  const reply = await call();
  expect(records.length).toBe(seen + 1);
  return { reply, record: records[seen]! };
}

/** The fields every finished record shares, and the timings' consistency. */
function expectTimings(e: AccessEntry) {
  expect(e.ttftMs).toBeNumber();
  expect(e.ttftMs!).toBeGreaterThanOrEqual(0);
  expect(e.totalMs).toBeGreaterThanOrEqual(e.ttftMs!);
  expect(e.waitMs).toBeNumber();
  expect(e.waitMs!).toBeLessThanOrEqual(e.ttftMs!);
  if (e.prompt > e.cached && e.ttftMs! > 0) expect(e.prefillTps).toBeGreaterThan(0);
  else expect(e.prefillTps).toBeUndefined();
  if (e.completion > 1) expect(e.decodeTps).toBeGreaterThan(0);
}

const LINE =
  /^<-- (\d{3}) POST (\S+) model=(\S+) prompt=(\d+) cached=(\d+) completion=(\d+) ttft=(\d+ms|-) prefill=(\d+ tok\/s|-) decode=(\d+\.\d tok\/s|-) total=(\d+)ms finish=(\w+)$/;

const body = (extra: Record<string, unknown> = {}) => ({
  model: chat.model,
  messages: user("Say hello."),
  max_tokens: 32,
  temperature: 0,
  ...extra,
});

describe("one record per generation, field by field", () => {
  test("a chat completion", async () => {
    const { reply, record } = await oneRecord(() => postJson(chat, "/v1/chat/completions", body()));
    expect(reply.status).toBe(200);
    const usage = reply.json.usage;
    expect(record).toMatchObject({
      status: 200,
      route: "/v1/chat/completions",
      model: chat.model,
      id: reply.json.id,
      prompt: usage.prompt_tokens,
      cached: usage.prompt_tokens_details.cached_tokens,
      completion: usage.completion_tokens,
      finish: "stop",
    });
    expect(record.completion).toBe(9);
    expectTimings(record);
    const m = LINE.exec(formatAccess(record))!;
    expect(m).not.toBeNull();
    expect(m.slice(1, 7)).toEqual([
      "200",
      "/v1/chat/completions",
      chat.model,
      String(usage.prompt_tokens),
      String(record.cached),
      "9",
    ]);
    expect(m[7]).toBe(`${record.ttftMs}ms`);
    expect(m[9]).toBe(`${record.decodeTps!.toFixed(1)} tok/s`);
    expect(m[10]).toBe(String(record.totalMs));
    expect(m[11]).toBe("stop");
    // -v adds the reply id and the wait for a lane.
    expect(formatAccess(record, true)).toBe(`${formatAccess(record)} id=${reply.json.id} wait=${record.waitMs}ms`);
  });

  test("a streamed chat completion: the record matches the final chunk's usage", async () => {
    const { reply: res, record } = await oneRecord(async () => {
      const res = await post(chat, "/v1/chat/completions", body({ stream: true }));
      return parseSse(await res.text());
    });
    const last = res.events.at(-1);
    expect(last.choices[0].finish_reason).toBe("stop");
    expect(record).toMatchObject({
      status: 200,
      route: "/v1/chat/completions",
      model: chat.model,
      id: last.id,
      prompt: last.usage.prompt_tokens,
      cached: last.usage.prompt_tokens_details.cached_tokens,
      completion: last.usage.completion_tokens,
      finish: "stop",
    });
    expectTimings(record);
    expect(LINE.test(formatAccess(record))).toBe(true);
  });

  test("a stop string ends with finish=stop, not cancelled", async () => {
    const { reply, record } = await oneRecord(() =>
      postJson(chat, "/v1/chat/completions", body({ stop: ["built-in"] })),
    );
    expect(reply.json.choices[0].finish_reason).toBe("stop");
    expect(reply.json.choices[0].message.content).not.toContain("built-in");
    expect(record.finish).toBe("stop");
    expect(record.completion).toBe(reply.json.usage.completion_tokens);
    expect(record.completion).toBeLessThan(9);
  });

  test("n choices: one record, the completion tokens of all of them", async () => {
    const { reply, record } = await oneRecord(() => postJson(chat, "/v1/chat/completions", body({ n: 2 })));
    expect(record.completion).toBe(reply.json.usage.completion_tokens);
    expect(record.completion).toBe(18);
  });

  test("the length cap: finish=length", async () => {
    const { record } = await oneRecord(() => postJson(chat, "/v1/chat/completions", body({ max_tokens: 3 })));
    expect(record).toMatchObject({ completion: 3, finish: "length" });
  });

  test("a fill-in-the-middle completion", async () => {
    const req = {
      model: fim.model,
      prompt: "def add(a, b):\n    ",
      suffix: "\n\nprint(add(1, 2))",
      max_tokens: 8,
      temperature: 0,
    };
    const { reply, record } = await oneRecord(() => postJson(fim, "/v1/completions", req));
    expect(reply.status).toBe(200);
    expect(record).toMatchObject({
      status: 200,
      route: "/v1/completions",
      model: reply.json.superfluid.served_by,
      id: reply.json.id,
      prompt: reply.json.usage.prompt_tokens,
      cached: reply.json.superfluid.cached,
      completion: reply.json.usage.completion_tokens,
      finish: reply.json.choices[0].finish_reason,
    });
    expectTimings(record);
    expect(LINE.test(formatAccess(record))).toBe(true);
  });

  test("a plain completion", async () => {
    const { reply, record } = await oneRecord(() =>
      postJson(chat, "/v1/completions", { model: chat.model, prompt: "Hi\n\n", max_tokens: 32 }),
    );
    expect(record).toMatchObject({
      route: "/v1/completions",
      id: reply.json.id,
      prompt: reply.json.usage.prompt_tokens,
      completion: reply.json.usage.completion_tokens,
      finish: "stop",
    });
  });

  test("Ollama's chat and generate, whole and streamed", async () => {
    for (const stream of [false, true]) {
      const chatReq = { model: chat.model, messages: user("Say hello."), stream };
      const { reply: c, record: rc } = await oneRecord(async () => {
        const text = await (await post(chat, "/api/chat", chatReq)).text();
        return JSON.parse(text.trim().split("\n").at(-1)!);
      });
      expect(c.done).toBe(true);
      expect(rc).toMatchObject({
        status: 200,
        route: "/api/chat",
        model: chat.model,
        prompt: c.prompt_eval_count,
        cached: c.prompt_eval_cached_count,
        completion: c.eval_count,
        finish: "stop",
      });
      expectTimings(rc);
      const { reply: g, record: rg } = await oneRecord(async () => {
        const text = await (
          await post(chat, "/api/generate", { model: chat.model, prompt: "Say hello.", stream })
        ).text();
        return JSON.parse(text.trim().split("\n").at(-1)!);
      });
      expect(rg).toMatchObject({
        status: 200,
        route: "/api/generate",
        prompt: g.prompt_eval_count,
        completion: g.eval_count,
        finish: "stop",
      });
    }
  });

  test("Anthropic's messages, whole and streamed", async () => {
    const req = { model: chat.model, max_tokens: 32, messages: user("Say hello.") };
    const { reply, record } = await oneRecord(() => postJson(chat, "/v1/messages", req));
    const u = reply.json.usage;
    expect(record).toMatchObject({
      status: 200,
      route: "/v1/messages",
      model: chat.model,
      id: reply.json.id,
      prompt: u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens,
      cached: u.cache_read_input_tokens,
      completion: u.output_tokens,
      finish: "stop",
    });
    const { reply: events, record: streamed } = await oneRecord(async () =>
      namedEvents(await (await post(chat, "/v1/messages", { ...req, stream: true })).text()),
    );
    const delta = events.find((e) => e.type === "message_delta");
    expect(streamed).toMatchObject({
      route: "/v1/messages",
      completion: delta.usage.output_tokens,
      cached: delta.usage.cache_read_input_tokens,
      finish: "stop",
    });
  });

  test("Responses, whole and streamed", async () => {
    const req = { model: chat.model, input: "Say hello.", max_output_tokens: 32, store: false };
    const { reply, record } = await oneRecord(() => postJson(chat, "/v1/responses", req));
    expect(record).toMatchObject({
      status: 200,
      route: "/v1/responses",
      model: chat.model,
      id: reply.json.id,
      prompt: reply.json.usage.input_tokens,
      cached: reply.json.usage.input_tokens_details.cached_tokens,
      completion: reply.json.usage.output_tokens,
      finish: "stop",
    });
    const { reply: events, record: streamed } = await oneRecord(async () =>
      namedEvents(await (await post(chat, "/v1/responses", { ...req, stream: true })).text()),
    );
    const done = events.find((e) => e.type === "response.completed");
    expect(streamed).toMatchObject({
      route: "/v1/responses",
      id: done.response.id,
      completion: done.response.usage.output_tokens,
      finish: "stop",
    });
  });

  test("a request refused before it generates logs nothing", async () => {
    const seen = records.length;
    const r = await postJson(chat, "/v1/chat/completions", { model: chat.model, messages: "not a list" });
    expect(r.status).toBe(400);
    expect(records.length).toBe(seen);
  });
});

describe("cancelled requests", () => {
  const long = (extra: Record<string, unknown> = {}) => body({ ignore_eos: true, max_tokens: 100_000, ...extra });

  test("a stream the client leaves: finish=cancelled, the tokens it got so far", async () => {
    const seen = records.length;
    const controller = new AbortController();
    const res = await post(chat, "/v1/chat/completions", long({ stream: true }), { signal: controller.signal });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    // A few chunks in: the generation is running.
    while (text.split("data: ").length < 4) {
      const { done, value } = await reader.read();
      if (done) throw new Error("the stream ended before it was cancelled");
      text += decoder.decode(value, { stream: true });
    }
    controller.abort();
    const record = await recordAfter(seen);
    expect(record).toMatchObject({
      status: 200,
      route: "/v1/chat/completions",
      model: chat.model,
      finish: "cancelled",
    });
    expect(record.completion).toBeGreaterThan(0);
    expect(record.completion).toBeLessThan(4096);
    expectTimings(record);
    expect(formatAccess(record)).toEndWith(" finish=cancelled");
    expect(records.length).toBe(seen + 1);
  });

  test("a whole reply the client leaves: finish=cancelled", async () => {
    const seen = records.length;
    const controller = new AbortController();
    const pending = post(chat, "/v1/chat/completions", long(), { signal: controller.signal }).catch(() => undefined);
    const started = performance.now();
    while ((await slots(chat)).lanes.active === 0) {
      if (performance.now() - started > 30_000) throw new Error("never admitted");
      await Bun.sleep(10);
    }
    controller.abort();
    await pending;
    const record = await recordAfter(seen);
    expect(record).toMatchObject({ status: 200, route: "/v1/chat/completions", finish: "cancelled" });
    expect(records.length).toBe(seen + 1);
  });
});

/** A server on the built-in model with these flags, its startup lines going to its own logger. */
async function serverWith(args: string[], env: Record<string, string> = {}) {
  const opts = parseServeOptions(
    [
      await fixturePath("tiny-chat"),
      "--port",
      "0",
      "--max-context",
      "2048",
      "--max-batch",
      "2",
      "--threads",
      "1",
      "--sessions",
      tempDir(),
      ...args,
    ],
    env,
  ) as ServeOptions;
  return startServer(opts);
}

const mode = (path: string) => statSync(path).mode & 0o777;

describe("--log-dir", () => {
  test("JSON lines: the startup lines and one object per access record, in a 0600 file", async () => {
    const dir = join(tempDir(), "logs");
    const server = await serverWith(["--log-dir", dir]);
    const { url } = server;
    const model = server.registry.default!.id;
    let reply: any;
    try {
      reply = await (
        await fetch(`${server.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model, messages: user("Say hello.") }),
        })
      ).json();
    } finally {
      await server.close();
    }
    expect(readdirSync(dir)).toEqual(["superfluid.0.jsonl"]);
    expect(mode(dir)).toBe(0o700);
    expect(mode(join(dir, "superfluid.0.jsonl"))).toBe(0o600);
    const lines = readFileSync(join(dir, "superfluid.0.jsonl"), "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    for (const l of lines) expect(Number.isNaN(Date.parse(l.time))).toBe(false);
    const messages = lines.filter((l) => l.type === "message");
    expect(messages.some((l) => l.level === "info" && l.message === `superfluid: serving ${model} at ${url}/v1`)).toBe(
      true,
    );
    const access = lines.filter((l) => l.type === "access");
    expect(access).toHaveLength(1);
    const { time: _, ...fields } = access[0];
    expect(fields).toEqual({
      level: "info",
      type: "access",
      status: 200,
      method: "POST",
      route: "/v1/chat/completions",
      model,
      id: reply.id,
      prompt: reply.usage.prompt_tokens,
      cached: reply.usage.prompt_tokens_details.cached_tokens,
      completion: 9,
      ttft_ms: expect.any(Number),
      prefill_tps: expect.any(Number),
      decode_tps: expect.any(Number),
      total_ms: expect.any(Number),
      wait_ms: expect.any(Number),
      finish: "stop",
    });
    // Never content: neither the prompt nor the reply is in the log.
    const raw = readFileSync(join(dir, "superfluid.0.jsonl"), "utf8");
    expect(raw).not.toContain("Say hello");
    expect(raw).not.toContain("Hello from");
  });

  test("rotation: a new file once the next line would pass the cap, the newest N kept, each 0600", () => {
    const dir = tempDir();
    const log = new RotatingLog(dir, { maxBytes: 200, keep: 3 });
    const line = (i: number) => JSON.stringify({ i, pad: "x".repeat(40) });
    for (let i = 0; i < 40; i++) log.write(line(i));
    log.close();
    const numbers = logFileNumbers(dir);
    expect(numbers).toHaveLength(3);
    expect(numbers[2]! - numbers[0]!).toBe(2);
    const kept = numbers.flatMap((n) => {
      const path = join(dir, `superfluid.${n}.jsonl`);
      expect(mode(path)).toBe(0o600);
      expect(statSync(path).size).toBeLessThanOrEqual(200);
      return readFileSync(path, "utf8")
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l).i as number);
    });
    // The newest lines, in order, none lost between the kept files.
    expect(kept.at(-1)).toBe(39);
    expect(kept).toEqual(Array.from({ length: kept.length }, (_, k) => 40 - kept.length + k));
    // A restart continues the newest file (it has room) and keeps the count.
    const again = new RotatingLog(dir, { maxBytes: 200, keep: 3 });
    again.close();
    expect(logFileNumbers(dir)).toEqual(numbers);
  });

  test("an existing file is tightened to 0600", () => {
    const dir = tempDir();
    writeFileSync(join(dir, "superfluid.4.jsonl"), "");
    chmodSync(join(dir, "superfluid.4.jsonl"), 0o644);
    const log = new RotatingLog(dir);
    log.write("{}");
    log.close();
    expect(mode(join(dir, "superfluid.4.jsonl"))).toBe(0o600);
    expect(readFileSync(join(dir, "superfluid.4.jsonl"), "utf8")).toBe("{}\n");
  });
});

describe("--log-file, -v, --quiet", () => {
  test("--log-file with -v: startup lines and verbose access lines appended in place of stderr, 0600", async () => {
    const path = join(tempDir(), "server.log");
    writeFileSync(path, "an earlier line\n");
    chmodSync(path, 0o644);
    const server = await serverWith(["--log-file", path, "-v"]);
    const model = server.registry.default!.id;
    let id: string;
    try {
      const reply: any = await (
        await fetch(`${server.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model, messages: user("Say hello.") }),
        })
      ).json();
      id = reply.id;
    } finally {
      await server.close();
    }
    expect(mode(path)).toBe(0o600);
    const lines = readFileSync(path, "utf8").trimEnd().split("\n");
    expect(lines[0]).toBe("an earlier line");
    expect(lines).toContain(`superfluid: serving ${model} at ${server.url}/v1`);
    const access = lines.filter((l) => l.startsWith("<-- "));
    expect(access).toHaveLength(1);
    const m = / id=(\S+) wait=(\d+)ms$/.exec(access[0]!);
    expect(m?.[1]).toBe(id);
    expect(LINE.test(access[0]!.slice(0, m!.index))).toBe(true);
  });

  test("--quiet drops access lines, not the others; a JSON log is unaffected", () => {
    const dir = tempDir();
    const plain: string[] = [];
    const logger = new Logger({ quiet: true, stderr: (l) => plain.push(l) });
    logger.line("superfluid: serving");
    logger.access("<-- 200 POST /v1/chat/completions", { status: 200 });
    expect(plain).toEqual(["superfluid: serving"]);
    const withDir = new Logger({ quiet: true, logDir: dir, stderr: (l) => plain.push(l) });
    withDir.line("superfluid: WARNING off loopback");
    withDir.access("<-- 200", { status: 200 });
    withDir.close();
    const lines = readFileSync(join(dir, "superfluid.0.jsonl"), "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.type, l.level])).toEqual([
      ["message", "warn"],
      ["access", "info"],
    ]);
    // The JSON log takes access records off the terminal; messages stay on it.
    expect(plain).toEqual(["superfluid: serving", "superfluid: WARNING off loopback"]);
  });

  test("the flags parse", () => {
    const parse = (args: string[], env: Record<string, string> = {}) => parseServeOptions(args, env) as ServeOptions;
    expect(parse([])).toMatchObject({ verbose: false, quiet: false, models: [] });
    expect(parse(["-v", "m.gguf"])).toMatchObject({ verbose: true, models: ["m.gguf"] });
    expect(parse(["--verbose"]).verbose).toBe(true);
    expect(parse(["--quiet"]).quiet).toBe(true);
    expect(parse([], { SUPERFLUID_QUIET: "1" }).quiet).toBe(true);
    expect(parse(["--log-dir", "/tmp/x", "--log-file=/tmp/y.log"])).toMatchObject({
      logDir: "/tmp/x",
      logFile: "/tmp/y.log",
    });
    expect(() => parse(["--log-dir", ""])).toThrow("--log-dir expects a path");
    expect(
      accessJson({
        status: 200,
        route: "/r",
        model: "m",
        prompt: 3,
        cached: 3,
        completion: 0,
        finish: "cancelled",
        totalMs: 5,
      }),
    ).toMatchObject({
      ttft_ms: null,
      prefill_tps: null,
      decode_tps: null,
      wait_ms: null,
    });
  });
});
