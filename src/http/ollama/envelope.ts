// Ollama's error shape (docs/api/ollama.md#errors): `{"error": "<message>"}`
// with the error's status before the body starts, one such line mid-stream.
import type { RequestError } from "../../daemon/request-error.ts";
import { ndjsonFraming } from "../stream.ts";

export function ollamaErrorBody(err: RequestError): { error: string } {
  return { error: err.message };
}

/** Ollama's streams: one JSON object per line, an error as one `{"error"}` line. */
export const OLLAMA_NDJSON = ndjsonFraming({ error: ollamaErrorBody });

/**
 * Ollama's documented calls are `curl -d` without a content type: its routes read those bodies too (src/http/body.ts).
 */
export const CURL_BODIES = { curlTypes: true } as const;
