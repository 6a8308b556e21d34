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

/**
 * An absolute path (POSIX, Windows or file://) in a message, with the file
 * name it ends in: what a client is told never maps this machine's folders.
 */
const ABSOLUTE_PATH = /(?<![\w.~%:/\\-])(?:file:\/\/)?(?:[A-Za-z]:[\\/]|\/)(?:[^\s\\/'"`,;:()<>[\]{}]+[\\/])+([^\s\\/'"`,;:()<>[\]{}]*)/g;

/** The text with every absolute path cut to its last name (the file name). */
export function withoutPaths(text: string): string {
  return text.replace(ABSOLUTE_PATH, (path: string, name: string) => name || (path.split(/[\\/]/).filter(Boolean).pop() ?? ""));
}

/** Any thrown value as an ApiError: ours pass through, the rest are 500s whose messages carry no paths. */
export function asApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as { code?: string; message?: string; status?: number };
  const message = (fallback: string) => withoutPaths(e?.message ?? fallback);
  if (e?.code === "worker_crashed") return new ApiError(500, message("engine worker failed"), null, null, "server_error");
  if (e?.code === "session_log_failed") return new ApiError(500, message("the session log could not be written"), "session_log_failed", null, "server_error");
  if (e?.code === "generation_failed") return new ApiError(e.status ?? 500, message("generation failed"));
  return new ApiError(500, `internal error: ${withoutPaths(e?.message ?? String(err))}`);
}
