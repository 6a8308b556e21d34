// POST /web/stream (docs/api/sessions.md#web-stream): one Generate as
// server-sent events. Each committed Generated, ToolUse or ToolParseFailure event is a
// `{"committed": event}` line, text ahead of its commit a `{"provisional"}`
// line when asked for, then `{"done"}` (or `{"error"}`) and `[DONE]`.
// Closing the stream cancels the generation (finish 4), as Cancel does.
import type { ToolChoice } from "../pipeline/tool-plan.ts";
import { toolChoiceOf, type SessionService } from "../session-api/service.ts";
import type { RunningGeneration } from "../session-api/generate.ts";
import { Fields, parseRequest, WireError, wireEvent } from "../session-api/wire.ts";

export function streamGeneration(service: SessionService, body: unknown, signal: AbortSignal): Response {
  let session: number;
  let maxTokens: number | undefined;
  let provisional: boolean;
  let toolChoice: ToolChoice;
  try {
    if (typeof body !== "object" || body === null || Array.isArray(body))
      throw new WireError('/web/stream takes {"session", "max_tokens", "provisional"}');
    const f = new Fields(parseRequest({ Stream: body }));
    session = f.int("session", 1);
    maxTokens = f.optionalInt("max_tokens", 1);
    provisional = f.bool("provisional", false);
    toolChoice = toolChoiceOf(f);
  } catch (e) {
    return Response.json({ Err: { message: (e as Error).message } }, { headers: { "cache-control": "no-store" } });
  }
  let running: RunningGeneration | undefined;
  let closed = false;
  const stop = () => {
    closed = true;
    running?.cancel();
  };
  signal.addEventListener("abort", stop, { once: true });
  const encoder = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      const line = (data: unknown) => {
        if (!closed)
          controller.enqueue(encoder.encode(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`));
      };
      try {
        const summary = await service.runGeneration(
          session,
          maxTokens,
          {
            committed: (event) => {
              const b = event.body;
              if ("Generated" in b || "ToolUse" in b || "ToolResult" in b || "ToolParseFailure" in b)
                line({ committed: wireEvent(event) });
            },
            ...(provisional
              ? { provisional: (channel: number, text: string) => line({ provisional: { channel, text } }) }
              : {}),
          },
          (r) => {
            running = r;
            if (closed) r.cancel();
          },
          toolChoice,
        );
        line({
          done: {
            tokens_generated: summary.tokens_generated,
            finish: summary.finish,
            warm_prefix: summary.warm_prefix,
          },
        });
      } catch (e) {
        line({ error: (e as Error).message });
      }
      line("[DONE]");
      if (!closed) controller.close();
      signal.removeEventListener("abort", stop);
    },
    cancel: stop,
  });
  return new Response(stream, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-store", "x-accel-buffering": "no" },
  });
}
