// What the benchmarks share for reading streamed replies: an SSE event reader,
// an NDJSON line reader (Ollama's streams) and a streamed chat request timed
// to its first text.

// Server-Sent Events: `data:` lines (several make one event), `:` comments,
// blank line ends an event, `data: [DONE]` ends the stream. llama-server may
// send an `error: {...}` line instead of an event; that is an error.
export async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<{ data?: string; error?: string }> {
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // A lone \r at the end of the buffer may be half of \r\n: wait for more.
        if (buffer[nl] === "\r" && nl === buffer.length - 1 && !done) break;
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (data.length) yield { data: data.join("\n") };
          data = [];
        } else if (line.startsWith(":")) {
          // comment / keep-alive
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line[5] === " " ? 6 : 5));
        } else if (line.startsWith("error:")) {
          yield { error: line.slice(6).trim() };
        } // `event:`, `id:`, `retry:` carry nothing we need
      }
      if (done) break;
    }
    if (buffer.trim().startsWith("data:")) data.push(buffer.trim().slice(5).trimStart());
    if (data.length) yield { data: data.join("\n") };
  } finally {
    reader.releaseLock();
  }
}

export interface TimedChat {
  status: number;
  /** Milliseconds from sending to the first chunk carrying reply text (content or reasoning). */
  firstMs: number;
  content: string;
  completionTokens: number;
  cachedTokens: number;
}

/** Streams a chat completion and times it to its first text. */
export async function timedChat(
  url: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<TimedChat> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
  });
  const out: TimedChat = { status: res.status, firstMs: NaN, content: "", completionTokens: 0, cachedTokens: 0 };
  for await (const event of sseEvents(res.body!)) {
    if (!event.data?.startsWith("{")) continue;
    const chunk = JSON.parse(event.data);
    const delta = chunk.choices?.[0]?.delta ?? {};
    if ((delta.content || delta.reasoning_content) && Number.isNaN(out.firstMs)) out.firstMs = performance.now() - t0;
    out.content += delta.content ?? "";
    if (chunk.usage) {
      out.completionTokens = chunk.usage.completion_tokens;
      out.cachedTokens = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
    }
  }
  return out;
}

/** NDJSON (Ollama's streams): each non-empty line, trimmed; a last line without its newline too. */
export async function* ndjsonLines(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 1);
      if (line) yield line;
    }
  }
  buffer += decoder.decode();
  if (buffer.trim()) yield buffer.trim();
}
