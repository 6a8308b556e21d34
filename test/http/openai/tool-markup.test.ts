// Call markup never reaches content: a forced call cut by max_tokens comes
// back as finish_reason "length" with at most a partial call (streamed and
// not), a stream sends one tool-call entry per index per chunk, and when no
// call may be made (tool_choice "none", or no tools) the wire's call opener
// is never sampled, even when logit_bias pushes the model towards it.
import { describe, expect, test } from "bun:test";
import { tinyChat } from "../../../src/fixtures/index.ts";
import { parseSse, post, postJson, useServer, user } from "../support.ts";

const s = useServer();

const WEATHER = {
  type: "object",
  properties: { city: { type: "string" }, unit: { enum: ["c", "f"] } },
  required: ["city"],
  additionalProperties: false,
};
const tools = [{ type: "function", function: { name: "get_weather", parameters: WEATHER } }];
/** The fixture's call opener, a single special token. */
const OPENER = tinyChat().vocab.special["<tool_call>"]!;
const MARKUP = /<tool_call>|<\/tool_call>|"name"|"arguments"/;

const forced = (maxTokens: number, seed: number, extra: Record<string, unknown> = {}) => ({
  model: s.model,
  messages: user("weather in Oslo?"),
  tools,
  tool_choice: "required",
  temperature: 0.9,
  seed,
  max_tokens: maxTokens,
  ...extra,
});

describe("call markup never reaches content", () => {
  for (const cap of [10, 25, 40]) {
    test(`a forced call cut at ${cap} tokens: no markup in content, whole or streamed`, async () => {
      for (const seed of [1, 2, 3]) {
        const { status, json } = await postJson(s, "/v1/chat/completions", forced(cap, seed));
        expect(status).toBe(200);
        const choice = json.choices[0];
        expect(choice.message.content ?? "").not.toMatch(MARKUP);
        if (choice.finish_reason === "length") {
          // A cut call may be shown (the client must not run it), never as text.
          for (const call of choice.message.tool_calls ?? []) expect(call.function.name).toBe("get_weather");
        } else {
          expect(choice.finish_reason).toBe("tool_calls");
        }

        const raw = await (await post(s, "/v1/chat/completions", forced(cap, seed, { stream: true }))).text();
        const { events, data } = parseSse(raw);
        expect(data.at(-1)).toBe("[DONE]");
        for (const e of events) expect(e.choices?.[0]?.delta?.content ?? "").not.toMatch(MARKUP);
        expect(events.at(-1).choices[0].finish_reason).toBe(choice.finish_reason);
      }
    });
  }

  test("parallel calls cut at the cap: the cut call's opener is not content", async () => {
    for (const seed of [4, 5, 6, 7]) {
      const { json } = await postJson(s, "/v1/chat/completions", forced(90, seed, { parallel_tool_calls: true }));
      expect(json.choices[0].message.content ?? "").not.toMatch(MARKUP);
    }
  });

  test("a stream sends one tool-call entry per index per chunk, the first with id, name and arguments", async () => {
    for (const seed of [1, 2]) {
      const raw = await (
        await post(s, "/v1/chat/completions", forced(150, seed, { stream: true, parallel_tool_calls: true }))
      ).text();
      const { events } = parseSse(raw);
      const seen = new Set<number>();
      for (const e of events) {
        const entries = e.choices?.[0]?.delta?.tool_calls ?? [];
        const indexes = entries.map((d: any) => d.index);
        expect(new Set(indexes).size).toBe(indexes.length);
        for (const d of entries) {
          if (!seen.has(d.index)) {
            seen.add(d.index);
            expect(d.id).toMatch(/^call_/);
            expect(d.function.name).toBe("get_weather");
            expect(typeof d.function.arguments).toBe("string");
          } else {
            expect(d.id).toBeUndefined();
          }
        }
      }
      expect(seen.size).toBeGreaterThan(0);
    }
  });
});

describe("no call may be made: the opener is never sampled", () => {
  const pushed = (extra: Record<string, unknown>) => ({
    model: s.model,
    messages: user("weather in Oslo?"),
    temperature: 0.9,
    seed: 3,
    max_tokens: 12,
    logit_bias: { [OPENER]: 100 },
    ...extra,
  });

  test("the bias does push the model to the opener when calls are allowed", async () => {
    // Control: under auto the opener is taken at once (and starts a call), so
    // the refusals below are the ban's doing, not the model's.
    const { json } = await postJson(s, "/v1/chat/completions", pushed({ tools, tool_choice: "auto", max_tokens: 60 }));
    expect(json.choices[0].message.tool_calls?.length ?? 0).toBeGreaterThan(0);
  });

  for (const [label, extra] of [
    ["tool_choice none", { tools, tool_choice: "none" }],
    ["no tools", {}],
  ] as const) {
    test(`${label}: no opener, no markup, no call`, async () => {
      const { status, json } = await postJson(s, "/v1/chat/completions", pushed({ ...extra, logprobs: true }));
      expect(status).toBe(200);
      const choice = json.choices[0];
      expect(choice.message.tool_calls).toBeUndefined();
      expect(choice.message.content).not.toMatch(MARKUP);
      expect(choice.logprobs.content.length).toBeGreaterThan(0);
      for (const lp of choice.logprobs.content) expect(lp.token).not.toBe("<tool_call>");
    });
  }
});
