// Errors in OpenAI's envelope (api.md 4.4):
// {"error": {"message", "type", "param", "code"}} with the right status.

/** The envelope's `type` for a status (api.md 0.7): 4xx are invalid requests unless a more exact type exists. */
function typeOf(status: number): string {
  if (status >= 500) return "server_error";
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 429) return "rate_limit_error";
  return "invalid_request_error";
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string | null = null,
    readonly param: string | null = null,
    readonly type: string = typeOf(status),
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }

  envelope(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }

  toResponse(): Response {
    return Response.json(this.envelope(), { status: this.status, headers: this.headers });
  }
}

export const badRequest = (message: string, param: string | null = null, code: string | null = null) =>
  new ApiError(400, message, code, param);

export const MAX_BODY_BYTES = 100 * 1024 * 1024;

export const payloadTooLarge = () =>
  new ApiError(413, `request body is larger than the limit of ${MAX_BODY_BYTES} bytes (100 MiB)`, "payload_too_large");

/** Any thrown value as an ApiError: ours pass through, the rest are 500s. */
export function asApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as { code?: string; message?: string; status?: number };
  if (e?.code === "worker_crashed") return new ApiError(500, e.message ?? "engine worker failed", null, null, "server_error");
  if (e?.code === "session_log_failed") return new ApiError(500, e.message ?? "the session log could not be written", "session_log_failed", null, "server_error");
  if (e?.code === "generation_failed") return new ApiError(e.status ?? 500, e.message ?? "generation failed");
  return new ApiError(500, `internal error: ${e?.message ?? String(err)}`);
}
