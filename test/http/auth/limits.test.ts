// The limits a key carries (docs/api/security.md, docs/api/key-policy.md):
// the per-IP --rate-limit and a key's own rate_limit_rpm (429
// rate_limit_exceeded with Retry-After; /health and the scrapes exempt),
// max_concurrent (429 concurrency_limit_exceeded while a stream holds the
// slot; reads pass; the slot comes back when the reply ends), the QoS class a
// key runs in and the best one it may ask for, batch_invariant per key, and
// /metrics' superfluid_key_* rows: a non-admin key sees only its own, and
// refusals are counted by reason. Nothing here waits on the clock: a slot's
// return is awaited on the in-flight gauge, timeouts are hang guards only.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KeyRing } from "../../../src/http/auth/keyring.ts";
import { setPrincipal } from "../../../src/http/auth/principal.ts";
import { checkBatchInvariant, DEFAULT_QOS_POLICY, requestQos } from "../../../src/http/qos.ts";
import { RequestError } from "../../../src/daemon/request-error.ts";
import { accessJson, formatAccess, setAccessSink, type AccessEntry } from "../../../src/http/access-log.ts";
import { envelope, RawConnection, useServer, user, type TestServer } from "../support.ts";

const dir = mkdtempSync(join(tmpdir(), "superfluid-auth-limits-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function policyFile(name: string, keys: Record<string, unknown>[]): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify({ keys }));
  return path;
}

const SECRET = {
  plain: "sk-limits-plain-111",
  other: "sk-limits-other-999",
  metered: "sk-limits-metered-222",
  ops: "sk-limits-ops-333",
  solo: "sk-limits-solo-444",
  user: "sk-limits-user-555",
  bg: "sk-limits-bg-666",
  inv: "sk-limits-inv-777",
  global: "sk-limits-global-888",
};

// Per-IP and per-key buckets: 3 requests a minute per client address, 2 for
// `metered`. `ops` has a bucket of its own too, so the helper's startup
// request and the scrapes below leave the address's bucket full.
const rated = useServer({
  fixture: "tiny-chat",
  maxBatch: 1,
  apiKey: SECRET.ops,
  extraArgs: [
    "--rate-limit",
    "3",
    "--api-key",
    SECRET.global,
    "--key-policy",
    policyFile("rated.json", [
      { name: "plain", key: SECRET.plain },
      { name: "other", key: SECRET.other },
      { name: "metered", key: SECRET.metered, rate_limit_rpm: 2 },
      { name: "ops", key: SECRET.ops, admin: true, rate_limit_rpm: 1000 },
    ]),
  ],
});

// No keys: the per-IP bucket alone, 3 a minute, one of which the helper's startup GET /v1/models takes.
const keyless = useServer({ fixture: "tiny-chat", maxBatch: 1, extraArgs: ["--rate-limit", "3"] });

// Slots, classes, batch-invariant and metrics; no rate limits.
const keyed = useServer({
  fixture: "tiny-chat",
  maxBatch: 2,
  maxContext: 32768,
  apiKey: SECRET.global,
  extraArgs: [
    "--api-key",
    SECRET.global,
    "--key-policy",
    policyFile("keyed.json", [
      { name: "solo", key: SECRET.solo, max_concurrent: 1 },
      { name: "user", key: SECRET.user },
      { name: "bg", key: SECRET.bg, class: "background", max_class: "agent" },
      { name: "inv", key: SECRET.inv, batch_invariant: true },
      { name: "ops", key: SECRET.ops, admin: true },
    ]),
  ],
});

const auth = (key: string, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${key}`, ...extra });
const get = (s: TestServer, path: string, key?: string) => fetch(`${s.url}${path}`, { headers: key ? auth(key) : {} });
const postAs = (
  s: TestServer,
  path: string,
  key: string,
  body: unknown,
  extra: Record<string, string> = {},
  signal?: AbortSignal,
) =>
  fetch(`${s.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth(key, extra) },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
const chat = (s: TestServer, extra: Record<string, unknown> = {}) => ({
  model: s.model,
  messages: user("hi"),
  max_tokens: 16,
  ...extra,
});

/** The value of one sample of the exposition (labels in any order), or undefined when it is not there. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    if (
      Object.keys(labels).every((k) => got[k] === labels[k]) &&
      Object.keys(got).length === Object.keys(labels).length
    )
      return Number(m[3]);
  }
  return undefined;
}

async function scrape(s: TestServer, key: string, path = "/metrics"): Promise<string> {
  const res = await get(s, path, key);
  expect(res.status).toBe(200);
  return res.text();
}

/** The `key` label of every superfluid_key_* sample. */
const keyLabels = (text: string) =>
  new Set(
    text
      .split("\n")
      .filter((l) => l.startsWith("superfluid_key_"))
      .map((l) => /key="([^"]*)"/.exec(l)?.[1]),
  );

/** Polls until `check` holds; `hangGuardMs` only stops a hung wait. */
async function until(check: () => Promise<boolean>, hangGuardMs = 60_000): Promise<boolean> {
  const started = performance.now();
  while (performance.now() - started < hangGuardMs) {
    if (await check()) return true;
    await Bun.sleep(20);
  }
  return check();
}

async function expect429(res: Response, code: string): Promise<{ message: string; retryAfter: number }> {
  expect(res.status).toBe(429);
  const e = envelope(await res.json());
  expect(e.code).toBe(code);
  expect(e.type).toBe("rate_limit_error");
  const retryAfter = Number(res.headers.get("retry-after"));
  expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
  return { message: e.message, retryAfter };
}

describe("rate limits", () => {
  test("per client IP: 3 requests pass, the next is 429 with Retry-After, in each family's envelope", async () => {
    for (let i = 0; i < 3; i++) expect((await get(rated, "/v1/models", SECRET.plain)).status).toBe(200);
    const refused = await expect429(await get(rated, "/v1/models", SECRET.plain), "rate_limit_exceeded");
    expect(refused.message).toContain("client address");
    // A bucket of 3 a minute refills one request every 20 s.
    expect(refused.retryAfter).toBeLessThanOrEqual(20);

    // Another key without rate_limit_rpm of its own shares the address's bucket, and so
    // does the global --api-key: only a key's own bucket exempts it from --rate-limit.
    await expect429(await get(rated, "/v1/models", SECRET.other), "rate_limit_exceeded");
    await expect429(await get(rated, "/v1/models", SECRET.global), "rate_limit_exceeded");
    const ollama = await get(rated, "/api/tags", SECRET.plain);
    expect(ollama.status).toBe(429);
    expect(ollama.headers.get("retry-after")).not.toBeNull();
    expect(Object.keys((await ollama.json()) as object)).toEqual(["error"]);
    const anthropic = await postAs(rated, "/v1/messages", SECRET.plain, {});
    expect(anthropic.status).toBe(429);
    expect(await anthropic.json()).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
  });

  test("/health, /metrics and /v1/metrics still answer an address over its limit", async () => {
    expect((await get(rated, "/health")).status).toBe(200);
    expect((await get(rated, "/metrics", SECRET.plain)).status).toBe(200);
    expect((await get(rated, "/v1/metrics", SECRET.plain)).status).toBe(200);
    // Still 429 elsewhere: the scrapes took nothing from the bucket and gave nothing back.
    expect((await get(rated, "/v1/models", SECRET.plain)).status).toBe(429);
  });

  test("a wrong key takes from its address's bucket too: guesses are metered, 429 once it is empty", async () => {
    // The address's bucket is empty (above): a guess is not even told the key is wrong.
    await expect429(await get(rated, "/v1/models", "sk-a-guess"), "rate_limit_exceeded");
    await expect429(await get(rated, "/no/such/path"), "rate_limit_exceeded");
  });

  test("a key with rate_limit_rpm is metered by its own bucket, not its address's", async () => {
    // The address's bucket is empty (above); the key's own has 2.
    for (let i = 0; i < 2; i++) expect((await get(rated, "/v1/models", SECRET.metered)).status).toBe(200);
    const refused = await expect429(await get(rated, "/v1/models", SECRET.metered), "rate_limit_exceeded");
    expect(refused.message).toContain("'metered'");
    expect(refused.retryAfter).toBeLessThanOrEqual(30);
    // Its scrapes are exempt too.
    expect((await get(rated, "/metrics", SECRET.metered)).status).toBe(200);
  });

  test("refusals are counted per key by reason", async () => {
    const text = await scrape(rated, SECRET.ops);
    // plain: GET /v1/models, /api/tags, /v1/messages, then /v1/models again; other and metered: one each.
    expect(sample(text, "superfluid_key_rejected_total", { key: "plain", reason: "rate_limit_exceeded" })).toBe(4);
    expect(sample(text, "superfluid_key_rejected_total", { key: "other", reason: "rate_limit_exceeded" })).toBe(1);
    expect(sample(text, "superfluid_key_rejected_total", { key: "metered", reason: "rate_limit_exceeded" })).toBe(1);
    expect(
      sample(text, "superfluid_key_rejected_total", { key: "ops", reason: "rate_limit_exceeded" }),
    ).toBeUndefined();
    // Every authenticated request is counted, refused or not, scrapes included.
    expect(sample(text, "superfluid_key_requests_total", { key: "plain" })).toBe(9);
    expect(sample(text, "superfluid_key_requests_total", { key: "metered" })).toBe(4);
  });

  test("without keys, the per-IP bucket alone", async () => {
    // The helper's startup request took the first of the 3.
    for (let i = 0; i < 2; i++) expect((await get(keyless, "/v1/models")).status).toBe(200);
    await expect429(await get(keyless, "/v1/models"), "rate_limit_exceeded");
    expect((await get(keyless, "/health")).status).toBe(200);
    expect((await get(keyless, "/metrics")).status).toBe(200);
    expect((await get(keyless, "/v1/metrics")).status).toBe(200);
  });
});

describe("max_concurrent", () => {
  const inFlight = async (key: string) => sample(await scrape(keyed, SECRET.ops), "superfluid_key_in_flight", { key });

  test("a stream holds the key's one slot: the next POST is 429, reads pass, and the slot comes back when the stream ends", async () => {
    expect(await inFlight("solo")).toBe(0);
    const controller = new AbortController();
    const held = await postAs(
      keyed,
      "/v1/chat/completions",
      SECRET.solo,
      chat(keyed, { stream: true, ignore_eos: true, max_tokens: 30000 }),
      {},
      controller.signal,
    );
    expect(held.status).toBe(200);
    const reader = held.body!.getReader();
    await reader.read();
    try {
      expect(await inFlight("solo")).toBe(1);
      const refused = await postAs(keyed, "/v1/chat/completions", SECRET.solo, chat(keyed));
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("1");
      const e = envelope(await refused.json());
      expect(e.code).toBe("concurrency_limit_exceeded");
      expect(e.message).toContain("'solo'");
      // Any POST that makes work takes a slot, in its family's envelope.
      expect((await postAs(keyed, "/v1/tokenize", SECRET.solo, { content: "hi" })).status).toBe(429);
      const ollama = await postAs(keyed, "/api/chat", SECRET.solo, {
        model: keyed.model,
        messages: user("hi"),
        stream: false,
      });
      expect(ollama.status).toBe(429);
      expect(Object.keys((await ollama.json()) as object)).toEqual(["error"]);
      // Reads, deletes, cancels and scrapes take none.
      expect((await get(keyed, "/v1/models", SECRET.solo)).status).toBe(200);
      expect((await fetch(`${keyed.url}/v1/models`, { method: "HEAD", headers: auth(SECRET.solo) })).status).toBe(200);
      expect((await get(keyed, "/metrics", SECRET.solo)).status).toBe(200);
      expect(
        (await fetch(`${keyed.url}/v1/files/file-nothing`, { method: "DELETE", headers: auth(SECRET.solo) })).status,
      ).toBe(404);
      expect((await postAs(keyed, "/v1/batches/batch_nothing/cancel", SECRET.solo, {})).status).toBe(404);
      // Another key is not held up by this one's slots.
      expect((await postAs(keyed, "/v1/tokenize", SECRET.user, { content: "hi" })).status).toBe(200);
    } finally {
      controller.abort();
      await reader.cancel().catch(() => {});
    }
    // The client closed the stream: its slot is back.
    expect(await until(async () => (await inFlight("solo")) === 0)).toBe(true);
    const after = await postAs(keyed, "/v1/chat/completions", SECRET.solo, chat(keyed));
    expect(after.status).toBe(200);
    await after.text();
  });

  test("a stream read to its end gives the slot back", async () => {
    const res = await postAs(keyed, "/v1/chat/completions", SECRET.solo, chat(keyed, { stream: true }));
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("data: [DONE]");
    expect(await until(async () => (await inFlight("solo")) === 0)).toBe(true);
    // And a reply that is not a stream: its slot is back once the body is read.
    const plain = await postAs(keyed, "/v1/chat/completions", SECRET.solo, chat(keyed));
    expect(plain.status).toBe(200);
    await plain.json();
    expect(await until(async () => (await inFlight("solo")) === 0)).toBe(true);
    // A refused request (400) holds no slot after its reply either.
    expect((await postAs(keyed, "/v1/chat/completions", SECRET.solo, {})).status).toBe(400);
    expect(await until(async () => (await inFlight("solo")) === 0)).toBe(true);
    expect((await postAs(keyed, "/v1/tokenize", SECRET.solo, { content: "hi" })).status).toBe(200);
  });

  test("concurrency refusals are counted by reason", async () => {
    const text = await scrape(keyed, SECRET.ops);
    expect(sample(text, "superfluid_key_rejected_total", { key: "solo", reason: "concurrency_limit_exceeded" })).toBe(
      3,
    );
  });

  test("a client gone before its stream's first byte gives the slot back too", async () => {
    // The socket closes right after the request, at several offsets: the close
    // may come before the reply is handed to the socket, while or after.
    for (const delayMs of [0, 0, 1, 2, 5, 20]) {
      const conn = await RawConnection.open(keyed.port);
      const body = JSON.stringify(chat(keyed, { stream: true, ignore_eos: true, max_tokens: 2000 }));
      await conn.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${SECRET.solo}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      if (delayMs > 0) await Bun.sleep(delayMs);
      conn.destroy();
      // The slot is back once the key can make work again (a leaked slot would keep it at 429 for good).
      expect(
        await until(async () => (await postAs(keyed, "/v1/tokenize", SECRET.solo, { content: "hi" })).status === 200),
      ).toBe(true);
    }
    expect(await until(async () => (await inFlight("solo")) === 0)).toBe(true);
  });
});

describe("QoS class per key", () => {
  /**
   * The class lanes /slots shows while a long stream under `key` (and `headers`) runs; the stream is then cancelled.
   */
  async function classWhileRunning(key: string, headers: Record<string, string> = {}): Promise<Record<string, number>> {
    const controller = new AbortController();
    const res = await postAs(
      keyed,
      "/v1/chat/completions",
      key,
      chat(keyed, { stream: true, ignore_eos: true, max_tokens: 30000 }),
      headers,
      controller.signal,
    );
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    const slots = (await (await get(keyed, "/slots", SECRET.ops)).json()) as any[];
    controller.abort();
    await reader.cancel().catch(() => {});
    await until(async () => {
      const s = ((await (await get(keyed, "/slots", SECRET.ops)).json()) as any[])[0];
      return s.lanes.active === 0 && s.lanes.queued === 0;
    });
    return slots[0].lanes.per_class;
  }

  test("without a header a request runs in its key's class; with one, in the class asked for up to max_class", async () => {
    expect(await classWhileRunning(SECRET.bg)).toMatchObject({ background: 1, agent: 0, interactive: 0 });
    expect(await classWhileRunning(SECRET.bg, { "x-superfluid-qos": "agent" })).toMatchObject({
      background: 0,
      agent: 1,
    });
    // A key with no class runs in the server's default (agent).
    expect(await classWhileRunning(SECRET.user)).toMatchObject({ agent: 1, background: 0 });
  });

  test("a header above max_class is 403 admin_required, in each family's envelope", async () => {
    const qos = { "x-superfluid-qos": "interactive" };
    const openai = await postAs(keyed, "/v1/chat/completions", SECRET.bg, chat(keyed), qos);
    expect(openai.status).toBe(403);
    const e = envelope(await openai.json());
    expect(e.code).toBe("admin_required");
    expect(e.param).toBe("x-superfluid-qos");
    expect(e.message).toContain("'bg'");
    const anthropic = await postAs(
      keyed,
      "/v1/messages",
      SECRET.bg,
      { model: keyed.model, max_tokens: 8, messages: user("hi") },
      qos,
    );
    expect(anthropic.status).toBe(403);
    expect(await anthropic.json()).toMatchObject({ type: "error", error: { type: "permission_error" } });
    const ollama = await postAs(
      keyed,
      "/api/chat",
      SECRET.bg,
      { model: keyed.model, messages: user("hi"), stream: false },
      { "x-superfluid-qos": "completion" },
    );
    expect(ollama.status).toBe(403);
    expect(Object.keys((await ollama.json()) as object)).toEqual(["error"]);
    // The class it may have: fine. The global key has no bound.
    const ok = await postAs(keyed, "/v1/chat/completions", SECRET.bg, chat(keyed), {
      "x-superfluid-qos": "background",
    });
    expect(ok.status).toBe(200);
    await ok.json();
    const global = await postAs(keyed, "/v1/chat/completions", SECRET.global, chat(keyed), qos);
    expect(global.status).toBe(200);
    await global.json();
  });

  test("requestQos with a principal (unit)", () => {
    const ring = new KeyRing(
      ["sk-unit-global"],
      [
        {
          name: "bg",
          secret: "sk-unit-bg",
          qosClass: 3,
          maxClass: 2,
          batchInvariant: false,
          rateLimitRpm: 0,
          maxConcurrent: 0,
          admin: false,
        },
        {
          name: "inv",
          secret: "sk-unit-inv",
          qosClass: 2,
          maxClass: 2,
          batchInvariant: true,
          rateLimitRpm: 0,
          maxConcurrent: 0,
          admin: false,
        },
      ],
    );
    const as = (secret: string, headers: Record<string, string> = {}) => {
      const request = new Request("http://localhost/v1/chat/completions", {
        headers: { authorization: `Bearer ${secret}`, ...headers },
      });
      const principal = ring.identify(request.headers);
      expect(principal).toBeDefined();
      setPrincipal(request, principal!);
      return request;
    };
    const refusal = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        expect(err).toBeInstanceOf(RequestError);
        return err as RequestError;
      }
      throw new Error("no refusal");
    };
    expect(requestQos(DEFAULT_QOS_POLICY, as("sk-unit-bg"))).toBe(3);
    expect(requestQos({ ...DEFAULT_QOS_POLICY, defaultQos: 0 }, as("sk-unit-bg"))).toBe(3); // the key's class beats --http-default-qos
    expect(requestQos(DEFAULT_QOS_POLICY, as("sk-unit-bg", { "x-superfluid-qos": "agent" }))).toBe(2);
    expect(requestQos(DEFAULT_QOS_POLICY, as("sk-unit-bg", { "x-superfluid-qos": "background" }))).toBe(3);
    const above = refusal(() =>
      requestQos(DEFAULT_QOS_POLICY, as("sk-unit-bg", { "x-superfluid-qos": "interactive" })),
    );
    expect([above.status, above.code]).toEqual([403, "admin_required"]);
    // Under --no-http-qos-header the header is not read, so not refused either.
    expect(
      requestQos(
        { ...DEFAULT_QOS_POLICY, honourHeader: false },
        as("sk-unit-bg", { "x-superfluid-qos": "interactive" }),
      ),
    ).toBe(3);
    // The global key: the server's default, any header.
    expect(requestQos({ ...DEFAULT_QOS_POLICY, defaultQos: 1 }, as("sk-unit-global"))).toBe(1);
    expect(requestQos(DEFAULT_QOS_POLICY, as("sk-unit-global", { "x-superfluid-qos": "interactive" }))).toBe(0);

    const invariant = { "x-superfluid-batch-invariant": "true" };
    expect(() => checkBatchInvariant(DEFAULT_QOS_POLICY, as("sk-unit-inv", invariant))).not.toThrow();
    const denied = refusal(() =>
      checkBatchInvariant({ ...DEFAULT_QOS_POLICY, allowBatchInvariant: true }, as("sk-unit-bg", invariant)),
    );
    expect([denied.status, denied.code]).toEqual([403, "admin_required"]); // the key's own false beats the server's flag
    expect(denied.message).toContain("'bg'");
    expect(() => checkBatchInvariant(DEFAULT_QOS_POLICY, as("sk-unit-global", invariant))).toThrow(RequestError);
    expect(() =>
      checkBatchInvariant({ ...DEFAULT_QOS_POLICY, allowBatchInvariant: true }, as("sk-unit-global", invariant)),
    ).not.toThrow();
  });
});

describe("batch_invariant per key", () => {
  const invariant = { "x-superfluid-batch-invariant": "true" };

  test("a key with batch_invariant gets the lane; one without is 403 admin_required naming it", async () => {
    const ok = await postAs(keyed, "/v1/chat/completions", SECRET.inv, chat(keyed), invariant);
    expect(ok.status).toBe(200);
    await ok.json();
    const denied = await postAs(keyed, "/v1/chat/completions", SECRET.user, chat(keyed), invariant);
    expect(denied.status).toBe(403);
    const e = envelope(await denied.json());
    expect(e.code).toBe("admin_required");
    expect(e.param).toBe("x-superfluid-batch-invariant");
    expect(e.message).toContain("'user'");
    // The global key follows --http-allow-batch-invariant, which this server does not set.
    const global = await postAs(keyed, "/v1/chat/completions", SECRET.global, chat(keyed), invariant);
    expect(global.status).toBe(403);
    await global.json();
  });
});

describe("per-key metrics", () => {
  const NAMES = ["solo", "user", "bg", "inv", "ops"];

  test("a non-admin key sees only its own superfluid_key_* rows; admin and global keys see every key's", async () => {
    for (const path of ["/metrics", "/v1/metrics"]) {
      const own = await scrape(keyed, SECRET.user, path);
      expect([...keyLabels(own)]).toEqual(["user"]);
      // The rest of the exposition is there as for anyone.
      expect(own).toContain("# HELP superfluid_key_in_flight");
      expect(own).toMatch(/^superfluid_requests_total\{/m);
      for (const key of [SECRET.ops, SECRET.global])
        expect([...keyLabels(await scrape(keyed, key, path))].sort()).toEqual([...NAMES].sort());
    }
  });

  test("requests are counted per key; admin_required refusals by reason (admin routes, QoS, batch-invariant)", async () => {
    const before = await scrape(keyed, SECRET.ops);
    const n = (text: string, key: string) => sample(text, "superfluid_key_requests_total", { key }) ?? 0;
    const adminRefusals = (text: string, key: string) =>
      sample(text, "superfluid_key_rejected_total", { key, reason: "admin_required" }) ?? 0;
    for (let i = 0; i < 3; i++) expect((await get(keyed, "/v1/models", SECRET.inv)).status).toBe(200);
    const load = await postAs(keyed, "/v1/models/load", SECRET.inv, { id: "no-such-model" });
    expect(load.status).toBe(403);
    expect(envelope(await load.json()).code).toBe("admin_required");
    const after = await scrape(keyed, SECRET.ops);
    expect(n(after, "inv") - n(before, "inv")).toBe(4);
    expect(adminRefusals(after, "inv") - adminRefusals(before, "inv")).toBe(1);
    // Earlier in this file: bg asked above its max_class 3 times; user asked for batch-invariant once.
    expect(adminRefusals(after, "bg")).toBe(3);
    expect(adminRefusals(after, "user")).toBe(1);
    // The admin key's own scrapes and no refusals.
    expect(sample(after, "superfluid_key_rejected_total", { key: "ops", reason: "admin_required" })).toBeUndefined();
    expect(sample(after, "superfluid_key_in_flight", { key: "ops" })).toBe(0);
    // The global key is never a row of its own.
    expect(after).not.toContain('key="api-key"');
  });
});

describe("a request line the parser refuses, with keys on", () => {
  test("an unknown method is 401, not a 405 that would tell which methods a path takes", async () => {
    const conn = await RawConnection.open(keyed.port);
    try {
      await conn.write("FOO /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      const res = await conn.waitResponse(60_000);
      expect(res?.status).toBe(401);
      expect(envelope(JSON.parse(res!.body)).code).toBe("invalid_api_key");
    } finally {
      conn.destroy();
    }
  });
});

describe("the access log", () => {
  test("a generation's line names its key, never the secret", async () => {
    const records: AccessEntry[] = [];
    const unsink = setAccessSink((e) => records.push(e));
    try {
      const keyedReply = await postAs(keyed, "/v1/chat/completions", SECRET.user, chat(keyed));
      expect(keyedReply.status).toBe(200);
      await keyedReply.text();
      const streamed = await postAs(keyed, "/api/chat", SECRET.global, { model: keyed.model, messages: user("hi") });
      expect(streamed.status).toBe(200);
      await streamed.text();
    } finally {
      unsink();
    }
    // (Lines of a server without keys carry no key: test/http/access-log.test.ts checks them whole.)
    expect(records.map((r) => r.key)).toEqual(["user", "api-key"]);
    expect(formatAccess(records[0]!)).toEndWith(" key=user");
    expect(accessJson(records[0]!).key).toBe("user");
    for (const r of records) expect(JSON.stringify(r)).not.toContain("sk-limits");
  });
});
