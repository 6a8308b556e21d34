// Anthropic's error envelope (docs/api/anthropic.md#errors):
// {"type": "error", "error": {"type", "message"}} with the error's status,
// and the SSE framing of its streams (named events, `ping` while idle, an
// error after the stream began as an `error` event, no [DONE]).
import type { RequestError } from "../../daemon/request-error.ts";
import { sseFraming } from "../stream.ts";

/** Anthropic's error `type` for a status. */
export function anthropicErrorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 413) return "request_too_large";
  if (status === 429) return "rate_limit_error";
  if (status === 503 || status === 529) return "overloaded_error";
  if (status >= 500) return "api_error";
  return "invalid_request_error";
}

export function anthropicErrorBody(err: RequestError): { type: "error"; error: { type: string; message: string } } {
  return { type: "error", error: { type: anthropicErrorType(err.status), message: err.message } };
}

export const ANTHROPIC_SSE = sseFraming({
  done: false,
  error: (err) => ({ event: "error", data: anthropicErrorBody(err) }),
  keepalive: { event: "ping", data: { type: "ping" } },
});
