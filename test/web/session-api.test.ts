// The session API over the --web listener (docs/api/sessions.md): requests on
// /web/rpc and /web/ws, generations as Delta frames and as /web/stream SSE,
// subscriptions, forks, trims, rebases, tool calls, cancels, busy sessions
// and the requests the llama.cpp runtime refuses. Each describe runs one
// server process (they are slow to start on a busy machine). The built-in
// tiny-chat model answers every turn with one fixed sentence; tiny-random
// (random weights) keeps generating for thousands of tokens, which is what
// the cancel and busy tests need. Every wait is on a frame, a line or a Read
// result; the timeouts are hang guards only.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  generateWith,
  GREEDY,
  HANG_GUARD_MS,
  readEvents,
  recordOf,
  replyText,
  WebServer,
  type Frame,
  type SocketClient,
} from "./support.ts";

const REPLY = "Hello from superfluid's built-in test model.";
/**
 * tiny-random's weights are random, so a greedy turn ends wherever its end
 * token first wins: after 2,930 tokens for LONG_PROMPTS[0], 2,141 and 1,479
 * for the others (several seconds each), while other short prompts end
 * within 50-500 tokens. The cancel tests act a few requests after the first
 * token, far inside those turns.
 */
const LONG_PROMPTS = ["Tell me everything.", "Hello there", "Count to a thousand."] as const;
const LONG = 4000;

const WEATHER_TOOL = JSON.stringify({
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
});

/** Event ids are 0..n-1, in order, with no gap. */
function expectContiguous(events: Frame[], from = 0): void {
  expect(events.map((e) => e.event_id)).toEqual(events.map((_, i) => from + i));
}

/** An Err reply's message (the test fails on any other reply). */
function errOf(reply: Frame): string {
  expect(reply?.Err?.message).toBeString();
  return reply.Err.message;
}

/** Polls `probe` until it returns a value (a Read or Inspect result awaited, not a timing assertion). */
async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + HANG_GUARD_MS;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await Bun.sleep(25);
  }
}

/** A session with one user message on it. */
async function sessionWithMessage(web: WebServer, text = "Say hello."): Promise<number> {
  const session = await web.create();
  const reply = await web.rpc({ AppendMessage: { session, role: 1, text } });
  expect(reply.Committed.event.body.Message).toMatchObject({ role: 1, text });
  return session;
}

/** A POST /web/stream read line by line, so a test can act in the middle of it. */
class SseReader {
  private readonly controller = new AbortController();
  private reader!: ReadableStreamDefaultReader<Uint8Array>;
  private buffer = "";
  private readonly decoder = new TextDecoder();

  static async open(web: WebServer, body: unknown): Promise<SseReader> {
    const r = new SseReader();
    const res = await fetch(`${web.base}/web/stream`, {
      method: "POST",
      headers: web.headers(),
      body: JSON.stringify(body),
      signal: r.controller.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    r.reader = res.body!.getReader() as ReadableStreamDefaultReader<Uint8Array>;
    return r;
  }

  /** The next `data:` payload, parsed ("[DONE]" as the string); undefined at the end of the stream. */
  async next(): Promise<Frame | undefined> {
    for (;;) {
      const at = this.buffer.indexOf("\n\n");
      if (at >= 0) {
        const block = this.buffer.slice(0, at);
        this.buffer = this.buffer.slice(at + 2);
        const data = block.split("\n").find((l) => l.startsWith("data: "));
        if (data === undefined) continue;
        const payload = data.slice(6);
        return payload === "[DONE]" ? payload : JSON.parse(payload);
      }
      const { done, value } = await this.reader.read();
      if (done) return undefined;
      this.buffer += this.decoder.decode(value, { stream: true });
    }
  }

  abort(): void {
    this.controller.abort();
  }
}

describe("session API on tiny-chat (/web/rpc, /web/ws, /web/stream)", () => {
  let web: WebServer;
  let ws: SocketClient;

  beforeAll(async () => {
    web = await WebServer.start({ fixture: "tiny-chat" });
    ws = await web.socket();
  });

  afterAll(async () => {
    ws?.close();
    await web?.stop();
  });

  test("create, append, generate and read back over /web/rpc and /web/ws", async () => {
    // Create and AppendMessage on /web/rpc, Generate on /web/ws.
    const session = await web.create();
    const appended = await web.rpc({ AppendMessage: { session, role: 1, text: "Say hello." } });
    expect(appended.Committed.event.event_id).toBe(1);
    expect(appended.Committed.event.body.Message.span.length).toBeGreaterThan(0);

    const { deltas, reply } = await ws.generate(session, 64);
    expect(reply.Generated).toBeDefined();
    expect(reply.Generated.finish).toBe(1);
    expect(reply.Generated.tokens_generated).toBe(9);
    expect(replyText(deltas)).toBe(REPLY);
    // The summary lists the committed events, the same ones the Delta frames carried.
    expect(reply.Generated.events).toEqual(deltas);

    // Read back on both transports: the same log.
    const events = await readEvents(web, session);
    const viaSocket = await ws.call({ Read: { session, cursor: 0 } });
    expect(viaSocket.Events.events).toEqual(events);
    expectContiguous(events);
    expect(events.map(recordOf).slice(0, 3)).toEqual(["Created", "Message", "GenerationPrompt"]);
    expect(events[0].body.Created).toEqual({ parent: null, params: GREEDY });
    expect(events[2].body.GenerationPrompt.span.length).toBeGreaterThan(0);
    const generated = events.filter((e) => recordOf(e) === "Generated");
    expect(replyText(events)).toBe(REPLY);
    // Every token the model produced is in some span; text-bearing events carry their tokens.
    expect(generated.flatMap((e) => e.body.Generated.span).length).toBe(9);
    for (const e of generated)
      if (e.body.Generated.text !== "") expect(e.body.Generated.span.length).toBeGreaterThan(0);
    expect(generated.at(-1).body.Generated.finish).toBe(1);
    expect(generated.slice(0, -1).every((e) => e.body.Generated.finish === 0)).toBe(true);
    expect(events.slice(2)).toEqual(deltas);

    // A cursor reads from that event on.
    const tail = await readEvents(web, session, 2);
    expect(tail).toEqual(events.slice(2));

    // Appending on /web/ws works the same, and the next turn opens with a new GenerationPrompt.
    const second = await ws.call({ AppendMessage: { session, role: 1, text: "Again." } });
    expect(second.Committed.event.event_id).toBe(events.length);
    const again = await ws.generate(session, 64);
    expect(recordOf(again.deltas[0])).toBe("GenerationPrompt");
    expect(replyText(again.deltas)).toBe(REPLY);
    expectContiguous(await readEvents(web, session));

    expect((await web.rpc({ List: null })).Sessions.ids).toContain(session);
    expect((await web.rpc("List")).Sessions.ids).toContain(session);
  });

  test("fork at an event, generate on both branches; the fork's prompt comes from the cache", async () => {
    // Long enough that the shared prompt is worth reusing (the cache skips prefixes of a few tokens).
    const parent = await sessionWithMessage(web, "Fork me. ".repeat(16));
    const first = await ws.generate(parent, 64);
    expect(replyText(first.deltas)).toBe(REPLY);
    const parentEvents = await readEvents(web, parent);

    // Fork after the user message: the fork holds events 0 and 1, then its Forked record.
    const forked = await web.rpc({ Fork: { session: parent, at_event: 2, params: null } });
    const child = forked.Created.session;
    const childEvents = await readEvents(web, child);
    expect(childEvents.slice(0, 2)).toEqual(parentEvents.slice(0, 2));
    expectContiguous(childEvents);
    expect(childEvents[2].body.Forked).toMatchObject({ parent, fork_at: 2, params: GREEDY });

    const onChild = await ws.generate(child, 64);
    expect(onChild.reply.Generated.finish).toBe(1);
    expect(replyText(onChild.deltas)).toBe(REPLY);
    // The shared prefix (the user message and the assistant header) was prefilled by the parent.
    expect(onChild.reply.Generated.warm_prefix).toBeGreaterThan(0);

    // The parent goes on by itself; neither branch sees the other's events.
    await web.rpc({ AppendMessage: { session: parent, role: 1, text: "And the parent?" } });
    const onParent = await ws.generate(parent, 64);
    expect(replyText(onParent.deltas)).toBe(REPLY);
    expect(onParent.reply.Generated.warm_prefix).toBeGreaterThan(0);
    const parentAfter = await readEvents(web, parent);
    const childAfter = await readEvents(web, child);
    expectContiguous(parentAfter);
    expectContiguous(childAfter);
    expect(childAfter.some((e) => e.body.Message?.text === "And the parent?")).toBe(false);
    expect(childAfter.length).toBe(2 + 1 + onChild.deltas.length);

    // Forking at the next id keeps everything.
    const whole = (await web.rpc({ Fork: { session: parent, at_event: parentAfter.length, params: null } })).Created
      .session;
    expect((await readEvents(web, whole)).slice(0, parentAfter.length)).toEqual(parentAfter);

    // Fork with new params records them.
    const hot = { temperature: 0.7, top_p: 0.9, min_p: 0.05, top_k: 40, seed: 7 };
    const warm = (await web.rpc({ Fork: { session: parent, at_event: 2, params: hot } })).Created.session;
    expect((await web.rpc({ Inspect: { session: warm } })).Inspection.inspection.params).toEqual(hot);

    // The tree shows both forks under the parent.
    const nodes: [number, number | null, number | null][] = (await web.rpc("Tree")).Tree.nodes;
    expect(nodes).toContainEqual([child, parent, 2]);
    expect(nodes).toContainEqual([whole, parent, parentAfter.length]);
  });

  test("Trim keeps a prefix in a new session", async () => {
    const session = await sessionWithMessage(web, "Trim me.");
    await ws.generate(session, 64);
    const events = await readEvents(web, session);
    const trimmed = await web.rpc({ Trim: { session, to_event: 2 } });
    const child = trimmed.Created.session;
    expect(child).not.toBe(session);
    const kept = await readEvents(web, child);
    expect(kept.slice(0, 2)).toEqual(events.slice(0, 2));
    expect(kept.some((e) => recordOf(e) === "Generated")).toBe(false);
    expectContiguous(kept);
    // The original is untouched.
    expect(await readEvents(web, session)).toEqual(events);
    // The trimmed session generates a fresh turn.
    const g = await ws.generate(child, 64);
    expect(replyText(g.deltas)).toBe(REPLY);
  });

  test("Rebase: Replace a message to the end, and Drop a range", async () => {
    const session = await sessionWithMessage(web, "first question");
    await ws.generate(session, 64);
    await web.rpc({ AppendMessage: { session, role: 1, text: "second question" } });
    await ws.generate(session, 64);
    const events = await readEvents(web, session);
    const second = events.findIndex((e) => e.body.Message?.text === "second question");
    expect(second).toBeGreaterThan(1);

    // Replace the first user message through the end: edit it and drop what followed.
    const replaced = await web.rpc({
      Rebase: {
        session,
        edits: [{ Replace: { from: 1, to: events.length, role: 1, text: "edited question" } }],
        params: null,
      },
    });
    const edited = await readEvents(web, replaced.Created.session);
    expectContiguous(edited);
    expect(edited[0]).toEqual(events[0]);
    expect(edited.some((e) => recordOf(e) === "Rebased")).toBe(true);
    const messages = edited.filter((e) => recordOf(e) === "Message");
    expect(messages.map((e) => e.body.Message.text)).toEqual(["edited question"]);
    expect(messages[0].body.Message.span.length).toBeGreaterThan(0);
    expect(edited.some((e) => ["Generated", "GenerationPrompt"].includes(recordOf(e)))).toBe(false);
    const g = await ws.generate(replaced.Created.session, 64);
    expect(replyText(g.deltas)).toBe(REPLY);

    // Drop the second exchange (its message to the end): the first exchange stays, whole.
    const dropped = await web.rpc({
      Rebase: { session, edits: [{ Drop: { from: second, to: events.length } }], params: null },
    });
    const rest = await readEvents(web, dropped.Created.session);
    expectContiguous(rest);
    expect(rest.filter((e) => recordOf(e) === "Message").map((e) => e.body.Message.text)).toEqual(["first question"]);
    expect(replyText(rest)).toBe(REPLY);
    // The original is untouched.
    expect(await readEvents(web, session)).toEqual(events);
  });

  test("Subscribe from a cursor while another connection generates: every id once, in order", async () => {
    const session = await sessionWithMessage(web, "Watch me.");
    await ws.generate(session, 64);
    await web.rpc({ AppendMessage: { session, role: 1, text: "Once more." } });
    const before = await readEvents(web, session);
    const cursor = 2;

    const watcher = await web.socket();
    const quiet = await web.socket();
    try {
      watcher.send({ Subscribe: { session, cursor, provisional: true } });
      quiet.send({ Subscribe: { session, cursor: before.length, provisional: false } });
      const sub = (await watcher.next((f) => f.Subscribed)).Subscribed.sub;
      const quietSub = (await quiet.next((f) => f.Subscribed)).Subscribed.sub;
      // The backlog first.
      for (let id = cursor; id < before.length; id++)
        expect((await watcher.next((f) => f.SubEvent)).SubEvent).toEqual({ sub, event: before[id] });

      const g = await ws.generate(session, 64);
      expect(replyText(g.deltas)).toBe(REPLY);
      const last = g.reply.Generated.events.at(-1).event_id;

      // Then the live events, up to the generation's last, each once.
      const seen: Frame[] = [];
      while (seen.at(-1)?.event_id !== last) seen.push((await watcher.next((f) => f.SubEvent)).SubEvent.event);
      expect(seen).toEqual(g.deltas);
      expect(seen[0].event_id).toBe(before.length);
      expectContiguous(seen, before.length);
      // A reply on the same connection is a barrier: every frame sent before it is queued now.
      expect((await watcher.call({ Read: { session, cursor: 0 } })).Events.events.length).toBe(last + 1);
      expect(watcher.takeQueued((f) => f.SubEvent)).toEqual([]);
      // Provisional text arrived too (ahead of its commit), on channel 0, and spells the reply.
      const provisional = watcher.takeQueued((f) => f.SubProvisional).map((f) => f.SubProvisional);
      expect(provisional.length).toBeGreaterThan(0);
      expect(provisional.every((p) => p.sub === sub && p.channel === 0)).toBe(true);
      expect(provisional.map((p) => p.text).join("")).toBe(REPLY);

      // The subscriber without provisional gets the same committed events and no provisional frames.
      const quietSeen: Frame[] = [];
      while (quietSeen.at(-1)?.event_id !== last) quietSeen.push((await quiet.next((f) => f.SubEvent)).SubEvent.event);
      expect(quietSeen).toEqual(g.deltas);
      expect(await quiet.call({ Unsubscribe: { sub: quietSub } })).toBe("Unsubscribed");
      expect(await quiet.next((f) => f.SubEnded)).toEqual({ SubEnded: { sub: quietSub, reason: "unsubscribed" } });
      expect(quiet.takeQueued((f) => f.SubProvisional || f.SubEvent)).toEqual([]);
      expect(await quiet.call({ Unsubscribe: { sub: quietSub } })).toHaveProperty("Err");

      expect(await watcher.call({ Unsubscribe: { sub } })).toBe("Unsubscribed");
      await watcher.next((f) => f.SubEnded?.sub === sub);
    } finally {
      watcher.close();
      quiet.close();
    }
  });

  test("a tool call round trip: AppendSystem with a tool, a forced call, OpenToolCalls, AppendToolResult, the answer", async () => {
    const session = await web.create();
    const system = await web.rpc({
      AppendSystem: { session, text: "You can check the weather.", tools: [WEATHER_TOOL] },
    });
    expect(system.Committed.event.body.Message).toMatchObject({ role: 0, text: "You can check the weather." });
    await web.rpc({ AppendMessage: { session, role: 1, text: "Weather in Oslo?" } });
    // AppendSystem is refused once the session has input.
    expect(errOf(await web.rpc({ AppendSystem: { session, text: "late", tools: [] } }))).toContain("AppendSystem");

    const call = await generateWith(ws, { session, max_tokens: 128, tool_choice: "required" });
    expect(call.reply.Generated).toBeDefined();
    const uses = call.deltas.filter((e) => recordOf(e) === "ToolUse");
    expect(uses.length).toBe(1);
    const use = uses[0];
    expect(use.body.ToolUse.name).toBe("get_weather");
    const args = JSON.parse(use.body.ToolUse.arguments);
    expect(typeof args.city).toBe("string");
    expect(args.city).toContain("hello");

    const open = await web.rpc({ OpenToolCalls: { session } });
    expect(open.ToolCalls.calls).toEqual([[use.event_id, "get_weather", use.body.ToolUse.arguments]]);
    expect((await web.rpc({ Inspect: { session } })).Inspection.inspection.open_tool_calls).toBe(1);

    const result = await web.rpc({
      AppendToolResult: { session, call_id: use.event_id, content: '{"temperature": 21}' },
    });
    expect(result.Committed.event.body.ToolResult).toMatchObject({
      call_id: use.event_id,
      content: '{"temperature": 21}',
    });
    expect(result.Committed.event.body.ToolResult.span.length).toBeGreaterThan(0);
    expect((await web.rpc({ OpenToolCalls: { session } })).ToolCalls.calls).toEqual([]);
    // The same call cannot be answered twice.
    expect(errOf(await web.rpc({ AppendToolResult: { session, call_id: use.event_id, content: "again" } }))).toContain(
      "not an open tool call",
    );

    const answer = await ws.generate(session, 64);
    expect(answer.reply.Generated.finish).toBe(1);
    expect(recordOf(answer.deltas[0])).toBe("GenerationPrompt");
    expect(replyText(answer.deltas)).toBe(REPLY);
    expect((await web.rpc({ OpenToolCalls: { session } })).ToolCalls.calls).toEqual([]);
    expectContiguous(await readEvents(web, session));
  });

  test("a named tool_choice, AppendToolOutcome, and a Rebase that renumbers a call and its result", async () => {
    const session = await web.create();
    await web.rpc({ AppendSystem: { session, text: "Tools.", tools: [WEATHER_TOOL] } });
    await web.rpc({ AppendMessage: { session, role: 1, text: "Weather in Oslo?" } });
    expect(errOf((await generateWith(ws, { session, tool_choice: "sometimes" })).reply)).toContain(
      "Generate.tool_choice",
    );
    const before = await readEvents(web, session);
    // Refused before anything is recorded.
    expect(errOf((await generateWith(ws, { session, tool_choice: { name: "no_such_tool" } })).reply)).toContain("tool");
    expect(await readEvents(web, session)).toEqual(before);

    const named = await generateWith(ws, { session, max_tokens: 128, tool_choice: { name: "get_weather" } });
    expect(named.deltas[0].event_id).toBe(before.length);
    expect(recordOf(named.deltas[0])).toBe("GenerationPrompt");
    const use = named.deltas.find((e) => recordOf(e) === "ToolUse");
    expect(use.body.ToolUse.name).toBe("get_weather");
    // A failed outcome closes the call as a result does.
    const outcome = await web.rpc({
      AppendToolOutcome: { session, call_id: use.event_id, outcome: 1, note: "the weather service is down" },
    });
    expect(outcome.Committed.event.body.ToolResult).toMatchObject({
      call_id: use.event_id,
      content: "the weather service is down",
      outcome: 1,
    });
    expect((await web.rpc({ OpenToolCalls: { session } })).ToolCalls.calls).toEqual([]);
    const events = await readEvents(web, session);

    // Replace the user message only: the Rebased record shifts every later id by one, and the copied
    // ToolResult answers the copied ToolUse's new id.
    const rebased = (
      await web.rpc({
        Rebase: {
          session,
          edits: [{ Replace: { from: 2, to: 3, role: 1, text: "Weather in Bergen?" } }],
          params: null,
        },
      })
    ).Created.session;
    const copy = await readEvents(web, rebased);
    expectContiguous(copy);
    expect(copy.map(recordOf)).toEqual([
      ...events.slice(0, 2).map(recordOf),
      "Rebased",
      ...events.slice(2).map(recordOf),
    ]);
    expect(copy.find((e) => recordOf(e) === "Message" && e.body.Message.role === 1).body.Message.text).toBe(
      "Weather in Bergen?",
    );
    const copiedUse = copy.find((e) => recordOf(e) === "ToolUse");
    const copiedResult = copy.find((e) => recordOf(e) === "ToolResult");
    expect(copiedUse.event_id).toBe(use.event_id + 1);
    expect(copiedResult.body.ToolResult.call_id).toBe(copiedUse.event_id);
    expect((await web.rpc({ OpenToolCalls: { session: rebased } })).ToolCalls.calls).toEqual([]);
    const answer = await ws.generate(rebased, 64);
    expect(replyText(answer.deltas)).toBe(REPLY);
  });

  test("a tool_choice naming an undeclared tool is refused with a message that names it", async () => {
    const session = await web.create();
    await web.rpc({ AppendSystem: { session, text: "Tools.", tools: [WEATHER_TOOL] } });
    await web.rpc({ AppendMessage: { session, role: 1, text: "Weather in Oslo?" } });
    const message = errOf((await generateWith(ws, { session, tool_choice: { name: "no_such_tool" } })).reply);
    expect(message).toContain("no_such_tool");
    expect(message).toContain("get_weather");
    const bare = await web.create();
    await web.rpc({ AppendMessage: { session: bare, role: 1, text: "Weather in Oslo?" } });
    expect(errOf((await generateWith(ws, { session: bare, tool_choice: "required" })).reply)).toContain(
      "declares no tools",
    );
  });

  test("a forced call cut by max_tokens is kept as tool-call text, never an open call", async () => {
    const session = await web.create();
    await web.rpc({ AppendSystem: { session, text: "Tools.", tools: [WEATHER_TOOL] } });
    await web.rpc({ AppendMessage: { session, role: 1, text: "Weather in Oslo?" } });
    const cut = await generateWith(ws, { session, max_tokens: 20, tool_choice: "required" });
    expect(cut.reply.Generated.finish).toBe(2);
    expect(cut.deltas.some((e) => recordOf(e) === "ToolUse")).toBe(false);
    const last = cut.deltas.at(-1);
    expect(last.body.Generated).toMatchObject({ channel: 2, finish: 2 });
    expect(last.body.Generated.span.length).toBeGreaterThan(0);
    expect(last.body.Generated.text).toContain("get_weather");
    expect((await web.rpc({ OpenToolCalls: { session } })).ToolCalls.calls).toEqual([]);
  });

  test("Append puts raw text or token ids on the input", async () => {
    const session = await web.create();
    const byText = await web.rpc({ Append: { session, text: "Raw text.", span: null } });
    const span = byText.Committed.event.body.Appended.span;
    expect(byText.Committed.event.body.Appended.text).toBe("Raw text.");
    expect(span.length).toBeGreaterThan(0);
    // The same ids given as a span decode back to the text.
    const bySpan = await web.rpc({ Append: { session, text: null, span } });
    expect(bySpan.Committed.event.body.Appended).toEqual({ text: "Raw text.", span });
    expect((await web.rpc({ Inspect: { session } })).Inspection.inspection).toMatchObject({
      tokens: 2 * span.length,
      messages: 0,
      events: 3,
    });
  });

  test("/web/stream: committed lines, done, [DONE]; provisional lines when asked", async () => {
    const session = await sessionWithMessage(web, "Stream it.");
    const lines = await web.stream({ session, max_tokens: 64 });
    expect(lines.at(-1)).toBe("[DONE]");
    const done = lines.at(-2).done;
    expect(done).toEqual({ tokens_generated: 9, finish: 1, warm_prefix: expect.any(Number) });
    const committed = lines.slice(0, -2);
    expect(committed.every((l: Frame) => l.committed !== undefined)).toBe(true);
    const events = committed.map((l: Frame) => l.committed);
    expect(replyText(events)).toBe(REPLY);
    // The stream's events are the session's log after the GenerationPrompt.
    const log = await readEvents(web, session);
    expect(events).toEqual(log.filter((e) => recordOf(e) === "Generated"));
    expectContiguous(log);

    await web.rpc({ AppendMessage: { session, role: 1, text: "With provisional text." } });
    const withProvisional = await web.stream({ session, max_tokens: 64, provisional: true });
    const provisional = withProvisional
      .filter((l: Frame) => l.provisional !== undefined)
      .map((l: Frame) => l.provisional);
    expect(provisional.length).toBeGreaterThan(0);
    expect(provisional.every((p: Frame) => p.channel === 0)).toBe(true);
    expect(provisional.map((p: Frame) => p.text).join("")).toBe(REPLY);
    expect(replyText(withProvisional.filter((l: Frame) => l.committed).map((l: Frame) => l.committed))).toBe(REPLY);
    expect(withProvisional.at(-2).done.finish).toBe(1);
    // The second turn reuses the first turn's prefix.
    expect(withProvisional.at(-2).done.warm_prefix).toBeGreaterThan(0);
    expect(withProvisional.at(-1)).toBe("[DONE]");

    // A generation that cannot start reports an error line, then [DONE].
    const unknown = await web.stream({ session: 999_999, max_tokens: 4 });
    expect(unknown.at(-1)).toBe("[DONE]");
    expect(unknown[0].error).toContain("no session 999999");
    // A body that is not a stream request is refused with Err.
    const res = await fetch(`${web.base}/web/stream`, {
      method: "POST",
      headers: web.headers(),
      body: JSON.stringify({ max_tokens: 4 }),
    });
    expect(((await res.json()) as Frame).Err.message).toContain("session");
  });

  test("/web/stream carries a forced tool call as a committed ToolUse line", async () => {
    const session = await web.create();
    await web.rpc({ AppendSystem: { session, text: "Tools.", tools: [WEATHER_TOOL] } });
    await web.rpc({ AppendMessage: { session, role: 1, text: "Weather in Oslo?" } });
    const lines = await web.stream({ session, max_tokens: 128, tool_choice: "required" });
    expect(lines.at(-1)).toBe("[DONE]");
    const uses = lines
      .filter((l: Frame) => l.committed && recordOf(l.committed) === "ToolUse")
      .map((l: Frame) => l.committed);
    expect(uses.length).toBe(1);
    expect(uses[0].body.ToolUse.name).toBe("get_weather");
    expect((await web.rpc({ OpenToolCalls: { session } })).ToolCalls.calls.map((c: Frame) => c[0])).toEqual([
      uses[0].event_id,
    ]);
  });

  test("requests on one WebSocket run in order: a Read sent behind a Generate sees all of it", async () => {
    const session = await sessionWithMessage(web, "In order.");
    ws.send({ Generate: { session, max_tokens: 64 } });
    ws.send({ Read: { session, cursor: 0 } });
    const frames: Frame[] = [];
    while (!frames.at(-1)?.Events) frames.push(await ws.next((f) => !f.SubEvent && !f.SubProvisional && !f.SubEnded));
    const summary = frames.at(-2).Generated;
    expect(summary.finish).toBe(1);
    expect(frames.slice(0, -2).every((f) => f.Delta)).toBe(true);
    const events = frames.at(-1).Events.events;
    expect(events.at(-1)).toEqual(summary.events.at(-1));
    expect(replyText(events)).toBe(REPLY);
  });

  test("/web/rpc refuses the streaming requests with Err", async () => {
    const session = await sessionWithMessage(web);
    expect(errOf(await web.rpc({ Generate: { session, max_tokens: 4 } }))).toContain("/web/ws");
    expect(errOf(await web.rpc({ Subscribe: { session, cursor: 0, provisional: false } }))).toContain("/web/ws");
    expect(errOf(await web.rpc({ Unsubscribe: { sub: 1 } }))).toContain("/web/ws");
    // Nothing was generated.
    expect((await readEvents(web, session)).map(recordOf)).toEqual(["Created", "Message"]);
  });

  test("bad input is answered with Err (400 for a body that is not JSON)", async () => {
    const notJson = await fetch(`${web.base}/web/rpc`, { method: "POST", headers: web.headers(), body: "{not json" });
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as Frame).Err.message).toContain("not JSON");

    expect(errOf(await web.rpc({ Frobnicate: { session: 1 } }))).toContain("unknown request 'Frobnicate'");
    expect(errOf(await web.rpc({ Read: { session: 1 }, List: null }))).toContain("one key");
    expect(errOf(await web.rpc(42))).toContain("request");
    // params must carry all five fields.
    const { seed: _, ...fourParams } = GREEDY;
    expect(errOf(await web.rpc({ Create: { parent: null, params: fourParams } }))).toContain("Create.params.seed");
    expect(errOf(await web.rpc({ Create: { parent: null, params: { ...GREEDY, top_p: 2 } } }))).toContain(
      "Create.params.top_p",
    );
    expect(errOf(await web.rpc({ AppendMessage: { session: 1, role: 1 } }))).toContain("AppendMessage.text");
    expect(errOf(await web.rpc({ AppendMessage: { session: 1, role: 9, text: "x" } }))).toContain("AppendMessage.role");

    const session = await sessionWithMessage(web);
    const events = await readEvents(web, session);
    expect(errOf(await web.rpc({ Fork: { session, at_event: events.length + 1, params: null } }))).toContain(
      `has ${events.length} committed events`,
    );
    expect(errOf(await web.rpc({ Trim: { session, to_event: 99 } }))).toContain("committed events");
    expect(errOf(await web.rpc({ AppendToolResult: { session, call_id: 1, content: "x" } }))).toContain(
      "not an open tool call",
    );
    expect(errOf(await web.rpc({ AppendToolOutcome: { session, call_id: 1, outcome: 1, note: null } }))).toContain(
      "not an open tool call",
    );
    expect(
      errOf(
        await web.rpc({
          Rebase: { session, edits: [{ Drop: { from: 1, to: 2 } }, { Drop: { from: 1, to: 2 } }], params: null },
        }),
      ),
    ).toContain("must not overlap");
    expect(
      errOf(await web.rpc({ Rebase: { session, edits: [{ Drop: { from: 0, to: 1 } }], params: null } })),
    ).toContain("Rebase.edits[0].from");
    expect(errOf(await web.rpc({ Rebase: { session, edits: [], params: null } }))).toContain("at least one edit");
    expect(
      errOf(await web.rpc({ Rebase: { session, edits: [{ Keep: { from: 1, to: 2 } }], params: null } })),
    ).toContain("Drop");
    expect(errOf(await web.rpc({ Read: { session: 999_999, cursor: 0 } }))).toContain("no session 999999");
    expect(errOf(await web.rpc({ Append: { session, text: null, span: [] } }))).toContain("span");
    expect(errOf(await web.rpc({ Append: { session, text: null, span: [1e9] } }))).toContain("not a token id");
    expect(errOf(await web.rpc({ Cancel: { session } }))).toContain("nothing is generating");
    // Nothing above changed the session.
    expect(await readEvents(web, session)).toEqual(events);

    // The same refusals on /web/ws, with the connection still usable after.
    expect(errOf(await ws.call({ Frobnicate: {} }))).toContain("unknown request");
    ws.send("Tree");
    expect((await ws.next((f) => f.Tree || f.Err)).Tree).toBeDefined();
    ws.ws.send("{not json");
    expect(errOf(await ws.next((f) => f.Err))).toContain("one request");
    expect((await ws.call({ Read: { session, cursor: 0 } })).Events.events).toEqual(events);
    // A Generate on a session with no input.
    const empty = await web.create();
    expect(errOf((await ws.generate(empty, 4)).reply)).toContain("no input");
  });

  test("media requests are refused with a clear Err", async () => {
    const session = await web.create();
    expect(
      errOf(
        await web.rpc({ AppendImage: { session, role: 1, blob: "00".repeat(32), pre_text: null, post_text: null } }),
      ),
    ).toContain("images are not supported");
    expect(errOf(await web.rpc({ PutMedia: { bytes: [137, 80, 78, 71], mime: "image/png" } }))).toContain("media");
    expect(errOf(await web.rpc("GcMedia"))).toContain("media");
    expect(errOf(await web.rpc({ AppendBlock: { session, role: 1, kind: "image", payload: [] } }))).toContain(
      "not supported",
    );
    expect((await readEvents(web, session)).map(recordOf)).toEqual(["Created"]);
  });

  test("SetMeta, Sessions, archived filtering and version conflicts", async () => {
    const session = await web.create();
    const entry = async (includeArchived: boolean) =>
      (await web.rpc({ Sessions: { include_archived: includeArchived } })).SessionList.sessions.find(
        (s: Frame) => s.id === session,
      );
    expect(await entry(false)).toMatchObject({
      id: session,
      parent: null,
      fork_at: null,
      title: null,
      archived: false,
      version: 0,
      events: 1,
    });
    expect((await entry(false)).updated_unix_ms).toBeGreaterThan(0);

    expect(await web.rpc({ SetMeta: { session, expected_version: 0, title: "Weather chat", archived: null } })).toEqual(
      { Meta: { version: 1 } },
    );
    expect(await entry(false)).toMatchObject({ title: "Weather chat", version: 1, archived: false });
    // A stale version is refused and changes nothing.
    expect(
      errOf(await web.rpc({ SetMeta: { session, expected_version: 0, title: "Stale", archived: null } })),
    ).toContain("version 1");
    expect((await entry(false)).title).toBe("Weather chat");

    expect(await web.rpc({ SetMeta: { session, expected_version: 1, title: null, archived: true } })).toEqual({
      Meta: { version: 2 },
    });
    expect(await entry(false)).toBeUndefined();
    expect(await entry(true)).toMatchObject({ title: "Weather chat", archived: true, version: 2 });
    expect(
      (await web.rpc({ Sessions: { include_archived: null } })).SessionList.sessions.some(
        (s: Frame) => s.id === session,
      ),
    ).toBe(false);
    // Archived sessions keep their data.
    expect((await readEvents(web, session)).length).toBe(1);
    const inspection = (await web.rpc({ Inspect: { session } })).Inspection.inspection;
    expect(inspection).toMatchObject({ title: "Weather chat", archived: true, version: 2 });

    // Unarchive without a version check.
    expect(await web.rpc({ SetMeta: { session, expected_version: null, title: null, archived: false } })).toEqual({
      Meta: { version: 3 },
    });
    expect(await entry(false)).toMatchObject({ archived: false, version: 3 });
  });

  test("Purge Cascade removes a session and its descendants from Tree and List", async () => {
    const root = await sessionWithMessage(web, "Purge me.");
    const child = (await web.rpc({ Fork: { session: root, at_event: 2, params: null } })).Created.session;
    const grandchild = (await web.rpc({ Fork: { session: child, at_event: 2, params: null } })).Created.session;
    const bystander = await web.create();
    const watcher = await web.socket();
    watcher.send({ Subscribe: { session: grandchild, cursor: 0, provisional: false } });
    const sub = (await watcher.next((f) => f.Subscribed)).Subscribed.sub;

    expect(errOf(await web.rpc({ Purge: { session: root, expected_generation: 99, mode: "Cascade" } }))).toContain(
      "expected_generation",
    );
    expect(errOf(await web.rpc({ Purge: { session: root, expected_generation: null, mode: "Sideways" } }))).toContain(
      "Purge.mode",
    );

    const purged = await web.rpc({ Purge: { session: root, expected_generation: null, mode: "Cascade" } });
    expect([...purged.Purged.sessions].sort((a: number, b: number) => a - b)).toEqual([root, child, grandchild]);
    const ids: number[] = (await web.rpc("List")).Sessions.ids;
    const nodes: Frame[] = (await web.rpc("Tree")).Tree.nodes;
    for (const gone of [root, child, grandchild]) {
      expect(ids).not.toContain(gone);
      expect(nodes.some(([id]: [number]) => id === gone)).toBe(false);
    }
    expect(ids).toContain(bystander);
    // A subscription on a purged session ends.
    expect(await watcher.next((f) => f.SubEnded)).toEqual({ SubEnded: { sub, reason: "purged" } });
    watcher.close();
    expect(errOf(await web.rpc({ Read: { session: child, cursor: 0 } }))).toContain("purged");
    expect(errOf(await web.rpc({ AppendMessage: { session: root, role: 1, text: "x" } }))).toContain("no session");
  });

  test("Inspect, SetQos, Pin", async () => {
    const session = await sessionWithMessage(web, "Inspect me.");
    await ws.generate(session, 64);
    const inspection = (await web.rpc({ Inspect: { session } })).Inspection.inspection;
    const events = await readEvents(web, session);
    expect(inspection).toMatchObject({
      session,
      parent: null,
      fork_at: null,
      events: events.length,
      messages: 2,
      busy: false,
      params: GREEDY,
      qos: "agent",
      open_turn: false,
      open_tool_calls: 0,
      pinned_until_unix_ms: null,
    });
    const spans = events.flatMap(
      (e) => (typeof e.body === "object" && Object.values(e.body as Record<string, Frame>)[0]?.span) || [],
    );
    expect(inspection.tokens).toBe(spans.length);

    const qos = await web.rpc({ SetQos: { session, class: 0, batch_invariant: false } });
    expect(qos.Committed.event.body).toEqual({ QosSet: { class: 0 } });
    expect((await web.rpc({ Inspect: { session } })).Inspection.inspection.qos).toBe("interactive");
    expect(errOf(await web.rpc({ SetQos: { session, class: 4, batch_invariant: false } }))).toContain("SetQos.class");
    expect(errOf(await web.rpc({ SetQos: { session, class: 1, batch_invariant: true } }))).toContain("batch_invariant");

    const pinned = await web.rpc({ Pin: { session, ttl_ms: 600_000 } });
    const deadline = pinned.Pinned.deadline_unix_ms;
    expect(deadline).toBeGreaterThan(Date.now());
    expect((await web.rpc({ Inspect: { session } })).Inspection.inspection.pinned_until_unix_ms).toBe(deadline);
    // A pinned session still generates.
    await web.rpc({ AppendMessage: { session, role: 1, text: "Pinned." } });
    expect(replyText((await ws.generate(session, 64)).deltas)).toBe(REPLY);
    expect(await web.rpc({ Pin: { session, ttl_ms: 0 } })).toEqual({ Pinned: { deadline_unix_ms: 0 } });
    expect((await web.rpc({ Inspect: { session } })).Inspection.inspection.pinned_until_unix_ms).toBeNull();
    expect(errOf(await web.rpc({ Pin: { session: 999_999, ttl_ms: 1000 } }))).toContain("no session");
  });

  test("Metrics returns the Prometheus text; Complete without FIM tokens is refused", async () => {
    const metrics = await web.rpc("Metrics");
    expect(metrics.Text.text).toContain("# TYPE");
    expect(metrics.Text.text).toMatch(/^superfluid_\w+/m);
    const viaSocket = await ws.call("Metrics");
    expect(viaSocket.Text.text).toContain("# TYPE");

    // tiny-chat has no fill-in-the-middle tokens.
    expect(errOf(await web.rpc({ Complete: { prefix: "def f(", suffix: "):\n", mode: 0, max_tokens: 8 } }))).toContain(
      "fill-in-the-middle",
    );
    expect(errOf(await ws.call({ Complete: { prefix: "def f(", suffix: "):\n", mode: 1, max_tokens: 8 } }))).toContain(
      "fill-in-the-middle",
    );
  });
});

describe("cancel and busy sessions on tiny-random (long generations)", () => {
  let web: WebServer;

  beforeAll(async () => {
    web = await WebServer.start({ fixture: "tiny-random" });
  });

  afterAll(async () => {
    await web?.stop();
  });

  test("SessionBusy while a ws Generate runs; Fork still works; Cancel on /web/rpc ends it with finish 4; the next Generate continues the turn", async () => {
    const session = await sessionWithMessage(web, LONG_PROMPTS[0]);
    const runner = await web.socket();
    const other = await web.socket();
    try {
      runner.send({ Generate: { session, max_tokens: LONG } });
      const firstDelta = (await runner.next((f) => f.Delta)).Delta.event;
      expect(recordOf(firstDelta)).toBe("GenerationPrompt");
      await runner.next((f) => f.Delta && recordOf(f.Delta.event) === "Generated");

      // Busy: a second Generate and an append are refused by name.
      expect(errOf(await other.call({ Generate: { session, max_tokens: 4 } }))).toStartWith("SessionBusy");
      expect(errOf(await web.rpc({ AppendMessage: { session, role: 1, text: "interrupt" } }))).toStartWith(
        "SessionBusy",
      );
      expect(errOf(await web.rpc({ Append: { session, text: "interrupt", span: null } }))).toStartWith("SessionBusy");
      expect(errOf(await web.rpc({ Purge: { session, expected_generation: null, mode: "Cascade" } }))).toStartWith(
        "SessionBusy",
      );
      const busy = (await web.rpc({ Inspect: { session } })).Inspection.inspection;
      expect(busy.busy).toBe(true);

      // Fork at a committed point works while it runs, and the fork is free to take input.
      const fork = await web.rpc({ Fork: { session, at_event: 2, params: null } });
      const forked = fork.Created.session;
      expect((await readEvents(web, forked)).map(recordOf)).toEqual(["Created", "Message", "Forked"]);
      // Read works on the busy session.
      expectContiguous(await readEvents(web, session));

      const cancel = await web.rpc({ Cancel: { session } });
      if (cancel !== "Cancelling")
        throw new Error(
          `tiny-random ended its turn before the Cancel reached it (${JSON.stringify(cancel)}): choose a longer LONG_PROMPTS entry`,
        );
      const summary = await runner.untilSummary();
      expect(summary.Generated.finish).toBe(4);
      const cut = summary.Generated.tokens_generated;
      expect(cut).toBeGreaterThan(0);
      expect(cut).toBeLessThan(LONG);
      const afterCancel = await readEvents(web, session);
      expectContiguous(afterCancel);
      expect(afterCancel.at(-1).body.Generated.finish).toBe(4);
      const inspection = (await web.rpc({ Inspect: { session } })).Inspection.inspection;
      expect(inspection.busy).toBe(false);
      expect(inspection.open_turn).toBe(true);
      expect(errOf(await web.rpc({ Cancel: { session } }))).toContain("nothing is generating");
      // The fork made during the generation takes input of its own.
      expect(
        (await web.rpc({ AppendMessage: { session: forked, role: 1, text: "A short one." } })).Committed,
      ).toBeDefined();

      // The next Generate continues the open turn: no new GenerationPrompt.
      const more = await runner.generate(session, 5);
      expect(more.reply.Generated.finish).toBe(2);
      expect(more.reply.Generated.tokens_generated).toBe(5);
      expect(more.deltas.some((e) => recordOf(e) === "GenerationPrompt")).toBe(false);
      expect(recordOf(more.deltas[0])).toBe("Generated");
      expect(more.deltas[0].event_id).toBe(afterCancel.length);
      // The whole prompt, the cut turn included, was already in the cache.
      expect(more.reply.Generated.warm_prefix).toBeGreaterThan(0);

      // Cut and continued draws what one uncut generation draws (a fork before the turn, same params).
      const tokensOf = (events: Frame[]) =>
        events.filter((e) => recordOf(e) === "Generated").flatMap((e) => e.body.Generated.span);
      const turn = [...tokensOf(afterCancel), ...tokensOf(more.deltas)];
      const uncutFork = (await web.rpc({ Fork: { session, at_event: 2, params: null } })).Created.session;
      const uncut = await runner.generate(uncutFork, turn.length);
      expect(uncut.reply.Generated.finish).toBe(2);
      expect(tokensOf(uncut.deltas)).toEqual(turn);
    } finally {
      runner.close();
      other.close();
    }
  });

  test("Subscribe in the middle of a generation: the backlog and the live events meet with no gap and no repeat", async () => {
    const session = await sessionWithMessage(web, LONG_PROMPTS[1]);
    const runner = await web.socket();
    const watcher = await web.socket();
    try {
      const maxTokens = 1000;
      runner.send({ Generate: { session, max_tokens: maxTokens } });
      await runner.next((f) => f.Delta && recordOf(f.Delta.event) === "Generated");
      const cursor = 1;
      watcher.send({ Subscribe: { session, cursor, provisional: true } });
      const sub = (await watcher.next((f) => f.Subscribed)).Subscribed.sub;

      const summary = await runner.untilSummary();
      expect(summary.Generated.finish).toBe(2);
      expect(summary.Generated.tokens_generated).toBe(maxTokens);
      const last = summary.Generated.events.at(-1).event_id;

      const seen: Frame[] = [];
      while (seen.at(-1)?.event_id !== last) {
        const f = (await watcher.next((x) => x.SubEvent)).SubEvent;
        expect(f.sub).toBe(sub);
        seen.push(f.event);
      }
      expectContiguous(seen, cursor);
      expect(seen).toEqual(await readEvents(web, session, cursor));
      // Nothing else was queued before a later reply on the same connection (no repeats).
      await watcher.call({ Read: { session, cursor: last } });
      expect(watcher.takeQueued((f) => f.SubEvent)).toEqual([]);
      // Provisional text of the live part arrived too.
      expect(watcher.takeQueued((f) => f.SubProvisional).length).toBeGreaterThan(0);
    } finally {
      runner.close();
      watcher.close();
    }
  });

  test("closing /web/stream cancels the generation: the session's last Generated has finish 4", async () => {
    const session = await sessionWithMessage(web, LONG_PROMPTS[1]);
    const sse = await SseReader.open(web, { session, max_tokens: LONG, provisional: true });
    let line: Frame;
    do line = await sse.next();
    while (line !== undefined && line.committed === undefined);
    expect(line?.committed).toBeDefined();
    sse.abort();

    const ended = await until("the cancelled generation's end record", async () => {
      const inspection = (await web.rpc({ Inspect: { session } })).Inspection.inspection;
      if (inspection.busy) return undefined;
      const events = await readEvents(web, session);
      const last = events.at(-1);
      return recordOf(last) === "Generated" && last.body.Generated.finish !== 0 ? events : undefined;
    });
    expect(ended.at(-1).body.Generated.finish).toBe(4);
    expectContiguous(ended);
    const generated = ended.filter((e) => recordOf(e) === "Generated").flatMap((e) => e.body.Generated.span);
    expect(generated.length).toBeLessThan(LONG);
    expect((await web.rpc({ Inspect: { session } })).Inspection.inspection.open_turn).toBe(true);
  });

  test("a ws connection that closes mid-Generate cancels it", async () => {
    const session = await sessionWithMessage(web, LONG_PROMPTS[2]);
    const runner = await web.socket();
    runner.send({ Generate: { session, max_tokens: LONG } });
    await runner.next((f) => f.Delta && recordOf(f.Delta.event) === "Generated");
    runner.close();
    const ended = await until("the end record after the socket closed", async () => {
      if ((await web.rpc({ Inspect: { session } })).Inspection.inspection.busy) return undefined;
      const events = await readEvents(web, session);
      const last = events.at(-1);
      return recordOf(last) === "Generated" && last.body.Generated.finish !== 0 ? last : undefined;
    });
    expect(ended.body.Generated.finish).toBe(4);
  });

  test("a ws connection that closes drops the requests queued behind its Generate", async () => {
    const first = await sessionWithMessage(web, LONG_PROMPTS[0]);
    const queued = await sessionWithMessage(web, LONG_PROMPTS[1]);
    const runner = await web.socket();
    runner.send({ Generate: { session: first, max_tokens: LONG } });
    runner.send({ Generate: { session: queued, max_tokens: LONG } });
    await runner.next((f) => f.Delta && recordOf(f.Delta.event) === "Generated");
    runner.close();
    await until("the first generation's end after the socket closed", async () => {
      const last = (await readEvents(web, first)).at(-1);
      return recordOf(last) === "Generated" && last.body.Generated.finish !== 0 ? last : undefined;
    });
    // The queued Generate would have started right after the first ended; it never does, so the
    // session takes a new one at once, opening the first turn right after the user message.
    const client = await web.socket();
    try {
      const { deltas, reply } = await client.generate(queued, 2);
      expect(reply.Generated).toBeDefined();
      expect(deltas[0].event_id).toBe(2);
      expect(recordOf(deltas[0])).toBe("GenerationPrompt");
      expect((await readEvents(web, queued)).filter((e) => recordOf(e) === "GenerationPrompt").length).toBe(1);
    } finally {
      client.close();
    }
  });
});

describe("Complete (fill-in-the-middle) on tiny-fim, metered per connection and per listener", () => {
  let web: WebServer;

  beforeAll(async () => {
    // Two completions per bucket, one back every 1000 s: a test never sees a refill.
    web = await WebServer.start({
      fixture: "tiny-fim",
      args: ["--completion-burst", "2", "--completion-rate", "0.001"],
    });
  });

  afterAll(async () => {
    await web?.stop();
  });

  const complete = {
    Complete: { prefix: "def add(a, b):\n    return ", suffix: "\n\nprint(add(1, 2))\n", mode: 0, max_tokens: 4 },
  };

  test("/web/rpc shares one bucket: 429 with Retry-After and a Throttled body once it is empty", async () => {
    for (let i = 0; i < 2; i++) {
      const reply = await web.rpc(complete);
      expect(reply.Completion.tokens).toBeGreaterThan(0);
      expect(typeof reply.Completion.text).toBe("string");
      expect(reply.Completion.expired).toBe(false);
    }
    const res = await fetch(`${web.base}/web/rpc`, {
      method: "POST",
      headers: web.headers(),
      body: JSON.stringify(complete),
    });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    const body: any = await res.json();
    expect(body.Throttled.retry_after_ms).toBeGreaterThan(0);
  });

  test("each WebSocket has its own bucket, and answers Throttled in a frame", async () => {
    const socket = await web.socket();
    try {
      for (let i = 0; i < 2; i++) expect((await socket.call(complete)).Completion).toBeDefined();
      const throttled = await socket.call(complete);
      expect(throttled.Throttled.retry_after_ms).toBeGreaterThan(0);
    } finally {
      socket.close();
    }
    const other = await web.socket();
    try {
      expect((await other.call(complete)).Completion).toBeDefined();
    } finally {
      other.close();
    }
  });
});
