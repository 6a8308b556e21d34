// Anthropic's error envelope and stream framing, status by status, read by
// the official SDK: each status the server can answer with becomes the
// SDK's error class for it, with the envelope's type. The statuses the
// Messages routes cannot produce on demand in a test (401 before keys
// exist, 429, 503/529) are served here from the envelope code itself.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ANTHROPIC_SSE, anthropicErrorBody } from "../../../src/http/anthropic/envelope.ts";
import { RequestError } from "../../../src/daemon/request-error.ts";

const CASES: [status: number, type: string, sdkClass: new (...args: any[]) => Error][] = [
  [400, "invalid_request_error", Anthropic.BadRequestError],
  [401, "authentication_error", Anthropic.AuthenticationError],
  [403, "permission_error", Anthropic.PermissionDeniedError],
  [404, "not_found_error", Anthropic.NotFoundError],
  [413, "request_too_large", Anthropic.APIError],
  [429, "rate_limit_error", Anthropic.RateLimitError],
  [500, "api_error", Anthropic.InternalServerError],
  [503, "overloaded_error", Anthropic.InternalServerError],
  [529, "overloaded_error", Anthropic.InternalServerError],
];

let server: ReturnType<typeof Bun.serve>;
beforeAll(() => {
  // Answers every request with the envelope for the status named in the model field.
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const status = Number(((await req.json()) as { model: string }).model);
      return Response.json(anthropicErrorBody(new RequestError(status, `status ${status}`)), { status });
    },
  });
});
afterAll(() => server.stop(true));

describe("the envelope through the SDK's error classes", () => {
  for (const [status, type, sdkClass] of CASES) {
    test(`${status}: ${type}`, async () => {
      const client = new Anthropic({ baseURL: `http://127.0.0.1:${server.port}`, apiKey: "x", maxRetries: 0 });
      const err = await client.messages
        .create({ model: String(status), max_tokens: 1, messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(err).toBeInstanceOf(sdkClass);
      expect(err.status).toBe(status);
      expect(err.error).toEqual({ type: "error", error: { type, message: `status ${status}` } });
    });
  }
});

describe("stream framing", () => {
  test("named events, ping while idle, an error as an error event, no [DONE]", () => {
    expect(ANTHROPIC_SSE.frame({ type: "message_stop" }, "message_stop")).toBe(
      'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    );
    expect(ANTHROPIC_SSE.keepalive).toBe('event: ping\ndata: {"type":"ping"}\n\n');
    expect(ANTHROPIC_SSE.end).toBe("");
    expect(ANTHROPIC_SSE.error(new RequestError(500, "boom"))).toEqual({
      event: "error",
      data: { type: "error", error: { type: "api_error", message: "boom" } },
    });
  });
});
