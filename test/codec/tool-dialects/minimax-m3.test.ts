// MiniMax M3's tool-call wire: detection on the real templates, the calls M3
// writes (namespace token before every tag, nested values as elements) parsed
// whole and streamed with values typed by the schema, cut and broken calls,
// the round trip through the template, and the forced grammar.
import { describe, expect, test } from "bun:test";
import { checkGbnfText, SchemaError } from "../../../grammar/index.ts";
import type { ChatMessage } from "../../../src/codec/index.ts";
import { minimaxM2 } from "../../../src/codec/tool-dialects/minimax.ts";
import { MINIMAX_NS as NS, minimaxM3 } from "../../../src/codec/tool-dialects/minimax-m3.ts";
import type { ToolSpec } from "../../../src/codec/tool-grammar.ts";
import {
  callsOf,
  detectedBy,
  grammarAccepts,
  haveTemplates,
  parseAllWays,
  render,
  run,
  templateSource,
} from "./parse-harness.ts";

const WEATHER = {
  type: "object",
  properties: {
    city: { type: "string" },
    days: { type: "integer" },
    unit: { enum: ["c", "f"] },
    detail: {
      type: "object",
      properties: { hourly: { type: "boolean" }, ratio: { type: "number" } },
      required: ["hourly"],
    },
    tags: { type: "array", items: { type: "string" } },
    stops: {
      type: "array",
      items: { type: "object", properties: { id: { type: "integer" }, label: { type: "string" } }, required: ["id"] },
    },
  },
  required: ["city"],
};
const TOOLS: ToolSpec[] = [
  { name: "get_weather", parameters: WEATHER },
  { name: "search", parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] } },
  { name: "noop", parameters: { type: "object", properties: {} } },
];
const opts = { tools: TOOLS };

/** Tags of the wire, as the template writes them. */
const el = (name: string, value: string) => `${NS}<${name}>${value}${NS}</${name}>`;
const invoke = (name: string, ...args: string[]) => `${NS}<invoke name="${name}">${args.join("")}${NS}</invoke>\n`;
const block = (...calls: string[]) => `${NS}<tool_call>\n${calls.join("")}${NS}</tool_call>`;

const WEATHER_CALL = invoke(
  "get_weather",
  el("city", 'São "Paulo"\nnorth'),
  el("days", "3"),
  el("detail", el("hourly", "true") + el("ratio", "-1.5")),
  el("tags", el("item", "a") + el("item", "3")),
  el("stops", el("item", el("id", "1") + el("label", "one")) + el("item", el("id", "2"))),
);
const WEATHER_ARGS = {
  city: 'São "Paulo"\nnorth',
  days: 3,
  detail: { hourly: true, ratio: -1.5 },
  tags: ["a", "3"],
  stops: [{ id: 1, label: "one" }, { id: 2 }],
};
const args = (end: string | undefined) => JSON.parse(end!) as unknown;

describe.skipIf(!haveTemplates)("minimax-m3 detection", () => {
  test("M3's template and no other; M2's wire never takes M3's template, nor M3's M2's", () => {
    expect(detectedBy(minimaxM3)).toEqual(["MiniMax-M3"]);
    expect(minimaxM2.detect(templateSource("MiniMax-M3"), () => true)).toBe(false);
    expect(minimaxM3.detect(templateSource("MiniMax-M2"), () => true)).toBe(false);
  });
});

describe("minimax-m3 parser", () => {
  test("text before, two calls in one block, values typed by the schema down the nesting", () => {
    const m = parseAllWays(minimaxM3, `Let me look.${block(WEATHER_CALL, invoke("search", el("query", "3")))}`, opts);
    expect(m.text).toBe("Let me look.");
    expect(m.calls.map((c) => c.name)).toEqual(["get_weather", "search"]);
    expect(m.calls.map((c) => c.id)).toEqual(["id0", "id1"]);
    expect(args(m.calls[0]!.end)).toEqual(WEATHER_ARGS);
    // `query` is a string: "3" stays a string.
    expect(args(m.calls[1]!.end)).toEqual({ query: "3" });
  });

  test("llama.cpp's canonical M3 outputs (content after the split-out reasoning)", () => {
    const tools: ToolSpec[] = [
      { name: "special_function", parameters: { type: "object", properties: { arg1: { type: "integer" } } } },
      { name: "toggle", parameters: { type: "object", properties: { enabled: { type: "boolean" } } } },
      { name: "amount", parameters: { type: "object", properties: { orig: { type: "number" } } } },
      {
        name: "union_args",
        parameters: {
          type: "object",
          properties: {
            limit: { anyOf: [{ type: "integer" }, { type: "object", properties: { max: { type: "integer" } } }] },
            label: { type: "string" },
          },
        },
      },
    ];
    const cases: [string, string, unknown][] = [
      [invoke("special_function", el("arg1", "1")), "special_function", { arg1: 1 }],
      [invoke("special_function", el("arg1", "-14")), "special_function", { arg1: -14 }],
      [invoke("amount", el("orig", "3.14")), "amount", { orig: 3.14 }],
      [invoke("toggle", el("enabled", "true")), "toggle", { enabled: true }],
      [invoke("union_args", el("limit", "5")), "union_args", { limit: 5 }],
      [invoke("union_args", el("limit", el("max", "10"))), "union_args", { limit: { max: 10 } }],
      // A parameter declared a string is raw text, even when it looks like elements.
      [invoke("union_args", el("label", el("text", "hi"))), "union_args", { label: el("text", "hi") }],
      [invoke("empty_args"), "empty_args", {}],
    ];
    for (const [call, name, expected] of cases) {
      const m = parseAllWays(minimaxM3, `\nLet me call the function.${block(call)}`, { tools });
      expect(m.text).toBe("\nLet me call the function.");
      expect(m.calls.map((c) => [c.name, args(c.end)])).toEqual([[name, expected]]);
    }
  });

  test("calls in separate blocks; whitespace between and after blocks is not content", () => {
    const m = parseAllWays(minimaxM3, `${block(invoke("noop"))}\n${block(invoke("search", el("query", "x")))}\n`, opts);
    expect(m.text).toBe("");
    expect(callsOf(m)).toEqual([
      ["noop", "{}"],
      ["search", '{"query":"x"}'],
    ]);
  });

  test("empty elements are the schema's empty string, object or array", () => {
    const m = parseAllWays(
      minimaxM3,
      block(invoke("get_weather", el("city", ""), el("detail", ""), el("tags", ""), el("extra", ""))),
      opts,
    );
    expect(args(m.calls[0]!.end)).toEqual({ city: "", detail: {}, tags: [], extra: "" });
  });

  test("without tools: scalars are the strings written, nesting still reads as objects and arrays", () => {
    const m = parseAllWays(minimaxM3, block(WEATHER_CALL));
    expect(args(m.calls[0]!.end)).toEqual({
      city: 'São "Paulo"\nnorth',
      days: "3",
      detail: { hourly: "true", ratio: "-1.5" },
      tags: ["a", "3"],
      stops: [{ id: "1", label: "one" }, { id: "2" }],
    });
  });

  test("a string streams before its closing tag arrives; brackets and keys go out as their tags do", () => {
    const p = minimaxM3.parser(opts);
    const sent = (text: string) =>
      p
        .push(text)
        .flatMap((e) => (e.type === "call-args" ? [e.text] : []))
        .join("");
    const events = p.push(`${NS}<tool_call>\n${NS}<invoke name="get_weather">`);
    expect(events[0]).toMatchObject({ type: "call-start", name: "get_weather" });
    expect(sent(`${NS}<city>Os`)).toBe('"city":"Os');
    // The start of the namespace token is held: it may be the closing tag.
    expect(sent(`lo]<]mini`)).toBe("lo");
    expect(sent(`max[>[</city>${NS}<detail>${NS}<hourly>tr`)).toBe('","detail":{"hourly":');
    expect(sent(`ue${NS}</hourly>`)).toBe("true");
  });

  test("a call cut mid-value keeps its arguments as written; cut before its name it is dropped", () => {
    const cutAt = WEATHER_CALL.indexOf("north") + 2;
    const cut = parseAllWays(minimaxM3, `Hi ${NS}<tool_call>\n${WEATHER_CALL.slice(0, cutAt)}`, opts);
    expect(cut.text).toBe("Hi ");
    expect(callsOf(cut)).toEqual([["get_weather", '{"city":"São \\"Paulo\\"\\nno']]);
    const nested = WEATHER_CALL.indexOf("-1.5");
    const deep = run(minimaxM3, [`${NS}<tool_call>\n${WEATHER_CALL.slice(0, nested)}`], opts);
    expect(callsOf(deep)).toEqual([
      ["get_weather", '{"city":"São \\"Paulo\\"\\nnorth","days":3,"detail":{"hourly":true,"ratio":'],
    ]);
    for (const early of [`${NS}<tool_call>`, `${NS}<tool_call>\n`, `${NS}<tool_call>\n${NS}<invoke name="get_wea`])
      expect(parseAllWays(minimaxM3, `Hi ${early}`, opts)).toEqual({ text: "Hi ", reasoning: "", calls: [] });
  });

  test("a reply cut anywhere but inside the namespace token leaves no markup in content; cut after the name, a partial call", () => {
    const reply = block(invoke("get_weather", el("city", "Oslo"), el("detail", el("hourly", "true")), el("unit", "c")));
    const whole = '{"city":"Oslo","detail":{"hourly":"true"},"unit":"c"}';
    const named = reply.indexOf('">') + 2;
    const insideNs = new Set<number>();
    for (let at = reply.indexOf(NS); at >= 0; at = reply.indexOf(NS, at + 1))
      for (let k = at + 1; k < at + NS.length; k++) insideNs.add(k);
    for (let k = 1; k <= reply.length; k++) {
      if (insideNs.has(k)) continue;
      const cut = run(minimaxM3, [reply.slice(0, k)]);
      expect(run(minimaxM3, [...reply.slice(0, k)])).toEqual(cut);
      expect(cut.text).toBe("");
      expect(cut.calls.length).toBe(k >= named ? 1 : 0);
      // The arguments as far as they were written: a prefix of the whole arguments.
      if (k >= named && !whole.startsWith(cut.calls[0]!.end!)) throw new Error(`cut at ${k}: ${cut.calls[0]!.end}`);
    }
  });

  test("malformed markup never reaches the content", () => {
    // Junk in a block: dropped with it.
    expect(parseAllWays(minimaxM3, `A ${NS}<tool_call>\n<oops>not a call${NS}</tool_call> B`, opts)).toEqual({
      text: "A  B",
      reasoning: "",
      calls: [],
    });
    // Junk between a call's parameters: the call ends with the parameters it has.
    const junk = parseAllWays(minimaxM3, `A${block(invoke("search", el("query", "x"), "junk"))}`, opts);
    expect(junk.text).toBe("A");
    expect(callsOf(junk)).toEqual([["search", '{"query":"x"}']]);
    // A value that never closes before the call does, a closing tag that is
    // not its element's: the call ends as written (a broken call), the rest of
    // the block is dropped.
    const unclosed = parseAllWays(
      minimaxM3,
      block(`${NS}<invoke name="search">${NS}<query>x${NS}</invoke>\n`, invoke("noop")),
      opts,
    );
    expect(unclosed.text).toBe("");
    expect(callsOf(unclosed)).toEqual([["search", '{"query":"x']]);
    const mismatched = parseAllWays(
      minimaxM3,
      block(invoke("get_weather", `${NS}<detail>${el("hourly", "true")}${NS}</details>`)),
      opts,
    );
    expect(callsOf(mismatched)).toEqual([["get_weather", '{"detail":{"hourly":true']]);
    // A bad tool name: the block is dropped.
    expect(parseAllWays(minimaxM3, block(invoke("a b")), opts).calls).toEqual([]);
  });

  test("plain text, the namespace token outside a block, and a partial marker at the end come out", () => {
    expect(run(minimaxM3, [`a ${NS}<b> ]<]mini`, "max[>[<tol"])).toEqual({
      text: `a ${NS}<b> ${NS}<tol`,
      reasoning: "",
      calls: [],
    });
    expect(run(minimaxM3, ["a <tool_call> ]<]mini"])).toEqual({
      text: "a <tool_call> ]<]mini",
      reasoning: "",
      calls: [],
    });
    // The namespace token before a block's tag, cut off: markup, never content.
    expect(run(minimaxM3, [`a ${NS}<tool`])).toEqual({
      text: "a ",
      reasoning: "",
      calls: [],
    });
  });
});

describe.skipIf(!haveTemplates)("minimax-m3 round trip through the template", () => {
  const tools = TOOLS.map((t) => ({ type: "function", function: { name: t.name, parameters: t.parameters } }));
  const assistant: ChatMessage = {
    role: "assistant",
    content: "Checking.",
    tool_calls: [
      { id: "a", type: "function", function: { name: "get_weather", arguments: JSON.stringify(WEATHER_ARGS) } },
      { id: "b", type: "function", function: { name: "search", arguments: '{"query":"3"}' } },
      { id: "c", type: "function", function: { name: "noop", arguments: "{}" } },
    ],
  };

  test("MiniMax-M3: a rendered tool-call turn parses back to the same calls", () => {
    const text = render("MiniMax-M3", [{ role: "user", content: "weather?" }, assistant], tools);
    // The turn after its `</mm:think>` prefix (no reasoning), up to the end-of-turn token.
    const turn = text.slice(text.lastIndexOf("</mm:think>") + "</mm:think>".length, text.lastIndexOf("[e~["));
    expect(turn).toBe(`Checking.${block(WEATHER_CALL, invoke("search", el("query", "3")), invoke("noop"))}`);
    const m = parseAllWays(minimaxM3, turn, opts);
    expect(m.text).toBe("Checking.");
    expect(m.calls.map((c) => [c.name, args(c.end)])).toEqual([
      ["get_weather", WEATHER_ARGS],
      ["search", { query: "3" }],
      ["noop", {}],
    ]);
  });

  test("the forced grammar accepts the template's own rendering of the calls", () => {
    const text = render(
      "MiniMax-M3",
      [
        { role: "user", content: "weather?" },
        { ...assistant, content: "" },
      ],
      tools,
    );
    const calls = text.slice(text.lastIndexOf(`${NS}<tool_call>`), text.lastIndexOf("[e~["));
    expect(grammarAccepts(minimaxM3.forcedGrammar(TOOLS, true), calls)).toBe(true);
    expect(grammarAccepts(minimaxM3.forcedGrammar(TOOLS, false), calls)).toBe(false);
  });
});

describe("minimax-m3 forced grammar", () => {
  const one = minimaxM3.forcedGrammar(TOOLS, false);
  const many = minimaxM3.forcedGrammar(TOOLS, true);

  test("is valid GBNF", () => {
    for (const g of [one, many]) expect(checkGbnfText(g).errors).toEqual([]);
  });

  test("writes the template's layout, holding values to the schema", () => {
    const call = (...a: string[]) => block(invoke("get_weather", ...a));
    expect(grammarAccepts(one, block(WEATHER_CALL))).toBe(true);
    expect(grammarAccepts(one, call(el("city", "x"), el("unit", "f")))).toBe(true);
    expect(grammarAccepts(one, block(invoke("noop")))).toBe(true);
    // Wrong types, an enum's outsider, a nested object without its required member, no `city`, an unknown tool.
    expect(grammarAccepts(one, call(el("city", "x"), el("days", "three")))).toBe(false);
    expect(grammarAccepts(one, call(el("city", "x"), el("unit", "k")))).toBe(false);
    expect(grammarAccepts(one, call(el("city", "x"), el("detail", el("ratio", "1"))))).toBe(false);
    expect(grammarAccepts(one, call(el("days", "3")))).toBe(false);
    expect(grammarAccepts(one, block(invoke("get_time")))).toBe(false);
    // Parameters in the schema's order, the template's exact layout.
    expect(grammarAccepts(one, call(el("days", "3"), el("city", "x")))).toBe(false);
    expect(grammarAccepts(one, call(el("city", "x")).replace("\n", ""))).toBe(false);
    // One call, or with parallel calls one or more in the block.
    const two = block(WEATHER_CALL, invoke("search", el("query", "3")));
    expect(grammarAccepts(one, two)).toBe(false);
    expect(grammarAccepts(many, two)).toBe(true);
  });

  test("a string may hold anything but the namespace token", () => {
    const g = minimaxM3.forcedGrammar([TOOLS[1]!], false);
    const call = (v: string) => block(invoke("search", el("query", v)));
    expect(grammarAccepts(g, call("a < b ]<]minimax[> </query> ]]"))).toBe(true);
    expect(grammarAccepts(g, call(`a ${NS} b`))).toBe(false);
  });

  test("what the element syntax cannot hold is refused as unsupported", () => {
    const refused = (schema: unknown, $defs: unknown = {}) => {
      try {
        minimaxM3.forcedGrammar(
          [{ name: "f", parameters: { type: "object", properties: { p: schema }, $defs } }],
          false,
        );
      } catch (e) {
        return e instanceof SchemaError ? e.kind : "other";
      }
      return "accepted";
    };
    expect(refused({ type: "object" })).toBe("unsupported"); // free-form object
    expect(refused({ type: "array", items: [{ type: "string" }] })).toBe("unsupported"); // tuple
    expect(refused({ type: "array", uniqueItems: true })).toBe("unsupported");
    expect(refused({ type: ["object", "integer"] })).toBe("unsupported");
    expect(refused({ type: "object", properties: { "a<b": { type: "string" } } })).toBe("unsupported");
    // Recursive references; local references resolve.
    const node = { type: "object", properties: { next: { $ref: "#/$defs/n" } } };
    expect(refused({ $ref: "#/$defs/n" }, { n: node })).toBe("unsupported");
    expect(refused({ $ref: "#/$defs/n" }, { n: { type: "integer" } })).toBe("accepted");
    expect(refused({ anyOf: [{ type: "integer" }, { type: "array", items: { type: "boolean" } }] })).toBe("accepted");
  });
});
