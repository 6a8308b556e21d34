// The wires where a marker opens a JSON list of calls (./json-list.ts):
// Granite 3.x, FireFunction v2, Apertus, Command R7B / Cohere2 MoE and
// Command R+. Per family: detection on the real templates, canonical replies
// parsed whole and in every chunking, text before the calls, two calls, a
// cut call, a malformed call, the round trip through the real template, and
// the forced grammar.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import { ChatTemplate } from "../../../src/codec/index.ts";
import { apertus } from "../../../src/codec/tool-dialects/apertus.ts";
import { commandR, commandRPlus } from "../../../src/codec/tool-dialects/command-r.ts";
import { fireFunction } from "../../../src/codec/tool-dialects/firefunction.ts";
import { granite } from "../../../src/codec/tool-dialects/granite.ts";
import { hermes } from "../../../src/codec/tool-dialects/hermes.ts";
import type { ToolDialect } from "../../../src/codec/tool-dialects/types.ts";
import { recognizes } from "../../grammar/recognizer.ts";
import { callsOf, cutPoints, detectedBy, haveTemplates, parseAllWays, run, templateSource } from "./parse-harness.ts";

interface Call {
  name: string;
  args: string; // the arguments object's JSON text
}

interface Family {
  dialect: ToolDialect;
  /** The real templates that use the wire. */
  templates: string[];
  /** A reply holding `calls`, as the family's model writes it. */
  reply: (calls: Call[]) => string;
  /** Special-token markers a cut (at a token boundary) never falls inside; plain-text markers too. */
  markers: string[];
  /** The opener is ordinary text: after it, what is not a list of objects is content. */
  plainOpener?: boolean;
  /** The template's rendering of an assistant's calls (group 1); absent when it renders none. */
  rendered?: { call: RegExp; kwargs?: Record<string, unknown> };
}

const GRANITE_CALL = "<|tool_call|>";
const FAMILIES: Family[] = [
  {
    dialect: granite,
    templates: ["ibm-granite-granite-3.3-2B-Instruct"],
    reply: (calls) =>
      `${GRANITE_CALL}[${calls.map((c) => `{"name": "${c.name}", "arguments": ${c.args}}`).join(", ")}]`,
    markers: [GRANITE_CALL],
    // The template renders an assistant's content only, never its calls.
  },
  {
    dialect: fireFunction,
    templates: ["fireworks-ai-llama-3-firefunction-v2"],
    reply: (calls) => ` functools[${calls.map((c) => `{"name": "${c.name}", "arguments": ${c.args}}`).join(", ")}]`,
    markers: [" functools["],
    plainOpener: true,
    rendered: {
      call: /<\|start_header_id\|>assistant<\|end_header_id\|>\n\n( functools\[[\s\S]*?\])<\|eot_id\|>/,
      // The template reads the tools from `functions` (JSON text) and the date from `datetime`.
      kwargs: { functions: "[]", datetime: "Jul 26 2026" },
    },
  },
  {
    dialect: apertus,
    templates: ["Apertus-8B-Instruct"],
    reply: (calls) => `<|tools_prefix|>[${calls.map((c) => `{"${c.name}": ${c.args}}`).join(", ")}]<|tools_suffix|>`,
    markers: ["<|tools_prefix|>", "<|tools_suffix|>"],
    rendered: { call: /<\|assistant_start\|>(<\|tools_prefix\|>[\s\S]*?<\|tools_suffix\|>)/ },
  },
  {
    dialect: commandR,
    templates: ["CohereForAI-c4ai-command-r7b-12-2024-tool_use", "Cohere2MoE"],
    reply: (calls) =>
      `<|START_ACTION|>[\n${calls
        .map((c, i) => `    {"tool_call_id": "${i}", "tool_name": "${c.name}", "parameters": ${c.args}}`)
        .join(",\n")}\n]<|END_ACTION|>`,
    markers: ["<|START_ACTION|>", "<|END_ACTION|>"],
    rendered: {
      call: /<\|CHATBOT_TOKEN\|>(?:<\|START_THINKING\|><\|END_THINKING\|>)?(<\|START_ACTION\|>[\s\S]*?<\|END_ACTION\|>)/,
    },
  },
  {
    dialect: commandRPlus,
    templates: ["CohereForAI-c4ai-command-r-plus-tool_use"],
    reply: (calls) =>
      `Action:\n\`\`\`json\n[\n${calls
        .map((c) => `    {\n        "tool_name": "${c.name}",\n        "parameters": ${c.args}\n    }`)
        .join(",\n")}\n]\`\`\``,
    markers: ["Action:", "```json\n", "```"],
    plainOpener: true,
    rendered: { call: /<\|CHATBOT_TOKEN\|>\n(Action:\n```json\n[\s\S]*?\]```)/ },
  },
];

const WEATHER: Call = { name: "get_weather", args: '{"city": "Oslo", "days": 3}' };
const SEARCH: Call = { name: "search", args: '{"query": "a \\"quoted\\" [list], {braces}"}' };

const TOOLS = [
  {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, days: { type: "integer" } },
      required: ["city"],
      additionalProperties: false,
    },
  },
  { name: "search", parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] } },
];

// ---------------------------------------------------------------------------

describe.skipIf(!haveTemplates)("JSON-list wires: detection on the real templates", () => {
  for (const { dialect, templates } of FAMILIES) {
    test(`${dialect.name}: its templates and no other`, () => {
      expect(detectedBy(dialect)).toEqual([...templates].sort());
    });
  }
});

for (const family of FAMILIES) {
  const { dialect } = family;
  describe(`${dialect.name} parser`, () => {
    test("one call, whole and in every chunking", () => {
      const m = parseAllWays(dialect, family.reply([WEATHER]));
      expect(m).toEqual({
        text: "",
        reasoning: "",
        calls: [{ id: "id0", name: "get_weather", args: WEATHER.args, end: WEATHER.args }],
      });
    });

    test("text before the call is content", () => {
      const m = parseAllWays(dialect, `Let me check.\n${family.reply([WEATHER])}`);
      expect(m.text).toBe("Let me check.\n");
      expect(callsOf(m)).toEqual([["get_weather", WEATHER.args]]);
    });

    test("two calls: increasing indexes, distinct ids, brackets and quotes inside strings", () => {
      const m = parseAllWays(dialect, family.reply([WEATHER, SEARCH]));
      expect(m.text).toBe("");
      expect(callsOf(m)).toEqual([
        ["get_weather", WEATHER.args],
        ["search", SEARCH.args],
      ]);
      expect(m.calls.map((c) => c.id)).toEqual(["id0", "id1"]);
    });

    test("whitespace after the calls is not content, text after them is; a second list goes on counting", () => {
      const one = family.reply([WEATHER]);
      expect(parseAllWays(dialect, `${one}\n`).text).toBe("");
      const m = parseAllWays(dialect, `${one}\n\nDone?\n${family.reply([SEARCH])}\n`);
      expect(m.text).toBe("\n\nDone?\n");
      expect(callsOf(m)).toEqual([
        ["get_weather", WEATHER.args],
        ["search", SEARCH.args],
      ]);
    });

    test("the call starts once its name is known and its arguments stream", () => {
      const reply = family.reply([WEATHER]);
      const cut = reply.indexOf('"Oslo"') + 3;
      const p = dialect.parser();
      const first = p.push(reply.slice(0, cut));
      expect(first.map((e) => e.type)).toEqual(["call-start", "call-args"]);
      expect(first[1]).toMatchObject({ text: '{"city": "Os' });
      const rest = [...p.push(reply.slice(cut)), ...p.flush()];
      expect(rest.map((e) => e.type)).toEqual(["call-args", "call-end"]);
    });

    test("a call cut anywhere leaves no markup in content; once its arguments began it is a partial call", () => {
      const reply = family.reply([WEATHER]);
      const argsAt = reply.indexOf(WEATHER.args);
      for (const k of cutPoints(reply, family.markers)) {
        const m = run(dialect, [reply.slice(0, k)]);
        expect({ k, text: m.text }).toEqual({ k, text: "" });
        if (k > argsAt) {
          expect(m.calls).toHaveLength(1);
          expect(m.calls[0]!.name).toBe("get_weather");
          expect(WEATHER.args.startsWith(m.calls[0]!.end!)).toBe(true);
        } else expect(m.calls).toEqual([]);
        // Token by token gives the same.
        expect(run(dialect, [...reply.slice(0, k)])).toEqual(m);
      }
    });

    test("a malformed call is dropped, the list's other calls and the text before stay", () => {
      const reply = family.reply([{ name: "bad", args: "[1, 2]" }, WEATHER]);
      const m = parseAllWays(dialect, `Hi. ${reply}`);
      expect(m.text).toBe("Hi. ");
      expect(callsOf(m)).toEqual([["get_weather", WEATHER.args]]);
    });

    test("a list that is not a list of objects is markup skipped to its end, or text after a plain opener", () => {
      const good = family.reply([WEATHER]);
      const garbage = good.replace(/\{[\s\S]*\}/, "1, {x}, y");
      const m = parseAllWays(dialect, `Hi. ${garbage}`);
      expect(m).toEqual({ text: family.plainOpener ? `Hi. ${garbage}` : "Hi. ", reasoning: "", calls: [] });
    });

    test("plain text passes through", () => {
      expect(parseAllWays(dialect, "Hello, world!\nWhat's up? [1, 2] {}")).toEqual({
        text: "Hello, world!\nWhat's up? [1, 2] {}",
        reasoning: "",
        calls: [],
      });
    });
  });

  describe(`${dialect.name} forced grammar`, () => {
    for (const parallel of [false, true]) {
      test(`parses, holds calls to the schema, and reads back (parallel=${parallel})`, () => {
        const g = parseGbnf(dialect.forcedGrammar(TOOLS, parallel));
        expect(gbnfErrors(g)).toEqual([]);
        const one = family.reply([{ name: "get_weather", args: '{"city": "Oslo", "days": 3}' }]);
        expect(recognizes(g, one)).toBe(true);
        expect(recognizes(g, family.reply([{ name: "get_weather", args: '{"city": 5}' }]))).toBe(false);
        expect(recognizes(g, family.reply([{ name: "other", args: '{"city": "Oslo"}' }]))).toBe(false);
        const two = family.reply([
          { name: "get_weather", args: '{"city": "Oslo"}' },
          { name: "search", args: '{"query": "x"}' },
        ]);
        expect(recognizes(g, two)).toBe(parallel);
        expect(callsOf(run(dialect, [two]))).toEqual([
          ["get_weather", '{"city": "Oslo"}'],
          ["search", '{"query": "x"}'],
        ]);
        // The lazy grammar under tool_choice "auto" waits for the trigger: the grammar starts with it.
        if (dialect.trigger) expect(one.startsWith(dialect.trigger)).toBe(true);
      });
    }
  });
}

// ---------------------------------------------------------------------------
// Round trip: an assistant turn's calls rendered by the real template read back as the same calls.

const CONVERSATION_TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather",
      parameters: {
        type: "object",
        properties: { city: { type: "string", description: "City" }, days: { type: "integer", description: "Days" } },
        required: ["city"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "search",
      description: "Search the web",
      parameters: {
        type: "object",
        properties: { query: { type: "string", description: "Query" } },
        required: ["query"],
      },
    },
  },
];
const CALLED = [
  { name: "get_weather", arguments: { city: "Oslo", days: 3 } },
  { name: "search", arguments: { query: 'Oslo "events"', nested: { list: [1, "]"] } } },
];
const CONVERSATION = [
  { role: "user", content: "Weather in Oslo and events there?" },
  {
    role: "assistant",
    content: null,
    tool_calls: CALLED.map((c, i) => ({
      id: `call_000${i}`,
      type: "function",
      function: { name: c.name, arguments: JSON.stringify(c.arguments) },
    })),
  },
  { role: "tool", tool_call_id: "call_0000", content: "4 C" },
  { role: "tool", tool_call_id: "call_0001", content: "Jazz festival" },
];

describe.skipIf(!haveTemplates)("JSON-list wires: round trip through the real templates", () => {
  for (const family of FAMILIES) {
    const rendered = family.rendered;
    if (!rendered) continue;
    for (const template of family.templates) {
      test(`${family.dialect.name}: ${template}.jinja`, () => {
        const text = new ChatTemplate(templateSource(template), { bosToken: "<s>", eosToken: "</s>" }).render({
          messages: CONVERSATION as never,
          tools: CONVERSATION_TOOLS as never,
          addGenerationPrompt: true,
          ...(rendered.kwargs ? { kwargs: rendered.kwargs } : {}),
        }).text;
        const turn = rendered.call.exec(text)?.[1];
        expect(turn).toBeDefined();
        const m = parseAllWays(family.dialect, turn!);
        expect(m.text).toBe("");
        expect(m.calls.map((c) => ({ name: c.name, arguments: JSON.parse(c.end!) }))).toEqual(CALLED);
      });
    }
  }

  test("the forced grammars accept the templates' own rendering of calls", () => {
    const tools = CONVERSATION_TOOLS.map((t) => ({ name: t.function.name, parameters: t.function.parameters }));
    // One call whose arguments follow the schema (the round trip's second has a key the schema lacks: fine there).
    const conversation = [
      CONVERSATION[0]!,
      { ...CONVERSATION[1]!, tool_calls: CONVERSATION[1]!.tool_calls!.slice(0, 1) },
    ];
    for (const family of FAMILIES) {
      // Command R+ pretty-prints the arguments, the forced call writes them compact (checked above).
      if (!family.rendered || family.dialect === commandRPlus) continue;
      for (const template of family.templates) {
        const text = new ChatTemplate(templateSource(template), { bosToken: "<s>", eosToken: "</s>" }).render({
          messages: conversation as never,
          tools: CONVERSATION_TOOLS as never,
          addGenerationPrompt: false,
          ...(family.rendered.kwargs ? { kwargs: family.rendered.kwargs } : {}),
        }).text;
        const call = family.rendered.call.exec(text)?.[1] ?? "";
        const g = parseGbnf(family.dialect.forcedGrammar(tools, false));
        expect({ template, call, ok: recognizes(g, call) }).toEqual({ template, call, ok: true });
      }
    }
  });
});

// ---------------------------------------------------------------------------
// What each family adds

describe("granite", () => {
  test("keys in another order are read once the call closes", () => {
    const m = parseAllWays(granite, '<|tool_call|> [{"arguments": {"city": "Oslo"}, "name": "get_weather"}]');
    expect(callsOf(m)).toEqual([["get_weather", '{"city":"Oslo"}']]);
  });

  test("arguments written as a JSON string are taken as written", () => {
    const m = parseAllWays(granite, '<|tool_call|>[{"name": "f", "arguments": "{\\"a\\": 1}"}]');
    expect(callsOf(m)).toEqual([["f", '{"a": 1}']]);
  });

  test("a marker no list follows is dropped, what follows is content", () => {
    expect(parseAllWays(granite, "<|tool_call|>Sorry, no tool fits.")).toEqual({
      text: "Sorry, no tool fits.",
      reasoning: "",
      calls: [],
    });
  });
});

describe("firefunction", () => {
  test("`functools` that opens no list of calls is content", () => {
    const prose = "import functools\nfunctools.reduce(f, xs)  # functools [sic], functools[{}, 1]";
    expect(parseAllWays(fireFunction, prose)).toEqual({ text: prose, reasoning: "", calls: [] });
  });

  test("a reply that starts with the marker, without the template's space", () => {
    const m = parseAllWays(fireFunction, 'functools[{"name": "get_weather", "arguments": {"city": "Oslo"}}]');
    expect(m).toMatchObject({ text: "", reasoning: "", calls: [{ name: "get_weather", end: '{"city": "Oslo"}' }] });
  });
});

describe("apertus", () => {
  test("the first key names the call; an element whose value is no arguments object is dropped", () => {
    const m = parseAllWays(apertus, '<|tools_prefix|>[{"f": {"a": 1}, "g": {}}, {"h": "x"}]<|tools_suffix|>');
    expect(m).toEqual({
      text: "",
      reasoning: "",
      calls: [{ id: "id0", name: "f", args: '{"a": 1}', end: '{"a": 1}' }],
    });
  });
});

describe("command-r", () => {
  test("the answer's wrapper markers never reach the content (R7B, Cohere2 MoE)", () => {
    expect(parseAllWays(commandR, "<|START_RESPONSE|>Hello, world!\nWhat's up?<|END_RESPONSE|>")).toEqual({
      text: "Hello, world!\nWhat's up?",
      reasoning: "",
      calls: [],
    });
    expect(parseAllWays(commandR, "<|START_TEXT|>Hello <|START_|> world<|END_TEXT|>")).toEqual({
      text: "Hello <|START_|> world",
      reasoning: "",
      calls: [],
    });
  });

  test("every reply is parsed: the wrapper is there with or without tools", () => {
    expect(commandR.alwaysParse).toBe(true);
  });

  test("an action after the answer: both come out", () => {
    const m = parseAllWays(
      commandR,
      '<|START_RESPONSE|>Checking.<|END_RESPONSE|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {}}]<|END_ACTION|>',
    );
    expect(m).toEqual({ text: "Checking.", reasoning: "", calls: [{ id: "id0", name: "f", args: "{}", end: "{}" }] });
  });
});

describe("a plain-text opener", () => {
  test("once a call of its list started, the rest of the list is markup", () => {
    const m = parseAllWays(
      fireFunction,
      'Hi functools[{"name": "f", "arguments": {}}, 7, {"name": "g", "arguments": {}}] ok',
    );
    expect(m).toEqual({ text: "Hi ok", reasoning: "", calls: [{ id: "id0", name: "f", args: "{}", end: "{}" }] });
  });
});

describe("command-r-plus", () => {
  test("llama.cpp's canonical form: fence on its own lines", () => {
    const m = parseAllWays(
      commandRPlus,
      'Action:\n```json\n[{"tool_name": "special_function", "parameters": {"arg1": 1}}]\n```',
    );
    expect(m).toMatchObject({ text: "", reasoning: "", calls: [{ name: "special_function", end: '{"arg1": 1}' }] });
  });

  test("without a fence", () => {
    const m = parseAllWays(commandRPlus, 'Action: [{"tool_name": "f", "parameters": {}}]');
    expect(callsOf(m)).toEqual([["f", "{}"]]);
  });

  test("`Action:` in prose is content, a list that holds no call included", () => {
    const prose = "Action: we go now.\nAction:\n```python\nprint(1)\n```\nAction: [see below], Action: [{}, 1]";
    expect(parseAllWays(commandRPlus, prose)).toEqual({ text: prose, reasoning: "", calls: [] });
  });
});

describe.skipIf(!haveTemplates)("granite 4.x writes Hermes calls", () => {
  for (const template of ["ibm-granite-granite-4.0", "ibm-granite-granite-4.1"]) {
    test(`${template}.jinja: detected as Hermes, its calls read back, the Hermes grammar accepts them`, () => {
      const source = templateSource(template);
      expect([hermes.detect(source, () => false), granite.detect(source, () => false)]).toEqual([true, false]);
      const text = new ChatTemplate(source, { bosToken: "<s>", eosToken: "</s>" }).render({
        messages: CONVERSATION as never,
        tools: CONVERSATION_TOOLS as never,
        addGenerationPrompt: true,
      }).text;
      const calls =
        /<\|start_of_role\|>assistant<\|end_of_role\|>(<tool_call>[\s\S]*?<\/tool_call>)<\|end_of_text\|>/.exec(
          text,
        )?.[1];
      expect(calls).toBeDefined();
      const m = parseAllWays(hermes, calls!);
      expect(m.text).toBe("");
      expect(m.calls.map((c) => ({ name: c.name, arguments: JSON.parse(c.end!) }))).toEqual(CALLED);
      const tools = CONVERSATION_TOOLS.map((t) => ({ name: t.function.name, parameters: t.function.parameters }));
      const first = calls!.slice(0, calls!.indexOf("</tool_call>") + "</tool_call>".length);
      expect(recognizes(parseGbnf(hermes.forcedGrammar(tools, true)), first)).toBe(true);
    });
  }
});
