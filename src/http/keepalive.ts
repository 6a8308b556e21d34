// Non-streaming keep-alive (docs/api/openai.md#non-streaming-keep-alive): with --nonstream-keepalive, a
// non-streamed generation commits `200 OK` (header
// `x-superfluid-keepalive: whitespace`) when it is admitted, writes one space
// every interval, then the JSON body; JSON parsers skip the leading spaces.
// Before admission an error keeps its own status; after it, it can only be
// the error envelope in the body.
import { asRequestError } from "../pipeline/request-failure.ts";
import type { RequestError } from "../daemon/request-error.ts";

export const KEEPALIVE_HEADER = "x-superfluid-keepalive";

export interface JsonReply {
  body: unknown;
  headers?: Record<string, string>;
}

export interface NonStreamOptions {
  /** --nonstream-keepalive in seconds; 0 = off (the reply is sent whole when ready). */
  keepaliveSec: number;
  /** Settles at admission with the headers known then; may never settle (a request that expires in the queue). */
  admitted: Promise<Record<string, string>>;
  reply: Promise<JsonReply>;
  /** The client went away after the 200 was committed. */
  cancel: () => void;
  /** For the server log when an error lands in a committed body. */
  route: string;
  /** An error that lands in a committed body, in the family's envelope. */
  errorBody: (err: RequestError) => unknown;
}

/**
 * The headers a reply can commit at admission (`x-superfluid-warm`), as a
 * promise for nonStreamResponse and the callback choiceText calls when the
 * generation is admitted.
 */
export function admissionHeaders(): {
  admitted: Promise<Record<string, string>>;
  onAdmitted: (cachedTokens: number) => void;
} {
  let settle!: (headers: Record<string, string>) => void;
  const admitted = new Promise<Record<string, string>>((resolve) => (settle = resolve));
  return { admitted, onAdmitted: (cached) => settle({ "x-superfluid-warm": String(cached) }) };
}

export async function nonStreamResponse(o: NonStreamOptions): Promise<Response> {
  if (!(o.keepaliveSec > 0)) {
    const r = await o.reply;
    return Response.json(r.body, { headers: r.headers ?? {} });
  }
  type Settled = { kind: "done"; reply: JsonReply } | { kind: "failed"; error: unknown };
  const settled: Promise<Settled> = o.reply.then(
    (reply) => ({ kind: "done", reply }),
    (error) => ({ kind: "failed", error }),
  );
  const first = await Promise.race([o.admitted.then((headers) => ({ kind: "admitted" as const, headers })), settled]);
  if (first.kind === "failed") throw first.error;
  if (first.kind === "done") return Response.json(first.reply.body, { headers: first.reply.headers ?? {} });

  const encoder = new TextEncoder();
  let closed = false;
  let timer: ReturnType<typeof setInterval> | undefined;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const write = (text: string) => {
        if (closed) return;
        try {
          controller.enqueue(encoder.encode(text));
        } catch {
          closed = true;
          clearInterval(timer);
          o.cancel();
        }
      };
      // One space at once so the status line and headers leave now, then one per interval.
      write(" ");
      timer = setInterval(() => write(" "), o.keepaliveSec * 1000);
      void settled.then((s) => {
        clearInterval(timer);
        if (s.kind === "done") write(JSON.stringify(s.reply.body));
        else {
          const err = asRequestError(s.error);
          if (err.status >= 500) console.error(`superfluid: POST ${o.route}: ${err.message}`);
          write(JSON.stringify(o.errorBody(err)));
        }
        if (closed) return;
        closed = true;
        try {
          controller.close();
        } catch {
          // the client is already gone
        }
      });
    },
    cancel() {
      closed = true;
      clearInterval(timer);
      o.cancel();
    },
  });
  return new Response(stream, {
    status: 200,
    headers: {
      "content-type": "application/json",
      [KEEPALIVE_HEADER]: "whitespace",
      "cache-control": "no-cache",
      ...first.headers,
    },
  });
}
