// Streamed replies for every API family: one writer, several framings.
// - SSE: `data: <json>` frames, with an `event: <name>` line when the family
//   names its events (Anthropic) and a closing `data: [DONE]` when it wants
//   one (OpenAI); `: keep-alive` comment lines while idle, or the family's
//   own idle event (Anthropic's `ping`).
// - NDJSON: one JSON object per line (Ollama), no keep-alive (a blank line
//   would not be JSON).
// A client that goes away fires the producer's AbortSignal; an error after
// the stream began is one frame in the family's error shape, then the end.
import { asRequestError } from "../pipeline/request-failure.ts";
import type { RequestError } from "../daemon/request-error.ts";

export const KEEPALIVE_INTERVAL_MS = 15_000;

export interface StreamSink {
  /** One frame; `event` names it where the framing has names (SSE `event:` lines). */
  send(data: unknown, event?: string): void;
}

export interface StreamFraming {
  contentType: string;
  frame(data: unknown, event?: string): string;
  /** Written while idle, or null for none. */
  keepalive: string | null;
  /** Written after the last frame, if anything. */
  end: string;
  /** An error after the stream began, as a frame. */
  error(err: RequestError): { data: unknown; event?: string };
}

const sseFrame = (data: unknown, event?: string) =>
  `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`;

export function sseFraming(o: {
  done: boolean;
  error: (err: RequestError) => { data: unknown; event?: string };
  /** The frame written while idle (Anthropic's `ping` event); a `: keep-alive` comment by default. */
  keepalive?: { data: unknown; event: string };
}): StreamFraming {
  return {
    contentType: "text/event-stream",
    frame: sseFrame,
    keepalive: o.keepalive ? sseFrame(o.keepalive.data, o.keepalive.event) : ": keep-alive\n\n",
    end: o.done ? "data: [DONE]\n\n" : "",
    error: o.error,
  };
}

export function ndjsonFraming(o: { error: (err: RequestError) => unknown }): StreamFraming {
  return {
    contentType: "application/x-ndjson",
    frame: (data) => `${JSON.stringify(data)}\n`,
    keepalive: null,
    end: "",
    error: (err) => ({ data: o.error(err) }),
  };
}

/**
 * Streams what `produce` sends, framed by `framing`. `produce` gets a sink and
 * a signal that fires when the client disconnects; when it returns (or
 * throws), the framing's end is written.
 */
export function streamResponse(
  framing: StreamFraming,
  produce: (sink: StreamSink, signal: AbortSignal) => Promise<void>,
  headers: Record<string, string> = {},
  keepaliveMs = KEEPALIVE_INTERVAL_MS,
): Response {
  const encoder = new TextEncoder();
  const abort = new AbortController();
  let keepalive: ReturnType<typeof setInterval> | undefined;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const write = (text: string) => {
        if (abort.signal.aborted || text === "") return;
        try {
          controller.enqueue(encoder.encode(text));
        } catch {
          abort.abort();
        }
      };
      if (framing.keepalive !== null) keepalive = setInterval(() => write(framing.keepalive!), keepaliveMs);
      const sink: StreamSink = { send: (data, event) => write(framing.frame(data, event)) };
      produce(sink, abort.signal)
        .catch((err) => {
          const frame = framing.error(asRequestError(err));
          sink.send(frame.data, frame.event);
        })
        .finally(() => {
          clearInterval(keepalive);
          write(framing.end);
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
  return new Response(stream, {
    headers: { "content-type": framing.contentType, "cache-control": "no-cache", connection: "keep-alive", ...headers },
  });
}
