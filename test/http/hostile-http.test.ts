// Hostile HTTP input: no reply carries a debug page, a stack or a path of this
// machine; pages elsewhere and DNS-rebinding names are refused (docs/api/openai.md#request-checks);
// only JSON bodies are read (415); pipelined requests are all answered, in
// order; a method a path does not take is 405 with Allow; and request fields of
// the wrong shape are 400s naming the field. Requests the fetch API cannot
// make (CONNECT, unknown methods, a chosen Host, no Content-Type) go over a raw
// socket.
import { describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { hostname } from "node:os";
import { basename, dirname } from "node:path";
import { asRequestError as asApiError } from "../../src/pipeline/request-failure.ts";
import { foreignRequestRefusal, type HostPolicy } from "../../src/http/origin-guard.ts";
import { parseServeOptions, type ServeOptions } from "../../src/cli/serve-options.ts";
import { fixturePath } from "../support/models.ts";
import { envelope, getJson, parseRawResponse, postJson, useServer, user, type RawResponse } from "./support.ts";

const s = useServer();

/** The replies in `buf`, in order, as far as they are whole (a reply without Content-Length ends the list). */
function replies(buf: Buffer): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = buf;
  for (;;) {
    const reply = parseRawResponse(rest);
    if (!reply) return out;
    out.push(reply);
    const length = reply.headers["content-length"];
    if (length === undefined) return out;
    rest = rest.subarray(rest.indexOf("\r\n\r\n") + 4 + Number(length));
  }
}

/**
 * Sends `data` in one write on a new connection; returns the bytes received once `done` holds for them or the server
 * closed.
 */
async function received(data: string, done: (buf: Buffer) => boolean = () => false): Promise<Buffer> {
  const socket = connect(s.port, "127.0.0.1");
  let got = Buffer.alloc(0);
  let closed = false;
  socket.on("data", (d: Buffer) => (got = Buffer.concat([got, d])));
  socket.on("close", () => (closed = true));
  await new Promise((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  socket.on("error", () => {});
  socket.write(data);
  const started = performance.now();
  // A hang guard only: the replies are waited for, never timed.
  while (!closed && !done(got) && performance.now() - started < 60_000) await Bun.sleep(10);
  socket.destroy();
  return got;
}

/** Sends `data` in one write on a new connection; returns the replies once `count` are whole or the server closed. */
async function exchange(data: string, count = 1): Promise<RawResponse[]> {
  return replies(await received(data, (buf) => replies(buf).length >= count));
}

/** One HTTP/1.1 request as bytes; Host is this server's unless `headers` names one (null leaves it out). */
function request(method: string, path: string, headers: Record<string, string | null> = {}, body?: string): string {
  const all: Record<string, string | null> = { host: `127.0.0.1:${s.port}`, ...headers };
  if (body !== undefined) all["content-length"] = String(Buffer.byteLength(body));
  const lines = Object.entries(all).flatMap(([k, v]) => (v === null ? [] : [`${k}: ${v}\r\n`]));
  return `${method} ${path} HTTP/1.1\r\n${lines.join("")}\r\n${body ?? ""}`;
}

async function one(
  method: string,
  path: string,
  headers: Record<string, string | null> = {},
  body?: string,
): Promise<RawResponse> {
  const [reply] = await exchange(request(method, path, { connection: "close", ...headers }, body));
  if (!reply) throw new Error(`no reply to ${method} ${path}`);
  return reply;
}

const chatBody = (extra: Record<string, unknown> = {}) => ({
  model: s.model,
  messages: user("hi"),
  max_tokens: 2,
  temperature: 0,
  ...extra,
});
const chat = (extra: Record<string, unknown> = {}) => postJson(s, "/v1/chat/completions", chatBody(extra));
const jsonHeaders = { "content-type": "application/json" };

async function expect400(res: Promise<{ status: number; json: any }>, param: string) {
  const r = await res;
  expect(r.status).toBe(400);
  const e = envelope(r.json);
  expect(e.param ?? "").toStartWith(param);
  expect(e.message).toContain(param);
}

describe("no reply is a debug page, a stack or a path of this machine", () => {
  test("CONNECT: 405 in the envelope with Allow, not Bun's HTML error page", async () => {
    const reply = await one("CONNECT", "127.0.0.1:22", { host: "127.0.0.1:22" });
    expect(reply.status).toBe(405);
    expect(reply.headers["content-type"]).toContain("application/json");
    expect(reply.headers.allow).toBe("DELETE, GET, HEAD, POST");
    expect(envelope(JSON.parse(reply.body)).code).toBe("method_not_allowed");
  });

  test("a request line the parser cannot read: 400 in the envelope", async () => {
    for (const raw of [
      "GARBAGE\r\n\r\n",
      "GET /health HTTP/9.9\r\nhost: localhost\r\n\r\n",
      "GET /health HTTP/1.1\r\nno colon here\r\n\r\n",
    ]) {
      const [reply] = await exchange(raw);
      expect(reply?.status).toBe(400);
      envelope(JSON.parse(reply!.body));
    }
  });

  test("hostile requests and /props answer without the working directory, the model's folder or a stack", async () => {
    const modelDir = dirname(await fixturePath("tiny-random"));
    const answers = [
      await one("CONNECT", "localhost:80", { host: "localhost:80" }),
      await one("FOO", "/v1/chat/completions"),
      await one("OPTIONS", "*"),
      await one("POST", "/v1/chat/completions", jsonHeaders, "{not json"),
      await one("POST", "/v1/chat/completions", { "content-type": "text/plain" }, "{}"),
      await one("GET", "/props"),
      await one("GET", "/v1/models"),
    ];
    for (const reply of answers) {
      for (const secret of [process.cwd(), modelDir, dirname(s.server.sessions.path)])
        expect(reply.body).not.toContain(secret);
      expect(reply.body).not.toMatch(/<html|<!doctype|\n\s+at |\/\$bunfs\//i);
    }
  });

  test("/props names the model file without its folder", async () => {
    const props = (await getJson(s, "/props")).json;
    expect(props.model_path).toBe(basename(await fixturePath("tiny-random")));
    expect(props.build_info).not.toContain("/");
  });

  test("an internal error's message keeps file names, not absolute paths", () => {
    const e = asApiError(
      new Error(
        "ENOENT: no such file or directory, open '/home/u/.cache/models/m.gguf' (at file:///srv/app/x.ts:3:1, C:\\Users\\u\\w.log)",
      ),
    );
    expect(e.status).toBe(500);
    expect(e.message).toBe("internal error: ENOENT: no such file or directory, open 'm.gguf' (at x.ts:3:1, w.log)");
  });
});

describe("Origin and Host (docs/api/openai.md#request-checks)", () => {
  test("an Origin that is not a page on this machine: 403 origin_refused, and nothing runs", async () => {
    for (const origin of ["http://evil.example", "https://localhost.evil.example", "null", "http://10.0.0.1:8453"]) {
      const health = await one("GET", "/health", { origin });
      expect(health.status).toBe(403);
      const e = envelope(JSON.parse(health.body));
      expect(e.code).toBe("origin_refused");
      expect(e.type).toBe("permission_error");
      const post = await one("POST", "/v1/chat/completions", { origin, ...jsonHeaders }, JSON.stringify(chatBody()));
      expect(post.status).toBe(403);
      expect(JSON.parse(post.body).choices).toBeUndefined();
      // Before any routing: a path no route has is refused the same way.
      expect((await one("GET", "/nowhere", { origin })).status).toBe(403);
    }
  });

  test("a page on this machine, on any port, is served", async () => {
    for (const origin of [
      "http://localhost:5173",
      "http://127.0.0.1",
      "https://127.8.9.10:3000",
      "http://[::1]:8080",
    ]) {
      expect((await one("GET", "/health", { origin })).status).toBe(200);
    }
    const post = await one(
      "POST",
      "/v1/chat/completions",
      { origin: "http://localhost:3000", ...jsonHeaders },
      JSON.stringify(chatBody()),
    );
    expect(post.status).toBe(200);
    expect(JSON.parse(post.body).choices).toHaveLength(1);
  });

  test("bound to loopback, a Host that is not a loopback name is refused (DNS rebinding)", async () => {
    for (const host of ["rebind.attacker.example", "rebind.attacker.example:8453", "10.1.2.3", "localhost.", "a b"]) {
      const reply = await one("GET", "/props", { host });
      expect(reply.status).toBe(403);
      expect(envelope(JSON.parse(reply.body)).code).toBe("origin_refused");
      expect(reply.body).not.toContain("model_path");
    }
    for (const host of ["localhost", "LOCALHOST:1", "127.0.0.1", "127.3.2.1:80", "[::1]", "[::1]:8453"]) {
      expect((await one("GET", "/health", { host })).status).toBe(200);
    }
    // HTTP/1.0 may leave Host out; no browser does.
    expect((await received("GET /health HTTP/1.0\r\n\r\n")).toString("latin1")).toStartWith("HTTP/1.1 200 ");
  });

  test("bound elsewhere: IP literals and this machine's names without a key, any name with one", () => {
    const check = (host: string, policy: HostPolicy) =>
      foreignRequestRefusal(new Request("http://x/health", { headers: { host } }), policy);
    const open: HostPolicy = { bind: "0.0.0.0", authenticated: false };
    for (const host of ["192.168.1.5:8453", "[fe80::1]", "localhost", hostname(), `${hostname()}.local:8453`])
      expect(check(host, open)).toBeUndefined();
    expect(check("rebind.attacker.example", open)?.status).toBe(403);
    expect(check("rebind.attacker.example", { bind: "0.0.0.0", authenticated: true })).toBeUndefined();
    expect(
      check(hostname() === "localhost" ? "example.com" : hostname(), { bind: "127.0.0.1", authenticated: true })
        ?.status,
    ).toBe(403);
  });

  test("--allow-host: the names given pass whatever the bind, * passes any; others are still refused", () => {
    const check = (host: string, policy: HostPolicy) =>
      foreignRequestRefusal(new Request("http://x/health", { headers: { host } }), policy);
    const named: HostPolicy = { bind: "0.0.0.0", authenticated: false, hosts: ["superfluid.models.svc"] };
    expect(check("superfluid.models.svc:8080", named)).toBeUndefined();
    expect(check("SUPERFLUID.models.svc", named)).toBeUndefined();
    expect(check("rebind.attacker.example", named)?.status).toBe(403);
    expect(check("superfluid.models.svc", { ...named, bind: "127.0.0.1" })).toBeUndefined();
    expect(check("anything.example", { bind: "0.0.0.0", authenticated: false, hosts: ["*"] })).toBeUndefined();
    const opts = (args: string[]) => parseServeOptions(args, { HOME: "/h" }) as ServeOptions;
    expect(opts(["--allow-host", "Router.Local", "--allow-host", "*"]).allowHosts).toEqual(["router.local", "*"]);
    for (const bad of ["host:8080", "", "a b", "http://x"])
      expect(() => opts(["--allow-host", bad])).toThrow("--allow-host expects");
  });

  test("CORS only for an allowed page: a preflight from elsewhere is the 403, with no CORS headers", async () => {
    const ask = { "access-control-request-method": "POST", "access-control-request-headers": "content-type" };
    const corsHeaders = (reply: RawResponse) =>
      Object.keys(reply.headers).filter((h) => h.startsWith("access-control-"));
    const local = await one("OPTIONS", "/v1/chat/completions", { origin: "http://localhost:3000", ...ask });
    expect(local.status).toBe(204);
    expect(local.headers["access-control-allow-origin"]).toBe("http://localhost:3000");
    for (const origin of ["http://evil.example", "null", "chrome-extension://abcdefghijklmnopabcdefghijklmnop"]) {
      const preflight = await one("OPTIONS", "/v1/chat/completions", { origin, ...ask });
      expect(preflight.status).toBe(403);
      expect(envelope(JSON.parse(preflight.body)).code).toBe("origin_refused");
      const served = await one("GET", "/v1/models", { origin });
      expect(served.status).toBe(403);
      for (const reply of [preflight, served]) expect(corsHeaders(reply)).toEqual([]);
    }
    // An OPTIONS that is no preflight (no Origin) is still a method /v1/chat/completions does not take.
    const plain = await one("OPTIONS", "/v1/chat/completions", ask);
    expect(plain.status).toBe(405);
    expect(corsHeaders(plain)).toEqual([]);
  });
});

describe("only JSON bodies are read", () => {
  const body = () => JSON.stringify(chatBody());

  test("text/plain, a form and multipart (what a page sends with no preflight): 415 on every JSON route", async () => {
    for (const type of [
      "text/plain;charset=UTF-8",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
    ]) {
      for (const path of ["/v1/chat/completions", "/v1/completions", "/v1/tokenize"]) {
        const reply = await one("POST", path, { "content-type": type }, body());
        expect(reply.status).toBe(415);
        const e = envelope(JSON.parse(reply.body));
        expect(e.code).toBe("unsupported_media_type");
        expect(e.message).toContain("application/json");
      }
    }
  });

  test("application/json with parameters, a +json type and no Content-Type at all are read", async () => {
    for (const type of [
      "application/json; charset=utf-8",
      "Application/JSON",
      "application/vnd.superfluid+json",
      null,
    ]) {
      const reply = await one("POST", "/v1/chat/completions", { "content-type": type }, body());
      expect(reply.status).toBe(200);
      expect(JSON.parse(reply.body).choices).toHaveLength(1);
    }
  });
});

describe("bodies nested too deep or cut short", () => {
  test("nesting beyond 256 levels is a 400, at any depth (no stack overflow)", async () => {
    for (const depth of [300, 40_000]) {
      const nested = `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
      const raw = `{"model":"${s.model}","max_tokens":2,"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"x":${nested}}}`;
      const res = await fetch(`${s.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: raw,
      });
      expect(res.status).toBe(400);
      expect(envelope(await res.json()).message).toContain("nested deeper than 256");
    }
    // Brackets inside strings do not count.
    const r = await postJson(s, "/v1/chat/completions", chatBody({ messages: user("[".repeat(1000)) }));
    expect(r.status).toBe(200);
  });

  test("a client gone before its whole body arrived leaves no internal error behind", async () => {
    const logged: string[] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => void logged.push(args.join(" "));
    try {
      const socket = connect(s.port, "127.0.0.1");
      await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
      const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
      socket.write(
        'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 79\r\n\r\n{"model":',
      );
      socket.destroy();
      await closed;
      // The server is unharmed and answers the next request (by then the cut body has been seen).
      expect((await postJson(s, "/v1/chat/completions", chatBody())).status).toBe(200);
    } finally {
      console.error = original;
    }
    expect(logged.filter((l) => l.includes("internal error"))).toEqual([]);
  });
});

describe("pipelining", () => {
  test("a chat POST with a GET pipelined behind it on one write: both answered, in order", async () => {
    const raw =
      request("POST", "/v1/chat/completions", jsonHeaders, JSON.stringify(chatBody())) +
      request("GET", "/health", { connection: "close" });
    const [first, second] = await exchange(raw, 2);
    expect(first?.status).toBe(200);
    const reply = JSON.parse(first!.body);
    expect(reply.object).toBe("chat.completion");
    expect(reply.usage.completion_tokens).toBe(2);
    expect(second?.status).toBe(200);
    expect(JSON.parse(second!.body).status).toBe("ok");
  });

  test("three generations pipelined: three replies, in the order asked", async () => {
    const prompts = ["one", "two", "three"];
    const raw = prompts
      .map((p, i) =>
        request(
          "POST",
          i === 2 ? "/v1/completions" : "/v1/chat/completions",
          jsonHeaders,
          JSON.stringify(i === 2 ? { model: s.model, prompt: p, max_tokens: 2 } : chatBody({ messages: user(p) })),
        ),
      )
      .join("");
    const got = await exchange(raw, 3);
    expect(got.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(got.map((r) => JSON.parse(r.body).object)).toEqual([
      "chat.completion",
      "chat.completion",
      "text_completion",
    ]);
  });
});

describe("methods", () => {
  test("a method a known path does not take: 405 with Allow, in the envelope", async () => {
    const cases: [string, string, string][] = [
      ["GET", "/v1/chat/completions", "POST"],
      ["PUT", "/v1/completions", "POST"],
      ["POST", "/health", "GET, HEAD"],
      ["PUT", "/v1/models/tiny-random", "DELETE, GET, HEAD"],
      ["FOO", "/v1/chat/completions", "POST"],
      ["BREW", "/slots", "GET, HEAD"],
    ];
    for (const [method, path, allow] of cases) {
      const reply = await one(method, path);
      expect(`${method} ${path} ${reply.status}`).toBe(`${method} ${path} 405`);
      expect(reply.headers.allow).toBe(allow);
      const e = envelope(JSON.parse(reply.body));
      expect(e.code).toBe("method_not_allowed");
      expect(e.message).toContain(method);
    }
  });

  test("an unknown method pipelined behind a request: the first is answered, then the 405", async () => {
    const got = await exchange(request("GET", "/health") + request("FOO", "/v1/models"), 2);
    expect(got.map((r) => r.status)).toEqual([200, 405]);
    expect(got[1]!.headers.allow).toBe("GET, HEAD");
  });

  test("a path no route has stays 404, whatever the method", async () => {
    for (const method of ["GET", "POST", "FOO"]) {
      const reply = await one(method, "/v1/nothing-here");
      expect(reply.status).toBe(404);
      expect(envelope(JSON.parse(reply.body)).type).toBe("not_found_error");
    }
  });

  test("HEAD is a GET without the body", async () => {
    const raw = (await received(request("HEAD", "/health", { connection: "close" }))).toString("latin1");
    expect(raw).toStartWith("HTTP/1.1 200 ");
    expect(Number(/\r\ncontent-length: (\d+)\r\n/i.exec(raw)?.[1])).toBeGreaterThan(0);
    expect(raw).toEndWith("\r\n\r\n");
  });
});

describe("request fields of the wrong shape: 400 naming the field", () => {
  const tools = [{ type: "function", function: { name: "f", parameters: { type: "object" } } }];

  test("tool_choice must be none, auto, required or a named function", async () => {
    for (const choice of [
      "bogus",
      7,
      [],
      { type: "function" },
      { type: "function", function: { name: 5 } },
      { type: "tool", function: { name: "f" } },
    ]) {
      await expect400(chat({ tools, tool_choice: choice }), "tool_choice");
    }
    for (const choice of ["none", "auto"]) expect((await chat({ tools, tool_choice: choice })).status).toBe(200);
  });

  test("stream_options (chat and completions), chat_template_kwargs and logit_bias must be objects, not arrays", async () => {
    for (const field of ["stream_options", "chat_template_kwargs", "logit_bias"]) {
      for (const value of [[1], [100], "x", 3]) await expect400(chat({ [field]: value }), field);
    }
    await expect400(
      postJson(s, "/v1/completions", { model: s.model, prompt: "hi", max_tokens: 1, stream_options: [1] }),
      "stream_options",
    );
    expect((await chat({ stream_options: {}, chat_template_kwargs: {}, logit_bias: {} })).status).toBe(200);
  });

  test("strict must be a boolean, in tools and in response_format.json_schema", async () => {
    for (const strict of ["yes", 1, {}, []]) {
      await expect400(
        chat({ tools: [{ type: "function", function: { name: "f", strict } }] }),
        "tools[0].function.strict",
      );
      await expect400(
        chat({
          response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object" }, strict } },
        }),
        "response_format.json_schema.strict",
      );
    }
    for (const strict of [true, false, null]) {
      expect((await chat({ tools: [{ type: "function", function: { name: "f", strict } }] })).status).toBe(200);
      expect(
        (
          await chat({
            response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object" }, strict } },
          })
        ).status,
      ).toBe(200);
    }
  });

  test("a seed must be a 32-bit integer (what the sampler takes), on chat and completions", async () => {
    const completion = (seed: number) =>
      postJson(s, "/v1/completions", { model: s.model, prompt: "hi", max_tokens: 1, seed });
    for (const seed of [2 ** 32, 2 ** 32 + 1, -(2 ** 31) - 1, 2 ** 53, 1e20, 1.5]) {
      await expect400(chat({ seed }), "seed");
      await expect400(completion(seed), "seed");
    }
    for (const seed of [0, 1, 2 ** 32 - 1, -1, -(2 ** 31)]) {
      expect((await chat({ seed, temperature: 1 })).status).toBe(200);
      expect((await completion(seed)).status).toBe(200);
    }
  });
});
