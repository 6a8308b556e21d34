// Who gets past the key gate (docs/api/security.md#keys): every route the app
// serves, unknown paths, HEAD and OPTIONS included, asked with no key, a wrong
// key, a plain policy key, an admin policy key and the global --api-key, each
// key sent both as `Authorization: Bearer` and as `X-Api-Key`. Without a
// valid key the answer is 401 in the path's family envelope (GET /health
// excepted); a plain key passes the gate but is 403 admin_required on the
// admin routes; admin and global keys pass both. Bodies are cheap (a 400 is
// fine: the point is who gets past the gate), and the admin routes name a
// model or adapter that does not exist, so nothing is loaded or unloaded.
// Then the official clients, each making one real call with the policy key
// and failing with their own authentication error on a wrong one.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { envelope, registeredRoutes, useServer } from "../support.ts";

const USER_KEY = "sk-matrix-user-1f2e3d";
const OPS_KEY = "sk-matrix-ops-4c5b6a";
const GLOBAL_KEY = "sk-matrix-global-7a8b9c";
const WRONG_KEY = "sk-matrix-wrong-000000";
const REPLY = "Hello from superfluid's built-in test model.";

const dir = mkdtempSync(join(tmpdir(), "superfluid-auth-matrix-"));
const policy = join(dir, "keys.json");
writeFileSync(
  policy,
  JSON.stringify({
    keys: [
      { name: "user", key: USER_KEY },
      { name: "ops", key: OPS_KEY, admin: true },
    ],
  }),
);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const s = useServer({
  fixture: "tiny-chat",
  maxBatch: 2,
  apiKey: GLOBAL_KEY,
  extraArgs: ["--key-policy", policy, "--api-key", GLOBAL_KEY],
});

type Family = "openai" | "anthropic" | "ollama";

interface Row {
  method: string;
  /** The request target. */
  path: string;
  /**
   * The route pattern it exercises, as the app registers it (for the coverage check); none for unknown paths and
   * methods.
   */
  route?: string;
  /** A JSON body (default `{}` on POST, PUT and PATCH). */
  body?: unknown;
  admin?: boolean;
  /** GET /health and /health/ready: answered without a key. */
  open?: boolean;
  /**
   * The status a key that may use the route gets (every key on a non-admin row, admin and global keys on an admin row).
   */
  keyed: number;
}

const family = (path: string): Family =>
  path.startsWith("/v1/messages") ? "anthropic" : path.startsWith("/api/") ? "ollama" : "openai";

const NO_MODEL = "no-such-model-for-auth-tests";

/** Every route of src/http/app.ts and src/http/*\/family.ts, plus paths and methods nothing serves. */
const ROWS: Row[] = [
  // src/http/app.ts
  { method: "GET", path: "/health", route: "/health", open: true, keyed: 200 },
  { method: "HEAD", path: "/health", open: true, keyed: 200 },
  { method: "GET", path: "/health/ready", route: "/health/ready", open: true, keyed: 200 },
  { method: "POST", path: "/v1/tokenize", route: "/v1/tokenize", body: { content: "hi" }, keyed: 200 },
  { method: "GET", path: "/props", route: "/props", keyed: 200 },
  { method: "GET", path: "/slots", route: "/slots", keyed: 200 },
  { method: "GET", path: "/metrics", route: "/metrics", keyed: 200 },
  { method: "GET", path: "/v1/metrics", route: "/v1/metrics", keyed: 200 },
  { method: "POST", path: "/slots/0/save", route: "/slots/:id/save", keyed: 501 },
  { method: "POST", path: "/slots/0/restore", route: "/slots/:id/restore", keyed: 501 },
  // OpenAI family
  { method: "GET", path: "/v1/models", route: "/v1/models", keyed: 200 },
  { method: "HEAD", path: "/v1/models", keyed: 200 },
  { method: "GET", path: `/v1/models/${NO_MODEL}`, route: "/v1/models/*", keyed: 404 },
  { method: "POST", path: "/v1/chat/completions", route: "/v1/chat/completions", keyed: 400 },
  { method: "POST", path: "/v1/completions", route: "/v1/completions", keyed: 400 },
  { method: "POST", path: "/v1/embeddings", route: "/v1/embeddings", keyed: 400 },
  { method: "POST", path: "/v1/rerank", route: "/v1/rerank", keyed: 400 },
  { method: "POST", path: "/rerank", route: "/rerank", keyed: 400 },
  {
    method: "POST",
    path: "/v1/models/load",
    route: "/v1/models/load",
    body: { id: NO_MODEL },
    admin: true,
    keyed: 404,
  },
  {
    method: "POST",
    path: "/v1/models/unload",
    route: "/v1/models/unload",
    body: { id: NO_MODEL },
    admin: true,
    keyed: 404,
  },
  { method: "DELETE", path: `/v1/models/${NO_MODEL}`, route: "/v1/models/*", admin: true, keyed: 404 },
  { method: "GET", path: "/v1/lora", route: "/v1/lora", keyed: 200 },
  {
    method: "POST",
    path: "/v1/lora/load",
    route: "/v1/lora/load",
    body: { path: join(dir, "no-such-adapter.gguf") },
    admin: true,
    keyed: 400,
  },
  { method: "POST", path: "/v1/lora/unload", route: "/v1/lora/unload", body: { id: 4242 }, admin: true, keyed: 404 },
  { method: "GET", path: "/lora-adapters", route: "/lora-adapters", keyed: 200 },
  // llama-server's scale route changes what every request gets: admin here too.
  {
    method: "POST",
    path: "/lora-adapters",
    route: "/lora-adapters",
    body: [{ id: 4242, scale: 1 }],
    admin: true,
    keyed: 400,
  },
  { method: "POST", path: "/v1/responses", route: "/v1/responses", keyed: 400 },
  { method: "GET", path: "/v1/responses/resp_nothing", route: "/v1/responses/:id", keyed: 404 },
  { method: "DELETE", path: "/v1/responses/resp_nothing", route: "/v1/responses/:id", keyed: 404 },
  { method: "GET", path: "/v1/responses/resp_nothing/input_items", route: "/v1/responses/:id/input_items", keyed: 404 },
  { method: "POST", path: "/v1/responses/resp_nothing/cancel", route: "/v1/responses/:id/cancel", keyed: 400 },
  { method: "POST", path: "/v1/files", route: "/v1/files", keyed: 400 },
  { method: "GET", path: "/v1/files", route: "/v1/files", keyed: 200 },
  { method: "GET", path: "/v1/files/file-nothing", route: "/v1/files/:id", keyed: 404 },
  { method: "DELETE", path: "/v1/files/file-nothing", route: "/v1/files/:id", keyed: 404 },
  { method: "GET", path: "/v1/files/file-nothing/content", route: "/v1/files/:id/content", keyed: 404 },
  { method: "POST", path: "/v1/batches", route: "/v1/batches", keyed: 400 },
  { method: "GET", path: "/v1/batches", route: "/v1/batches", keyed: 200 },
  { method: "GET", path: "/v1/batches/batch_nothing", route: "/v1/batches/:id", keyed: 404 },
  { method: "POST", path: "/v1/batches/batch_nothing/cancel", route: "/v1/batches/:id/cancel", keyed: 404 },
  { method: "POST", path: "/v1/audio/transcriptions", route: "/v1/audio/transcriptions", keyed: 400 },
  { method: "POST", path: "/v1/audio/translations", route: "/v1/audio/translations", keyed: 400 },
  { method: "POST", path: "/v1/audio/speech", route: "/v1/audio/speech", keyed: 400 },
  // Anthropic family
  { method: "POST", path: "/v1/messages", route: "/v1/messages", keyed: 400 },
  { method: "POST", path: "/v1/messages/count_tokens", route: "/v1/messages/count_tokens", keyed: 400 },
  // Ollama family
  { method: "GET", path: "/", route: "/", keyed: 200 },
  { method: "HEAD", path: "/", keyed: 200 },
  { method: "GET", path: "/api/version", route: "/api/version", keyed: 200 },
  { method: "GET", path: "/api/tags", route: "/api/tags", keyed: 200 },
  { method: "GET", path: "/api/ps", route: "/api/ps", keyed: 200 },
  { method: "POST", path: "/api/show", route: "/api/show", keyed: 400 },
  { method: "POST", path: "/api/chat", route: "/api/chat", keyed: 400 },
  { method: "POST", path: "/api/generate", route: "/api/generate", keyed: 400 },
  { method: "POST", path: "/api/embed", route: "/api/embed", keyed: 400 },
  { method: "POST", path: "/api/embeddings", route: "/api/embeddings", keyed: 400 },
  // A name from Ollama's library: refused before any request to the Hub.
  { method: "POST", path: "/api/pull", route: "/api/pull", body: { model: "llama3" }, admin: true, keyed: 400 },
  { method: "POST", path: "/api/push", route: "/api/push", keyed: 501 },
  { method: "POST", path: "/api/create", route: "/api/create", keyed: 501 },
  { method: "POST", path: "/api/copy", route: "/api/copy", keyed: 501 },
  { method: "DELETE", path: "/api/delete", route: "/api/delete", keyed: 501 },
  { method: "POST", path: "/api/blobs/sha256:00", route: "/api/blobs/*", keyed: 501 },
  { method: "GET", path: "/api/blobs/sha256:00", route: "/api/blobs/*", keyed: 501 },
  // Nothing serves these: 401 without a key (not 404 or 405), 404 or 405 with one.
  { method: "GET", path: "/nope", keyed: 404 },
  { method: "GET", path: "/healthz", keyed: 404 },
  { method: "POST", path: "/v1/nope", keyed: 404 },
  { method: "GET", path: "/v1/messages/nope", keyed: 404 },
  { method: "GET", path: "/api/nope", keyed: 404 },
  { method: "POST", path: "/health", keyed: 405 },
  { method: "PUT", path: "/v1/chat/completions", keyed: 405 },
  { method: "PATCH", path: "/v1/models", keyed: 405 },
  { method: "OPTIONS", path: "/v1/chat/completions", keyed: 405 },
  { method: "GET", path: "/v1/messages", keyed: 405 },
  { method: "HEAD", path: "/api/nope", keyed: 404 },
];

type Credential = { label: string; headers: Record<string, string> };
const bearer = (key: string, who: string): Credential => ({
  label: `${who} (Bearer)`,
  headers: { authorization: `Bearer ${key}` },
});
const xApiKey = (key: string, who: string): Credential => ({
  label: `${who} (X-Api-Key)`,
  headers: { "x-api-key": key },
});
const NO_KEY: Credential = { label: "no key", headers: {} };
const WRONG = [bearer(WRONG_KEY, "wrong key"), xApiKey(WRONG_KEY, "wrong key")];
const POLICY = [bearer(USER_KEY, "policy key"), xApiKey(USER_KEY, "policy key")];
const ADMINS = [
  bearer(OPS_KEY, "admin policy key"),
  xApiKey(OPS_KEY, "admin policy key"),
  bearer(GLOBAL_KEY, "global key"),
  xApiKey(GLOBAL_KEY, "global key"),
];

async function call(row: Row, cred: Credential): Promise<{ status: number; text: string; headers: Headers }> {
  const hasBody = row.method === "POST" || row.method === "PUT" || row.method === "PATCH";
  const res = await fetch(`${s.url}${row.path}`, {
    method: row.method,
    headers: { ...(hasBody ? { "content-type": "application/json" } : {}), ...cred.headers },
    ...(hasBody ? { body: JSON.stringify(row.body ?? {}) } : {}),
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** Why a 401 body is not the family's authentication error, or undefined when it is. */
function authEnvelopeProblem(fam: Family, text: string): string | undefined {
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    return `body is not JSON: ${text.slice(0, 200)}`;
  }
  if (fam === "openai") {
    try {
      const e = envelope(json);
      if (e.type !== "authentication_error" || e.code !== "invalid_api_key")
        return `OpenAI envelope with type ${e.type}, code ${e.code}`;
    } catch (err) {
      return (err as Error).message;
    }
    return undefined;
  }
  if (fam === "anthropic") {
    const ok =
      json?.type === "error" &&
      json.error?.type === "authentication_error" &&
      typeof json.error.message === "string" &&
      Object.keys(json).length === 2;
    return ok ? undefined : `not Anthropic's authentication_error envelope: ${text.slice(0, 200)}`;
  }
  const ok = typeof json?.error === "string" && json.error.length > 0 && Object.keys(json).length === 1;
  return ok ? undefined : `not Ollama's {"error": "..."}: ${text.slice(0, 200)}`;
}

/** Every way `row` is answered other than the decisions say, as readable lines (empty when all hold). */
async function mismatches(row: Row): Promise<string[]> {
  const out: string[] = [];
  const fam = family(row.path);
  const head = row.method === "HEAD";
  for (const cred of [NO_KEY, ...WRONG]) {
    const r = await call(row, cred);
    if (row.open) {
      if (r.status !== 200) out.push(`${cred.label}: ${r.status}, want 200 (open route)`);
      continue;
    }
    if (r.status !== 401) {
      out.push(`${cred.label}: ${r.status}, want 401: ${r.text.slice(0, 160)}`);
      continue;
    }
    if (head) {
      if (r.text !== "") out.push(`${cred.label}: HEAD answered with a body`);
      continue;
    }
    const problem = authEnvelopeProblem(fam, r.text);
    if (problem) out.push(`${cred.label}: ${problem}`);
    if (!/api key/i.test(r.text))
      out.push(`${cred.label}: the 401 does not say a key is needed: ${r.text.slice(0, 160)}`);
  }
  for (const cred of POLICY) {
    const r = await call(row, cred);
    if (row.admin) {
      if (r.status !== 403) {
        out.push(`${cred.label}: ${r.status} on an admin route, want 403: ${r.text.slice(0, 160)}`);
        continue;
      }
      // Ollama's admin route (/api/pull) answers in Ollama's envelope: `{"error"}` alone.
      if (row.path.startsWith("/api/")) {
        const body = JSON.parse(r.text);
        if (Object.keys(body).join() !== "error" || !/is an admin action/.test(body.error))
          out.push(`${cred.label}: 403 not in Ollama's envelope naming the admin action: ${r.text.slice(0, 160)}`);
        continue;
      }
      const e = envelope(JSON.parse(r.text));
      if (e.code !== "admin_required" || e.type !== "permission_error")
        out.push(`${cred.label}: 403 with code ${e.code}, type ${e.type}; want admin_required, permission_error`);
      continue;
    }
    if (r.status === 401 || r.status === 403)
      out.push(`${cred.label}: ${r.status}, want past the gate: ${r.text.slice(0, 160)}`);
    else if (r.status !== row.keyed) out.push(`${cred.label}: ${r.status}, want ${row.keyed}: ${r.text.slice(0, 160)}`);
  }
  for (const cred of ADMINS) {
    const r = await call(row, cred);
    if (r.status === 401 || r.status === 403)
      out.push(`${cred.label}: ${r.status}, want past the gate: ${r.text.slice(0, 160)}`);
    else if (r.status !== row.keyed) out.push(`${cred.label}: ${r.status}, want ${row.keyed}: ${r.text.slice(0, 160)}`);
  }
  return out;
}

describe("every route × every credential", () => {
  for (const row of ROWS) {
    test(`${row.method} ${row.path}`, async () => {
      expect(await mismatches(row)).toEqual([]);
    });
  }

  test("the table covers every route the app registers", () => {
    const registered = registeredRoutes().map((r) => `${r.method} ${r.path}`);
    const covered = new Set(ROWS.filter((r) => r.route).map((r) => `${r.method} ${r.route}`));
    expect(registered.filter((r) => !covered.has(r))).toEqual([]);
    // And the table's routes are real ones (a renamed route would leave a stale row).
    expect([...covered].filter((r) => !registered.includes(r))).toEqual([]);
  });

  test("a key in both headers: one valid key is enough; a wrong Bearer with a valid X-Api-Key passes", async () => {
    const r = await fetch(`${s.url}/v1/models`, {
      headers: { authorization: `Bearer ${WRONG_KEY}`, "x-api-key": USER_KEY },
    });
    expect(r.status).toBe(200);
    // A scheme other than Bearer is no key.
    const basic = await fetch(`${s.url}/v1/models`, { headers: { authorization: `Basic ${btoa(`u:${USER_KEY}`)}` } });
    expect(basic.status).toBe(401);
  });
});

describe("the official clients", () => {
  const messages = [{ role: "user" as const, content: "Say hello." }];

  test("openai: apiKey is sent as Bearer; a wrong one is AuthenticationError", async () => {
    const ok = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: USER_KEY, maxRetries: 0, timeout: 60_000 });
    const reply = await ok.chat.completions.create({ model: s.model, messages, max_tokens: 16 });
    expect(reply.choices[0]!.message.content).toBe(REPLY);

    const bad = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: WRONG_KEY, maxRetries: 0, timeout: 60_000 });
    const err = await bad.chat.completions.create({ model: s.model, messages, max_tokens: 16 }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(err.status).toBe(401);
    expect(err.code).toBe("invalid_api_key");
    expect(err.type).toBe("authentication_error");
  });

  for (const how of ["apiKey", "authToken"] as const) {
    test(`@anthropic-ai/sdk: ${how} (${how === "apiKey" ? "X-Api-Key" : "Bearer"}); a wrong one is AuthenticationError`, async () => {
      // apiKey/authToken null: neither is read from ANTHROPIC_* in the environment.
      const client = (key: string) =>
        new Anthropic({ baseURL: s.url, apiKey: null, authToken: null, [how]: key, maxRetries: 0, timeout: 60_000 });
      const reply = await client(USER_KEY).messages.create({ model: s.model, max_tokens: 16, messages });
      expect(reply.content.map((b) => (b.type === "text" ? b.text : b.type))).toEqual([REPLY]);

      const err = await client(WRONG_KEY)
        .messages.create({ model: s.model, max_tokens: 16, messages })
        .catch((e) => e);
      expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
      expect(err.status).toBe(401);
      expect(err.error).toMatchObject({ type: "error", error: { type: "authentication_error" } });
    });
  }

  test("ollama: an Authorization header; a wrong key is a 401 ResponseError", async () => {
    const ok = new Ollama({ host: s.url, headers: { Authorization: `Bearer ${USER_KEY}` } });
    const reply = await ok.chat({ model: s.model, messages, stream: false });
    expect(reply.message.content).toBe(REPLY);
    expect(reply.done).toBe(true);

    const bad = new Ollama({ host: s.url, headers: { Authorization: `Bearer ${WRONG_KEY}` } });
    const err = await bad.chat({ model: s.model, messages, stream: false }).catch((e) => e);
    expect(err?.name).toBe("ResponseError");
    expect(err.status_code).toBe(401);
    expect(String(err.error)).toContain("API key");
    // Without any header at all, the same.
    const none = await new Ollama({ host: s.url }).list().catch((e) => e);
    expect(none?.status_code).toBe(401);
  });
});
