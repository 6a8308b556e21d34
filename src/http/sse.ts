// Server-sent events in the seed's framing: `data: <json>\n\n` events,
// `: keep-alive` comment lines while idle, `data: [DONE]` at the end. A client
// that goes away cancels the producer through the AbortSignal. An error after
// the stream began is one `{"error": ...}` data frame, then `data: [DONE]`.
import { asApiError } from "./errors.ts";

export const SSE_HEADERS = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  connection: "keep-alive",
};

export const KEEPALIVE_INTERVAL_MS = 15_000;

export interface SseSink {
  send(data: unknown): void;
}

/**
 * Streams what `produce` sends. `produce` gets a sink and a signal that fires
 * when the client disconnects; when it returns, `data: [DONE]` is written.
 */
export function sseResponse(
  produce: (sink: SseSink, signal: AbortSignal) => Promise<void>,
  headers: Record<string, string> = {},
  keepaliveMs = KEEPALIVE_INTERVAL_MS,
): Response {
  const encoder = new TextEncoder();
  const abort = new AbortController();
  let keepalive: ReturnType<typeof setInterval> | undefined;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const write = (text: string) => {
        if (abort.signal.aborted) return;
        try {
          controller.enqueue(encoder.encode(text));
        } catch {
          abort.abort();
        }
      };
      keepalive = setInterval(() => write(": keep-alive\n\n"), keepaliveMs);
      const sink: SseSink = { send: (data) => write(`data: ${JSON.stringify(data)}\n\n`) };
      produce(sink, abort.signal)
        .catch((err) => sink.send(asApiError(err).envelope()))
        .finally(() => {
          clearInterval(keepalive);
          write("data: [DONE]\n\n");
          try {
            controller.close();
          } catch {
            // the client is already gone
          }
        });
    },
    cancel() {
      clearInterval(keepalive);
      abort.abort();
    },
  });
  return new Response(stream, { headers: { ...SSE_HEADERS, ...headers } });
}
