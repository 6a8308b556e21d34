// Reads a JSON request body with a size cap that is enforced while streaming,
// so a 100 MiB+ body is refused (413) without being buffered whole. Only JSON
// is read: a form or text/plain POST is what any web page can send without a
// CORS preflight, so it is refused (415) before its body is looked at.
import { RequestError, invalidRequest } from "../daemon/request-error.ts";
import { MAX_BODY_BYTES, payloadTooLarge } from "./errors.ts";

/** Types `curl -d` sends when it is not told the type (a form) and text/plain: what Ollama's own examples send. */
const UNTYPED = new Set(["application/x-www-form-urlencoded", "text/plain"]);

/**
 * application/json and the +json types; no Content-Type at all reads as JSON
 * too. With `curlTypes`, a form or text/plain body is read as JSON when the
 * request has no Origin: browsers send Origin on every POST, so such a
 * request is not a web page's (Ollama's documented `curl -d` calls are).
 */
function checkJsonContentType(request: Request, curlTypes: boolean): void {
  const declared = request.headers.get("content-type");
  if (declared === null) return;
  const essence = declared.split(";", 1)[0]!.trim().toLowerCase();
  if (essence === "application/json" || /^application\/[!#$%&'*.^`|~\w-]+\+json$/.test(essence)) return;
  if (curlTypes && UNTYPED.has(essence) && !request.headers.has("origin")) return;
  throw new RequestError(
    415,
    `the request body must be JSON (content-type: application/json), not '${essence}'`,
    "unsupported_media_type",
    null,
  );
}

/**
 * Deepest nesting of arrays and objects a body may have. Every handler walks
 * request values recursively (validation, templates, schema compilation), so
 * a body nested tens of thousands deep would overflow the stack; no API
 * request needs more than a few dozen levels.
 */
export const MAX_JSON_DEPTH = 256;

/** Refuses JSON text nested deeper than MAX_JSON_DEPTH (a linear scan, strings skipped), before it is parsed. */
function checkDepth(text: string): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_JSON_DEPTH) throw invalidRequest(`request body is nested deeper than ${MAX_JSON_DEPTH} levels`);
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
}

/**
 * How long a request body may send nothing before it is answered 408: a
 * client that stops mid-body (a slow-loris body) would otherwise hold its
 * connection and the handler waiting forever. Every real client sends its
 * body as fast as the network carries it; 30 s is far past any pause of a
 * live connection.
 */
export const BODY_IDLE_TIMEOUT_MS = 30_000;

let idleTimeoutMs = BODY_IDLE_TIMEOUT_MS;

/** Test seam: sets the idle limit (tests never wait 30 s); returns the previous one. */
export function setBodyIdleTimeoutMs(ms: number): number {
  const previous = idleTimeoutMs;
  idleTimeoutMs = ms;
  return previous;
}

export const bodyTimedOut = () =>
  new RequestError(
    408,
    `the request body sent nothing for ${idleTimeoutMs / 1000} s: it must arrive without pauses`,
    "request_timeout",
  );

/** What a request body's reader gives (the fetch reader's shape). */
export interface BodyReader {
  read(): Promise<{ done: true; value?: undefined } | { done: false; value: Uint8Array }>;
  cancel(): Promise<void>;
}

/** A fetch body's reader as a BodyReader (its done step types its value loosely). */
export const bodyReader = (body: ReadableStream<Uint8Array>): BodyReader => body.getReader() as BodyReader;

/**
 * The next chunk of a request body, or a 408 when none arrives within the
 * idle limit (the reader is then cancelled: the listener drops the rest). A
 * body that fails before its end (the client went away) is a 400 nobody reads.
 * Every reader of request bodies reads through this, so each has the same deadline.
 */
export async function readBodyStep(
  reader: BodyReader,
): Promise<{ done: true; value?: undefined } | { done: false; value: Uint8Array }> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const idle = new Promise<"idle">((resolve) => (timer = setTimeout(() => resolve("idle"), idleTimeoutMs)));
  try {
    const step = await Promise.race([reader.read(), idle]);
    if (step !== "idle") return step;
  } catch {
    throw invalidRequest("the request body ended before all of it arrived");
  } finally {
    clearTimeout(timer);
  }
  reader.cancel().catch(() => {});
  throw bodyTimedOut();
}

export async function readJsonBody(
  request: Request,
  opts: { limit?: number; curlTypes?: boolean } = {},
): Promise<unknown> {
  const limit = opts.limit ?? MAX_BODY_BYTES;
  checkJsonContentType(request, opts.curlTypes ?? false);
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared > limit) throw payloadTooLarge();
  if (!request.body) throw invalidRequest("request body is empty; expected a JSON object");
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = bodyReader(request.body);
  for (;;) {
    const { done, value } = await readBodyStep(reader);
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      reader.cancel().catch(() => {});
      throw payloadTooLarge();
    }
    chunks.push(value);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") throw invalidRequest("request body is empty; expected a JSON object");
  checkDepth(text);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new RequestError(400, `request body is not valid JSON: ${(err as Error).message}`);
  }
}
