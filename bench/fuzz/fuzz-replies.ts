// What the fuzz run (bench/fuzz/fuzz.ts) checks in a reply: an error in its
// family's envelope (OpenAI's, Anthropic's, Ollama's), a whole 200 in the
// route's shape, and a stream read to its end as its family ends one
// (OpenAI SSE's [DONE], Anthropic's message_stop, Responses'
// response.completed, Ollama's `done: true` record) with no error in it.
import { CHAT, COMPLETIONS, type Spec } from "./fuzz-kit.ts";
import { ndjsonLines, sseEvents } from "../sse.ts";

type Family = "openai" | "anthropic" | "ollama";

/** The family whose envelope a path's errors carry (as src/http/envelopes.ts decides it). */
export function familyOfPath(path: string): Family {
  const p = path.split("?", 1)[0]!;
  if (p.startsWith("/v1/messages")) return "anthropic";
  if (p.startsWith("/api/")) return "ollama";
  return "openai";
}

function envelopeOk(family: Family, v: any): boolean {
  if (family === "anthropic")
    return v?.type === "error" && typeof v.error?.type === "string" && typeof v.error?.message === "string";
  if (family === "ollama") return typeof v?.error === "string";
  const e = v?.error;
  return typeof e?.message === "string" && typeof e?.type === "string" && "param" in e && "code" in e;
}

/** A whole 200 JSON reply in its route's shape, or what is wrong with it. */
function shapeProblem(spec: Spec, v: any): string | undefined {
  const path = (spec.path ?? "").split("?", 1)[0]!;
  if (spec.method !== "POST") return undefined;
  if ((path === CHAT || path === COMPLETIONS) && (!Array.isArray(v?.choices) || v.choices.length === 0))
    return "200 without choices";
  if (path === "/v1/messages" && (v?.type !== "message" || !Array.isArray(v.content))) return "200 not a message";
  if ((path === "/api/chat" || path === "/api/generate") && v?.done !== true) return "200 record not done";
  if (path === "/v1/responses" && (v?.object !== "response" || !["completed", "incomplete"].includes(v.status)))
    return "200 not a finished response";
  if (path === "/v1/embeddings" && !Array.isArray(v?.data)) return "200 without data";
  return undefined;
}

/** Checks a whole (unstreamed) reply; `value` is the parsed JSON of a 200. */
export function checkBody(spec: Spec, status: number, text: string, ctype: string): { problem?: string; value?: any } {
  if (spec.method === "HEAD") return {};
  const family = familyOfPath(spec.path ?? "/");
  if (status >= 400) {
    if (spec.bareErrorOk && text === "") return {};
    try {
      if (envelopeOk(family, JSON.parse(text))) return {};
    } catch {}
    return { problem: `error reply not in the ${family} envelope` };
  }
  if (status === 200 && ctype.includes("json")) {
    let value: any;
    try {
      // Under --nonstream-keepalive a body may start with spaces; JSON.parse takes them.
      value = JSON.parse(text);
    } catch {
      return { problem: "200 body is not JSON" };
    }
    const problem = shapeProblem(spec, value);
    return problem ? { problem, value } : { value };
  }
  return {};
}

/** How a stream of this path ends, and what in it is an error. */
function sseRules(path: string): {
  done: (data: string) => boolean;
  error: (data: string) => boolean;
  needsDone: boolean;
} {
  const p = path.split("?", 1)[0]!;
  const typeOf = (data: string): string | undefined => {
    try {
      return JSON.parse(data)?.type;
    } catch {
      return undefined;
    }
  };
  if (p.startsWith("/v1/messages"))
    return { done: (d) => typeOf(d) === "message_stop", error: (d) => typeOf(d) === "error", needsDone: true };
  if (p.startsWith("/v1/responses"))
    return {
      done: (d) => ["response.completed", "response.incomplete"].includes(typeOf(d) ?? ""),
      error: (d) => ["error", "response.failed"].includes(typeOf(d) ?? ""),
      needsDone: true,
    };
  return { done: (d) => d === "[DONE]", error: (d) => d.startsWith('{"error"'), needsDone: true };
}

/** Reads a 200 stream to its end (or the client's abort) and says what is wrong with it. */
export async function readStream(
  spec: Spec,
  body: ReadableStream<Uint8Array>,
  ctype: string,
  abort: AbortController,
): Promise<{ problem?: string; snippet: string }> {
  let events = 0;
  let done = false;
  let last = "";
  const abortNow = () => spec.abortAfter?.events !== undefined && events >= spec.abortAfter.events;
  if (ctype.includes("ndjson")) {
    for await (const line of ndjsonLines(body)) {
      events++;
      last = line;
      let v: any;
      try {
        v = JSON.parse(line);
      } catch {
        return { problem: "stream record is not JSON", snippet: line.slice(0, 300) };
      }
      if (typeof v?.error === "string") return { problem: "error record in a 200 stream", snippet: line.slice(0, 300) };
      if (v?.done === true) done = true;
      if (abortNow()) {
        abort.abort("client abort");
        return { snippet: `aborted after ${events} records` };
      }
    }
    return done
      ? { snippet: last.slice(0, 200) }
      : { problem: "stream ended without its done record", snippet: last.slice(0, 300) };
  }
  const rules = sseRules(spec.path ?? "");
  for await (const ev of sseEvents(body)) {
    events++;
    last = ev.data ?? ev.error ?? "";
    if (ev.error || (ev.data !== undefined && rules.error(ev.data)))
      return { problem: "error frame in a 200 stream", snippet: last.slice(0, 300) };
    if (ev.data !== undefined && rules.done(ev.data)) done = true;
    else if (ev.data !== undefined) {
      try {
        JSON.parse(ev.data);
      } catch {
        return { problem: "stream event is not JSON", snippet: ev.data.slice(0, 300) };
      }
    }
    if (abortNow()) {
      abort.abort("client abort");
      return { snippet: `aborted after ${events} events` };
    }
  }
  return done || !rules.needsDone
    ? { snippet: last.slice(0, 200) }
    : { problem: "stream ended without its last event", snippet: last.slice(0, 300) };
}
