// Any thrown value as a RequestError (src/daemon/request-error.ts): ours pass
// through, the daemon's and the pipeline's failures map by their type, and the
// rest become 500s whose messages never map this machine's folders.
import { ModelClosedError } from "../daemon/prompt-thread.ts";
import { RequestError } from "../daemon/request-error.ts";
import { JournalError, WorkerCrashedError, WorkerStartError } from "../daemon/worker-client.ts";
import { GenerationFailedError } from "./choice-stream.ts";

/**
 * An absolute path (POSIX, Windows or file://) in a message, with the file
 * name it ends in: what a client is told never maps this machine's folders.
 */
const ABSOLUTE_PATH =
  /(?<![\w.~%:/\\-])(?:file:\/\/)?(?:[A-Za-z]:[\\/]|\/)(?:[^\s\\/'"`,;:()<>[\]{}]+[\\/])+([^\s\\/'"`,;:()<>[\]{}]*)/g;

/** The text with every absolute path cut to its last name (the file name). */
export function withoutPaths(text: string): string {
  return text.replace(
    ABSOLUTE_PATH,
    (path: string, name: string) => name || (path.split(/[\\/]/).filter(Boolean).pop() ?? ""),
  );
}

/**
 * Any thrown value as a RequestError: ours pass through, the daemon's failures by their type, the rest are 500s whose
 * messages carry no paths.
 */
export function asRequestError(err: unknown): RequestError {
  if (err instanceof RequestError) return err;
  const message = (fallback: string) => withoutPaths((err as Error | undefined)?.message ?? fallback);
  if (err instanceof WorkerCrashedError) return err.stopped ?? new RequestError(500, message("engine worker failed"));
  // The model's RPC worker is away (docs/guides/multi-machine.md): the next request tries it again.
  if (err instanceof WorkerStartError && err.away)
    return new RequestError(503, err.message, "rpc_worker_unavailable", null, { "retry-after": "5" });
  if (err instanceof JournalError)
    return new RequestError(500, message("the session log could not be written"), "session_log_failed");
  if (err instanceof GenerationFailedError) return new RequestError(err.status, message("generation failed"));
  if (err instanceof ModelClosedError) {
    return new RequestError(
      503,
      "the model was unloaded while this request was being prepared; it loads again on the next request",
      "model_unloading",
      "model",
      { "retry-after": "2" },
    );
  }
  return new RequestError(500, `internal error: ${withoutPaths((err as Error | undefined)?.message ?? String(err))}`);
}
