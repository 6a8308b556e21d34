// OpenAI's error envelope (docs/api/openai.md#error-envelope):
// {"error": {"message", "type", "param", "code"}} with the error's status.
import type { RequestError } from "../../daemon/request-error.ts";
import { sseFraming } from "../stream.ts";

/** The envelope's `type` for a status: 4xx are invalid requests unless a more exact type exists. */
function typeOf(status: number): string {
  if (status >= 500) return "server_error";
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 429) return "rate_limit_error";
  return "invalid_request_error";
}

export function openaiErrorBody(err: RequestError): {
  error: { message: string; type: string; param: string | null; code: string | null };
} {
  return { error: { message: err.message, type: typeOf(err.status), param: err.field, code: err.code } };
}

/** OpenAI's streams: `data:` frames, an error as one `{"error": ...}` frame, then `data: [DONE]`. */
export const OPENAI_SSE = sseFraming({ done: true, error: (err) => ({ data: openaiErrorBody(err) }) });
