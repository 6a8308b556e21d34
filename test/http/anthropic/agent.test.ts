// A 20-turn agent conversation over the Messages API, as coding agents hold
// one: the system prompt and tools are sent again every turn, the breakpoint
// moves to the newest user block, tool calls and their results join the
// history. From turn 2 on the prefix cache serves all of the previous turns
// (cache_read_input_tokens), and what the request pins beyond that is
// counted as creation; the three counts add up to the prompt every turn.
import Anthropic from "@anthropic-ai/sdk";
import { expect, test } from "bun:test";
import { useServer } from "../support.ts";

const s = useServer({ fixture: "tiny-chat", maxBatch: 2, maxContext: 8192 });

const tools: Anthropic.Tool[] = [
  {
    name: "read_file",
    description: "Read a file of the project",
    input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
  {
    name: "run",
    description: "Run a shell command",
    input_schema: {
      type: "object",
      properties: { command: { type: "string" }, timeout: { type: "integer", minimum: 1 } },
      required: ["command"],
    },
  },
];
const system: Anthropic.TextBlockParam[] = [
  { type: "text", text: "x-anthropic-billing-header: cc_version=1.0.0; cc_entrypoint=test;" },
  {
    type: "text",
    text: "You are a coding agent working in a repository. Read before you edit. ".repeat(30),
    cache_control: { type: "ephemeral" },
  },
];

test("20 turns: from turn 2 on, the previous turns are read from the cache", async () => {
  const client = new Anthropic({ baseURL: s.url, apiKey: "x", maxRetries: 0, timeout: 120_000 });
  const messages: Anthropic.MessageParam[] = [];
  let previousPrompt = 0;
  for (let turn = 1; turn <= 20; turn++) {
    // The breakpoint moves to the newest user block, as agents move it.
    for (const m of messages)
      if (Array.isArray(m.content)) for (const b of m.content) delete (b as { cache_control?: unknown }).cache_control;
    messages.push({
      role: "user",
      content: [
        {
          type: "text",
          text: `Step ${turn}: look at module ${turn} and report.`,
          cache_control: { type: "ephemeral" },
        },
      ],
    });
    const tool_choice: Anthropic.ToolChoice = turn % 3 === 0 ? { type: "any" } : { type: "auto" };
    const params = { model: s.model, max_tokens: 128, system, tools, tool_choice, messages };
    const reply =
      turn % 2 === 0 ? await client.messages.stream(params).finalMessage() : await client.messages.create(params);
    const u = reply.usage;
    const prompt = u.input_tokens + u.cache_read_input_tokens! + u.cache_creation_input_tokens!;
    expect(prompt).toBe(
      (await client.messages.countTokens({ model: s.model, system, tools, tool_choice, messages })).input_tokens,
    );
    if (turn >= 2) {
      // All but the previous prompt's generation-prompt tail (re-rendered as a finished turn).
      expect(u.cache_read_input_tokens!).toBeGreaterThanOrEqual(previousPrompt - 8);
      expect(u.cache_read_input_tokens!).toBeLessThan(prompt);
    }
    // The breakpoint on the newest block pins up to it: only the generation prompt is plain input.
    expect(u.input_tokens).toBeLessThanOrEqual(16);
    previousPrompt = prompt;
    messages.push({ role: "assistant", content: reply.content });
    if (reply.stop_reason === "tool_use") {
      const calls = reply.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
      messages.push({
        role: "user",
        content: calls.map((c) => ({
          type: "tool_result" as const,
          tool_use_id: c.id,
          content: `output of ${c.name} at step ${turn}`,
        })),
      });
      messages.push({ role: "assistant", content: "Noted." });
    } else expect(reply.stop_reason).toBe("end_turn");
  }
});
