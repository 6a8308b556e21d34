// Errors as the HTTP layer sees them: the request-size limit, and any thrown
// value turned into a RequestError (src/pipeline/request-error.ts) whose
// message never maps this machine's folders. Each API family renders a
// RequestError in its own envelope (envelopes.ts picks one by route).
import { GenerationFailedError } from "../daemon/choice-stream.ts";
import { ModelClosedError } from "../daemon/prompt-thread.ts";
import { JournalError, WorkerCrashedError } from "../daemon/worker-client.ts";
import { RequestError } from "../pipeline/request-error.ts";

export { RequestError, invalidRequest } from "../pipeline/request-error.ts";

export const MAX_BODY_BYTES = 100 * 1024 * 1024;

export const payloadTooLarge = () =>
  new RequestError(413, `request body is larger than the limit of ${MAX_BODY_BYTES} bytes (100 MiB)`, "payload_too_large");

/**
 * An absolute path (POSIX, Windows or file://) in a message, with the file
 * name it ends in: what a client is told never maps this machine's folders.
 */
const ABSOLUTE_PATH = /(?<![\w.~%:/\\-])(?:file:\/\/)?(?:[A-Za-z]:[\\/]|\/)(?:[^\s\\/'"`,;:()<>[\]{}]+[\\/])+([^\s\\/'"`,;:()<>[\]{}]*)/g;

/** The text with every absolute path cut to its last name (the file name). */
export function withoutPaths(text: string): string {
  return text.replace(ABSOLUTE_PATH, (path: string, name: string) => name || (path.split(/[\\/]/).filter(Boolean).pop() ?? ""));
}

/** Any thrown value as an error reply, its body in an API family's envelope. */
export function errorReply(err: unknown, bodyOf: (err: RequestError) => unknown): Response {
  const e = asRequestError(err);
  return Response.json(bodyOf(e), { status: e.status, headers: e.headers });
}

/** Any thrown value as a RequestError: ours pass through, the daemon's failures by their type, the rest are 500s whose messages carry no paths. */
export function asRequestError(err: unknown): RequestError {
  if (err instanceof RequestError) return err;
  const message = (fallback: string) => withoutPaths((err as Error | undefined)?.message ?? fallback);
  if (err instanceof WorkerCrashedError) return new RequestError(500, message("engine worker failed"));
  if (err instanceof JournalError) return new RequestError(500, message("the session log could not be written"), "session_log_failed");
  if (err instanceof GenerationFailedError) return new RequestError(err.status, message("generation failed"));
  if (err instanceof ModelClosedError) {
    return new RequestError(503, "the model was unloaded while this request was being prepared; it loads again on the next request", "model_unloading", "model", { "retry-after": "2" });
  }
  return new RequestError(500, `internal error: ${withoutPaths((err as Error | undefined)?.message ?? String(err))}`);
}
