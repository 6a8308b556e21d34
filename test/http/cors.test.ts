// CORS on the main listener (docs/api/security.md#cors), per route and per API
// family: a preflight on every route the app registers answers 204 for an allowed
// origin, with no key even on a server with keys; replies to an allowed origin,
// JSON, SSE, NDJSON and errors alike, name it and list the headers a page may read;
// an origin not on the list gets today's 403 and no CORS header; an extension's
// origin passes only where --allow-origin lists it; and `*` is said loudly.
// Three servers on the built-in tiny-chat model, in this process.
import { describe, expect, test } from "bun:test";
import { familyOf } from "../../src/http/families.ts";
import { envelope, registeredRoutes, useServer } from "./support.ts";

const KEY = "sk-cors-1a2b3c";
const EXTENSION = "chrome-extension://abcdefghijklmnopabcdefghijklmnop";
const LOCAL_PAGE = "http://localhost:3000";

/** No key; extensions listed. */
const open = useServer({ fixture: "tiny-chat", maxBatch: 1, extraArgs: ["--allow-origin", "chrome-extension://*"] });
/** A key; a web domain listed, extensions not. */
const keyed = useServer({
  fixture: "tiny-chat",
  maxBatch: 1,
  apiKey: KEY,
  extraArgs: ["--api-key", KEY, "--allow-origin", "https://*.example.com"],
});
const anyLog: string[] = [];
/** A key and `--allow-origin '*'`. */
const any = useServer({
  fixture: "tiny-chat",
  maxBatch: 1,
  apiKey: KEY,
  extraArgs: ["--api-key", KEY, "--allow-origin", "*"],
  log: (line) => anyLog.push(line),
});

/** Every request header the families read, and one they do not. */
const ASKED = [
  "content-type",
  "authorization",
  "x-api-key",
  "anthropic-version",
  "anthropic-beta",
  "anthropic-dangerous-direct-browser-access",
  "x-stainless-os",
  "x-stainless-retry-count",
  "x-superfluid-qos",
  "x-superfluid-session-key",
  "x-not-read",
];

interface Reply {
  status: number;
  headers: Headers;
  text: string;
}

async function call(
  server: { url: string },
  method: string,
  path: string,
  opts: { origin?: string; key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.origin !== undefined) headers.origin = opts.origin;
  if (opts.key !== undefined) headers.authorization = `Bearer ${opts.key}`;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers,
    ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const preflight = (server: { url: string }, path: string, origin: string, method = "POST", extra = {}) =>
  call(server, "OPTIONS", path, {
    origin,
    headers: { "access-control-request-method": method, "access-control-request-headers": ASKED.join(","), ...extra },
  });

const corsHeaderNames = (r: Reply) => [...r.headers.keys()].filter((h) => h.startsWith("access-control-"));
const varies = (r: Reply) => (r.headers.get("vary") ?? "").toLowerCase().split(/\s*,\s*/);

/** Why `r` is not a reply a page on `origin` may read, or undefined. */
function unreadable(r: Reply, origin: string): string | undefined {
  if (r.headers.get("access-control-allow-origin") !== origin)
    return `access-control-allow-origin is ${r.headers.get("access-control-allow-origin")}, want ${origin}`;
  if (!varies(r).includes("origin")) return `vary is ${r.headers.get("vary")}`;
  const exposed = (r.headers.get("access-control-expose-headers") ?? "").split(/\s*,\s*/);
  for (const h of ["x-superfluid-warm", "x-request-id", "retry-after", "x-ratelimit-remaining-requests"])
    if (!exposed.includes(h)) return `access-control-expose-headers lacks ${h}`;
  return undefined;
}

/** A request path for an Elysia route path: parameters and wildcards filled in. */
const concrete = (path: string) => path.replace(/:[^/]+/g, "x").replace(/\*/g, "x");

describe("a preflight on every route, per family", () => {
  const routes = registeredRoutes();
  // The family whose envelope a path's errors carry: OpenAI's for /v1/* and the server's own routes.
  const families = [...new Set(routes.map((r) => familyOf(r.path).name))];

  test("the routes span the three families", () => {
    expect(families.sort()).toEqual(["anthropic", "ollama", "openai"]);
  });

  for (const family of families) {
    test(`${family}: 204 with the origin, the route's methods and the headers read; no key, even on a server with keys`, async () => {
      const problems: string[] = [];
      for (const route of routes.filter((r) => familyOf(r.path).name === family)) {
        const path = concrete(route.path);
        for (const [name, server, origin] of [
          ["no key", open, EXTENSION],
          ["keyed", keyed, LOCAL_PAGE],
        ] as const) {
          const r = await preflight(server, path, origin, route.method);
          const at = `${name} ${route.method} ${path}`;
          if (r.status !== 204) {
            problems.push(`${at}: ${r.status} ${r.text.slice(0, 160)}`);
            continue;
          }
          const why = unreadable(r, origin);
          if (why) problems.push(`${at}: ${why}`);
          const methods = (r.headers.get("access-control-allow-methods") ?? "").split(", ");
          if (!methods.includes(route.method)) problems.push(`${at}: allow-methods ${methods.join(", ")}`);
          const allowed = r.headers.get("access-control-allow-headers");
          if (allowed !== ASKED.filter((h) => h !== "x-not-read").join(", "))
            problems.push(`${at}: allow-headers ${allowed}`);
          if (r.headers.get("access-control-max-age") !== "7200")
            problems.push(`${at}: max-age ${r.headers.get("access-control-max-age")}`);
          if (r.text !== "") problems.push(`${at}: a body`);
        }
      }
      expect(problems).toEqual([]);
    });
  }

  test("the methods named are the path's own; a path no route has is 404; Private Network Access is answered", async () => {
    const models = await preflight(keyed, "/v1/models/x", LOCAL_PAGE, "DELETE");
    expect(models.headers.get("access-control-allow-methods")).toBe("DELETE, GET, HEAD");
    const none = await preflight(keyed, "/v1/nowhere", LOCAL_PAGE);
    expect(none.status).toBe(404);
    expect(unreadable(none, LOCAL_PAGE)).toBeUndefined();
    const pna = await preflight(open, "/api/chat", "https://localhost", "POST", {
      "access-control-request-private-network": "true",
    });
    expect(pna.headers.get("access-control-allow-private-network")).toBe("true");
    expect((await preflight(open, "/api/chat", LOCAL_PAGE)).headers.has("access-control-allow-private-network")).toBe(
      false,
    );
  });

  test("an OPTIONS that is no preflight (no Origin) is what it was: 405 with Allow, and 401 first with keys", async () => {
    const plain = await call(open, "OPTIONS", "/v1/chat/completions", {
      headers: { "access-control-request-method": "POST" },
    });
    expect(plain.status).toBe(405);
    expect(plain.headers.get("allow")).toBe("POST");
    expect(corsHeaderNames(plain)).toEqual([]);
    expect((await call(keyed, "OPTIONS", "/v1/chat/completions")).status).toBe(401);
  });
});

/** One JSON, one streamed and one refused request per family, as a page would make them. */
function requests(model: string) {
  const messages = [{ role: "user", content: "Three facts about Oslo." }];
  return [
    { family: "OpenAI", kind: "JSON", path: "/v1/chat/completions", body: { model, messages, max_tokens: 4 } },
    {
      family: "OpenAI",
      kind: "SSE",
      path: "/v1/chat/completions",
      body: { model, messages, max_tokens: 4, stream: true },
      type: "text/event-stream",
    },
    { family: "OpenAI", kind: "error", path: "/v1/chat/completions", body: { messages }, status: 400 },
    { family: "Anthropic", kind: "JSON", path: "/v1/messages", body: { model, messages, max_tokens: 4 } },
    {
      family: "Anthropic",
      kind: "SSE",
      path: "/v1/messages",
      body: { model, messages, max_tokens: 4, stream: true },
      type: "text/event-stream",
    },
    { family: "Anthropic", kind: "error", path: "/v1/messages", body: { model, messages }, status: 400 },
    {
      family: "Ollama",
      kind: "JSON",
      path: "/api/chat",
      body: { model, messages, stream: false, options: { num_predict: 4 } },
    },
    {
      family: "Ollama",
      kind: "NDJSON",
      path: "/api/chat",
      body: { model, messages, options: { num_predict: 4 } },
      type: "application/x-ndjson",
    },
    { family: "Ollama", kind: "error", path: "/api/chat", body: { messages }, status: 400 },
  ];
}

describe("replies to an allowed origin, per family", () => {
  for (const [name, server, origin, key] of [
    ["an extension listed, no key", open, EXTENSION, undefined],
    ["a page on this machine, with the key", keyed, LOCAL_PAGE, KEY],
    ["a listed web domain, with the key", keyed, "https://app.example.com", KEY],
  ] as const) {
    test(`${name}: JSON, SSE, NDJSON and errors carry the origin and the headers a page may read`, async () => {
      const problems: string[] = [];
      for (const req of requests(server.model)) {
        const r = await call(server, "POST", req.path, { origin, key, body: req.body });
        const at = `${req.family} ${req.kind}`;
        if (r.status !== (req.status ?? 200)) problems.push(`${at}: ${r.status} ${r.text.slice(0, 160)}`);
        if (req.type && !r.headers.get("content-type")?.startsWith(req.type))
          problems.push(`${at}: content-type ${r.headers.get("content-type")}`);
        const why = unreadable(r, origin);
        if (why) problems.push(`${at}: ${why}`);
      }
      // A header the server sets is among those exposed.
      const warm = await call(server, "POST", "/v1/chat/completions", {
        origin,
        key,
        body: requests(server.model)[0]!.body,
      });
      expect(warm.headers.get("x-superfluid-warm")).not.toBeNull();
      const models = await call(server, "GET", "/v1/models", { origin, key });
      expect(unreadable(models, origin)).toBeUndefined();
      const nowhere = await call(server, "GET", "/api/nowhere", { origin, key });
      expect(nowhere.status).toBe(404);
      expect(unreadable(nowhere, origin)).toBeUndefined();
      expect(problems).toEqual([]);
    });
  }

  test("with keys, the request after the preflight needs one: a readable 401 in each family's envelope", async () => {
    for (const path of ["/v1/chat/completions", "/v1/messages", "/api/chat"]) {
      const r = await call(keyed, "POST", path, { origin: LOCAL_PAGE, body: {} });
      expect(r.status).toBe(401);
      expect(unreadable(r, LOCAL_PAGE)).toBeUndefined();
      const body = JSON.parse(r.text);
      if (path === "/api/chat") expect(Object.keys(body)).toEqual(["error"]);
      else if (path === "/v1/messages") expect(body.error.type).toBe("authentication_error");
      else expect(envelope(body).code).toBe("invalid_api_key");
    }
  });

  test("a request without an Origin gets no CORS header, only Vary: Origin", async () => {
    const r = await call(open, "GET", "/v1/models");
    expect(r.status).toBe(200);
    expect(corsHeaderNames(r)).toEqual([]);
    expect(varies(r)).toContain("origin");
  });
});

describe("an origin that is not allowed", () => {
  const refused: [string, typeof open, string][] = [
    ["a web site", open, "https://evil.example"],
    ["a web site, with keys", keyed, "https://evil.example"],
    ["an extension not listed", keyed, EXTENSION],
    ["another browser's extension", open, "moz-extension://0a1b2c3d"],
    ["the listed domain itself, not below it", keyed, "https://example.com"],
    ["a look-alike of the listed domain", keyed, "https://app.example.com.evil.test"],
    ["a sandboxed page", keyed, "null"],
  ];
  for (const [name, server, origin] of refused) {
    test(`${name} (${origin}): the preflight and the request are 403 origin_refused, with no CORS header`, async () => {
      for (const path of ["/v1/chat/completions", "/v1/messages", "/api/chat"]) {
        const pre = await preflight(server, path, origin);
        const req = await call(server, "POST", path, { origin, key: KEY, body: {} });
        for (const r of [pre, req]) {
          expect(r.status).toBe(403);
          expect(corsHeaderNames(r)).toEqual([]);
          // OpenAI's envelope carries the code; Anthropic's and Ollama's the message alone.
          expect(r.text).toContain(`requests from the page origin '${origin}' are refused`);
        }
      }
    });
  }

  test("one list: every origin is either let in with CORS or refused without it, never one without the other", async () => {
    const origins = [
      EXTENSION,
      LOCAL_PAGE,
      "https://app.example.com",
      "https://evil.example",
      "tauri://localhost",
      "null",
    ];
    for (const server of [open, keyed]) {
      for (const origin of origins) {
        const r = await call(server, "GET", "/v1/models", { origin, key: KEY });
        const named = r.headers.get("access-control-allow-origin");
        expect([r.status, named]).toEqual(r.status === 200 ? [200, origin] : [403, null]);
      }
    }
  });
});

describe("--allow-origin '*' with a key", () => {
  test("any origin is answered, `null` included; the key is still needed", async () => {
    for (const origin of ["https://evil.example", "null", EXTENSION]) {
      const pre = await preflight(any, "/v1/chat/completions", origin);
      expect(pre.status).toBe(204);
      expect(unreadable(pre, origin)).toBeUndefined();
      const without = await call(any, "GET", "/v1/models", { origin });
      expect(without.status).toBe(401);
      expect(unreadable(without, origin)).toBeUndefined();
      const withKey = await call(any, "GET", "/v1/models", { origin, key: KEY });
      expect(withKey.status).toBe(200);
      expect(unreadable(withKey, origin)).toBeUndefined();
    }
  });

  test("the startup log says it loudly", () => {
    expect(anyLog).toContain("superfluid: browser pages from * may call this server (CORS)");
    expect(anyLog.some((l) => l.startsWith("superfluid: WARNING --allow-origin lets pages from ANY web site"))).toBe(
      true,
    );
  });
});
