// A session's events read as a conversation (src/session-api/conversation.ts):
// the messages the template renders, the token stream, an open turn, and
// which tool calls still wait for a result.
import { expect, test } from "bun:test";
import { chatToolOf, conversationOf } from "../../src/session-api/conversation.ts";
import { CHANNEL, FINISH, type EventBody, type SessionEvent } from "../../src/session-log/events.ts";

const events = (...bodies: EventBody[]): SessionEvent[] =>
  bodies.map((body, event_id) => ({ session: 1, event_id, epoch: 1, ts_unix_ms: 0, body }));
const created: EventBody = { Created: { parent: null, params: {} } };
const gen = (span: number[], text: string, channel: number, finish: number = FINISH.open): EventBody => ({
  Generated: { span, text, channel, finish },
});

test("messages, the stream of every span, and an assistant turn ended by the model", () => {
  const c = conversationOf(
    events(
      created,
      { Message: { role: 0, text: "sys", span: [1, 2] } },
      { Message: { role: 1, text: "hi", span: [3] } },
      { GenerationPrompt: { span: [4] } },
      gen([5], "think", CHANNEL.reasoning),
      gen([6, 7], "Hello", CHANNEL.text),
      gen([], "", CHANNEL.text, FINISH.endOfTurn),
    ),
  );
  expect(c.stream).toEqual([1, 2, 3, 4, 5, 6, 7]);
  expect(c.messages).toEqual([
    { role: "system", content: "sys" },
    { role: "user", content: "hi" },
    { role: "assistant", content: "Hello", reasoning_content: "think" },
  ]);
  expect(c.openTurn).toBeNull();
  expect(c.generatedTail).toBe(true);
});

test("a turn cut by max_tokens or a cancel is open, inside reasoning when it stopped there", () => {
  const cut = conversationOf(
    events(
      created,
      { Message: { role: 1, text: "hi", span: [3] } },
      { GenerationPrompt: { span: [4] } },
      gen([5], "th", CHANNEL.reasoning),
      gen([], "", CHANNEL.reasoning, FINISH.maxTokens),
    ),
  );
  expect(cut.openTurn).toEqual({ inReasoning: true });
  const cancelled = conversationOf(
    events(created, { GenerationPrompt: { span: [4] } }, gen([5], "He", CHANNEL.text, FINISH.cancelled)),
  );
  expect(cancelled.openTurn).toEqual({ inReasoning: false });
  // A message after it closes it: the next generation opens a new turn.
  const answered = conversationOf(
    events(created, { GenerationPrompt: { span: [4] } }, gen([5], "He", CHANNEL.text, FINISH.cancelled), {
      Message: { role: 1, text: "go on", span: [9] },
    }),
  );
  expect(answered.openTurn).toBeNull();
  expect(answered.generatedTail).toBe(false);
});

test("tool calls: ToolUse ids are call ids; a result or an outcome answers one", () => {
  const c = conversationOf(
    events(
      created,
      { Message: { role: 0, text: "", span: [1], tools: ['{"name":"f"}'] } },
      { Message: { role: 1, text: "go", span: [2] } },
      { GenerationPrompt: { span: [3] } },
      gen([4, 5], "<tool_call>...", CHANNEL.toolCall),
      { ToolUse: { name: "f", arguments: '{"a":1}' } },
      { ToolUse: { name: "g", arguments: "{}" } },
      gen([], "", CHANNEL.toolCall, FINISH.endOfTurn),
      { ToolResult: { call_id: 5, content: "ok", span: [6] } },
    ),
  );
  expect(c.tools).toEqual(['{"name":"f"}']);
  expect(c.openCalls).toEqual([[6, "g", "{}"]]);
  const assistant = c.messages[2]!;
  expect(assistant.tool_calls?.map((t) => t.id)).toEqual(["call_5", "call_6"]);
  expect(c.messages[3]).toEqual({ role: "tool", tool_call_id: "call_5", content: "ok" });
  expect(c.stream).toEqual([1, 2, 3, 4, 5, 6]);
});

test("declared tools: OpenAI function tools, bare functions, Anthropic tools", () => {
  const schema = { type: "object", properties: { city: { type: "string" } } };
  for (const raw of [
    { type: "function", function: { name: "w", parameters: schema } },
    { name: "w", parameters: schema },
    { name: "w", input_schema: schema },
  ]) {
    const tool = chatToolOf(JSON.stringify(raw), "tools[0]");
    expect(tool.name).toBe("w");
    expect(tool.parameters).toEqual(schema);
    expect(tool.template).toEqual({ type: "function", function: { name: "w", parameters: schema } });
  }
  expect(() => chatToolOf("{", "tools[0]")).toThrow(/not JSON/);
  expect(() => chatToolOf('{"description":"x"}', "tools[0]")).toThrow(/needs a name/);
});
