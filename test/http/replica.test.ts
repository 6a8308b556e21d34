// One replica of several (docs/guides/scale-out.md): every reply names the
// replica (--replica-id) in x-superfluid-replica, refusals of requests the
// parser could not read included; x-superfluid-session-key is echoed, written
// in the access log, and refused in the API's own envelope when malformed.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { hostname } from "node:os";
import { parseServeOptions, type ServeOptions } from "../../src/cli/serve-options.ts";
import { setAccessSink, type AccessEntry } from "../../src/http/access-log.ts";
import { defaultReplicaId, REPLICA_HEADER, SESSION_KEY_HEADER, SESSION_KEY_MAX } from "../../src/http/replica.ts";
import { post, RawConnection, useServer, user } from "./support.ts";

const s = useServer({ fixture: "tiny-chat", extraArgs: ["--replica-id", "replica-7.pod_a:1"] });

const records: AccessEntry[] = [];
let unsink = () => {};
// Registered after the server's own hooks, so this sink is the newest one installed.
beforeAll(() => void (unsink = setAccessSink((e) => records.push(e))));
afterAll(() => unsink());

const chat = (headers: Record<string, string>) =>
  post(s, "/v1/chat/completions", { model: s.model, messages: user("hello"), max_tokens: 4 }, { headers });

describe("x-superfluid-replica", () => {
  test("every reply names the replica: health, readiness, a generation, a 404", async () => {
    for (const res of [
      await fetch(`${s.url}/health`),
      await fetch(`${s.url}/health/ready`),
      await chat({}),
      await fetch(`${s.url}/no/such/route`),
    ]) {
      await res.arrayBuffer();
      expect(res.headers.get(REPLICA_HEADER)).toBe("replica-7.pod_a:1");
    }
  });

  test("a request the HTTP parser refused still names the replica", async () => {
    const conn = await RawConnection.open(s.port);
    try {
      await conn.write("BREW /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      const res = await conn.waitResponse(60_000);
      expect(res?.status).toBeGreaterThanOrEqual(400);
      expect(res?.headers[REPLICA_HEADER]).toBe("replica-7.pod_a:1");
    } finally {
      conn.destroy();
    }
  });

  test("--replica-id defaults to the host name, takes SUPERFLUID_REPLICA_ID, refuses what a header cannot carry", () => {
    const env = { HOME: "/h" };
    expect((parseServeOptions([], env) as ServeOptions).replicaId).toBe(defaultReplicaId());
    expect(defaultReplicaId()).toBe(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(hostname()) ? hostname() : "superfluid");
    expect(defaultReplicaId("bad host")).toBe("superfluid");
    expect((parseServeOptions([], { ...env, SUPERFLUID_REPLICA_ID: "r2" }) as ServeOptions).replicaId).toBe("r2");
    for (const bad of ["", "a b", "-lead", "é", "x".repeat(129), "a\r\nx-evil: 1"])
      expect(() => parseServeOptions(["--replica-id", bad], env)).toThrow("--replica-id expects");
  });
});

describe("x-superfluid-session-key", () => {
  test("echoed on the reply and written in the access log", async () => {
    const seen = records.length;
    const res = await chat({ [SESSION_KEY_HEADER]: "agent-42/conv:9" });
    expect(res.status).toBe(200);
    await res.json();
    expect(res.headers.get(SESSION_KEY_HEADER)).toBe("agent-42/conv:9");
    const record = records.slice(seen).find((r) => r.route === "/v1/chat/completions");
    expect(record?.session).toBe("agent-42/conv:9");
  });

  test("a request without one has none in its record and its reply", async () => {
    const seen = records.length;
    const res = await chat({});
    await res.json();
    expect(res.headers.get(SESSION_KEY_HEADER)).toBeNull();
    expect(records.slice(seen).find((r) => r.route === "/v1/chat/completions")?.session).toBeUndefined();
  });

  test("echoed on a stream too", async () => {
    const res = await post(
      s,
      "/v1/chat/completions",
      { model: s.model, messages: user("hi"), max_tokens: 4, stream: true },
      { headers: { [SESSION_KEY_HEADER]: "stream-key" } },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get(SESSION_KEY_HEADER)).toBe("stream-key");
    expect(await res.text()).toContain("[DONE]");
  });

  test("too long or with spaces: 400 invalid_session_key in the OpenAI envelope", async () => {
    for (const bad of ["x".repeat(SESSION_KEY_MAX + 1), "two words"]) {
      const res = await chat({ [SESSION_KEY_HEADER]: bad });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { code: string; message: string; type: string } };
      expect(body.error.code).toBe("invalid_session_key");
      expect(body.error.type).toBe("invalid_request_error");
      expect(res.headers.get(REPLICA_HEADER)).toBe("replica-7.pod_a:1");
    }
    // The longest key is taken.
    const res = await chat({ [SESSION_KEY_HEADER]: "k".repeat(SESSION_KEY_MAX) });
    expect(res.status).toBe(200);
    await res.json();
  });

  test("the Anthropic client gets the refusal in its own envelope", async () => {
    const client = new Anthropic({
      baseURL: s.url,
      apiKey: "unused",
      maxRetries: 0,
      defaultHeaders: { [SESSION_KEY_HEADER]: "has space" },
    });
    const err = await client.messages
      .create({ model: s.model, max_tokens: 4, messages: [{ role: "user", content: "hi" }] })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    const error = (err as InstanceType<typeof Anthropic.BadRequestError>).error as {
      type: string;
      error: { type: string; message: string };
    };
    expect(error.type).toBe("error");
    expect(error.error.type).toBe("invalid_request_error");
    expect(error.error.message).toContain(SESSION_KEY_HEADER);
  });

  test("the openai client's defaultHeaders carry it", async () => {
    const { OpenAI } = await import("openai");
    const client = new OpenAI({
      baseURL: `${s.url}/v1`,
      apiKey: "unused",
      maxRetries: 0,
      defaultHeaders: { [SESSION_KEY_HEADER]: "sdk-session" },
    });
    const { response } = await client.chat.completions
      .create({ model: s.model, messages: [{ role: "user", content: "hi" }], max_tokens: 4 })
      .withResponse();
    expect(response.headers.get(SESSION_KEY_HEADER)).toBe("sdk-session");
    expect(response.headers.get(REPLICA_HEADER)).toBe("replica-7.pod_a:1");
  });
});
