// Functionary v3.1 (`<function=NAME>{json}</function>`, and the code
// interpreter after `<|python_tag|>`) and v3.2 (recipients: `>>>NAME\n{json}`,
// `>>>all\ncontent`, the generation prompt ending in `>>>`): canonical model
// outputs (llama.cpp's Functionary tests use the same) parse into calls,
// whole and split anywhere; cut and broken calls leave no markup in the
// content; the forced grammars accept what the templates write and their
// output parses back; the real templates are detected as these wires and no
// other template is.
import { describe, expect, test } from "bun:test";
import { Template } from "@huggingface/jinja";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import { ChatTemplate } from "../../../src/codec/index.ts";
import { renderProgram } from "../../../src/codec/jinja/interpreter.ts";
import { functionaryV31, functionaryV32 } from "../../../src/codec/tool-dialects/functionary.ts";
import type { ToolDialect } from "../../../src/codec/tool-dialects/types.ts";
import type { ToolSpec } from "../../../src/codec/tool-grammar.ts";
import { recognizes } from "../../grammar/recognizer.ts";
import { callsOf, detectedBy, haveTemplates, parseAllWays, templateSource } from "./parse-harness.ts";

/** The text, and each call's name and arguments text. */
function read(dialect: ToolDialect, text: string) {
  const m = parseAllWays(dialect, text);
  return { text: m.text, calls: callsOf(m) };
}

const TOOLS: ToolSpec[] = [
  {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, unit: { enum: ["c", "f"] } },
      required: ["city"],
    },
  },
  { name: "search", parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] } },
];

describe("functionary v3.1 parser", () => {
  const v31 = (text: string) => read(functionaryV31, text);

  test("content, and a call with content before it", () => {
    expect(v31("Hello, world!\nWhat's up?")).toEqual({ text: "Hello, world!\nWhat's up?", calls: [] });
    expect(v31('<function=special_function>{"arg1": 1}</function>')).toEqual({
      text: "",
      calls: [["special_function", '{"arg1": 1}']],
    });
    expect(v31('Let me check. <function=get_weather>{"city": "Oslo"}</function>')).toEqual({
      text: "Let me check. ",
      calls: [["get_weather", '{"city": "Oslo"}']],
    });
  });

  test("two calls back to back get increasing indexes and distinct ids", () => {
    const m = parseAllWays(
      functionaryV31,
      '<function=get_weather>{"city": "Oslo"}</function>\n<function=search>{"query": "</function>"}</function>\n',
    );
    expect(m).toEqual({
      text: "",
      reasoning: "",
      calls: [
        { id: "id0", name: "get_weather", args: '{"city": "Oslo"}', end: '{"city": "Oslo"}' },
        { id: "id1", name: "search", args: '{"query": "</function>"}', end: '{"query": "</function>"}' },
      ],
    });
  });

  test("the code interpreter: raw code after <|python_tag|> is the python tool's code", () => {
    expect(v31('Running it.<|python_tag|>print("hi")\nx = 1 >> 2')).toEqual({
      text: "Running it.",
      calls: [["python", JSON.stringify({ code: 'print("hi")\nx = 1 >> 2' })]],
    });
    // As the template renders the call: its arguments as JSON.
    expect(v31('<|python_tag|>{"code": "print(1)"}')).toEqual({
      text: "",
      calls: [["python", '{"code": "print(1)"}']],
    });
  });

  test("a call cut by the end of the reply ends with its arguments as far as written", () => {
    expect(v31('Hi <function=get_weather>{"city": "Os')).toEqual({
      text: "Hi ",
      calls: [["get_weather", '{"city": "Os']],
    });
    for (const cut of ["<function=", "<function=get_wea", "<function=get_weather>", "<|python_tag|>"])
      expect(v31(`Hi ${cut}`)).toEqual({ text: "Hi ", calls: [] });
  });

  test("malformed calls leave no markup in the content", () => {
    for (const s of ['<function=get weather>{"a": 1}</function>', "<function=f>not json</function>"])
      expect(v31(`Before. ${s} After.`)).toEqual({ text: "Before.  After.", calls: [] });
    // Broken arguments after a good start: the call ends, but not as valid JSON.
    const broken = parseAllWays(functionaryV31, '<function=f>{"a": </function> After.');
    expect(broken.text).toBe(" After.");
    expect(() => JSON.parse(broken.calls[0]!.args)).toThrow();
  });
});

describe("functionary v3.2 parser", () => {
  const v32 = (text: string) => read(functionaryV32, text);

  test("the reply opens with its recipient: `all` is content, a name is a call", () => {
    expect(v32("all\nHello, world!\nWhat's up?")).toEqual({ text: "Hello, world!\nWhat's up?", calls: [] });
    expect(v32('special_function\n{"arg1": 1}')).toEqual({ text: "", calls: [["special_function", '{"arg1": 1}']] });
  });

  test("content, then two calls, each behind its own recipient", () => {
    const m = parseAllWays(
      functionaryV32,
      'all\nLet me check.>>>get_weather\n{"city": "Oslo"}>>>search\n{"query": ">>>all\\n"}\n',
    );
    expect(m).toEqual({
      text: "Let me check.",
      reasoning: "",
      calls: [
        { id: "id0", name: "get_weather", args: '{"city": "Oslo"}', end: '{"city": "Oslo"}' },
        { id: "id1", name: "search", args: '{"query": ">>>all\\n"}', end: '{"query": ">>>all\\n"}' },
      ],
    });
    expect(v32('get_weather\n{"city": "Oslo"}>>>all\nDone.')).toEqual({
      text: "Done.",
      calls: [["get_weather", '{"city": "Oslo"}']],
    });
  });

  test("`>>>` that opens no message is text", () => {
    expect(v32("all\nIn Python:\n>>> print(1)\n1")).toEqual({ text: "In Python:\n>>> print(1)\n1", calls: [] });
    // A reply that ignores the recipient format is content as written.
    expect(v32("Hello there")).toEqual({ text: "Hello there", calls: [] });
  });

  test("the code interpreter: code to python, up to the next recipient", () => {
    expect(v32('python\nprint(">>> hi")\n>>>all\nDone')).toEqual({
      text: "Done",
      calls: [["python", JSON.stringify({ code: 'print(">>> hi")\n' })]],
    });
  });

  test("a call cut by the end of the reply ends with its arguments as far as written", () => {
    expect(v32('all\nHi>>>get_weather\n{"city": "Os')).toEqual({
      text: "Hi",
      calls: [["get_weather", '{"city": "Os']],
    });
    for (const cut of ["get_wea", "get_weather\n", ">>>get_weather"])
      expect(v32(`${cut.startsWith(">") ? "all\nHi" : ""}${cut}`)).toEqual({
        text: cut.startsWith(">") ? "Hi" : "",
        calls: [],
      });
  });

  test("a malformed call leaves no markup in the content", () => {
    const broken = parseAllWays(functionaryV32, 'get_weather\n{"city": }>>>all\nAfter.');
    expect(broken.text).toBe("After.");
    expect(broken.calls.map((c) => c.name)).toEqual(["get_weather"]);
    expect(() => JSON.parse(broken.calls[0]!.args)).toThrow();
  });
});

describe("functionary forced grammars", () => {
  test("v3.1: `<function=NAME>{json}</function>`, calls back to back", () => {
    const one = parseGbnf(functionaryV31.forcedGrammar(TOOLS, false));
    const many = parseGbnf(functionaryV31.forcedGrammar(TOOLS, true));
    expect(gbnfErrors(one)).toEqual([]);
    expect(gbnfErrors(many)).toEqual([]);
    const call = '<function=get_weather>{"city": "Oslo", "unit": "c"}</function>';
    expect(recognizes(one, call)).toBe(true);
    expect(recognizes(one, '<function=get_weather>{"unit": "c"}</function>')).toBe(false);
    expect(recognizes(one, `${call}${call}`)).toBe(false);
    const two = `${call}<function=search>{"query": "x"}</function>`;
    expect(recognizes(many, two)).toBe(true);
    expect(read(functionaryV31, two).calls.map((c) => c[0])).toEqual(["get_weather", "search"]);
  });

  test("v3.2: the first call right after the prompt's `>>>`, further ones after their own", () => {
    const one = parseGbnf(functionaryV32.forcedGrammar(TOOLS, false));
    const many = parseGbnf(functionaryV32.forcedGrammar(TOOLS, true));
    expect(gbnfErrors(one)).toEqual([]);
    expect(gbnfErrors(many)).toEqual([]);
    const call = 'get_weather\n{"city": "Oslo"}';
    expect(recognizes(one, call)).toBe(true);
    expect(recognizes(one, `>>>${call}`)).toBe(false);
    expect(recognizes(one, 'get_weather\n{"city": 3}')).toBe(false);
    const two = `${call}>>>search\n{"query": "x"}`;
    expect(recognizes(many, two)).toBe(true);
    expect(read(functionaryV32, two).calls.map((c) => c[0])).toEqual(["get_weather", "search"]);
    // No lazy trigger: a call needs no opener of its own when it is the reply's first message.
    expect(functionaryV32.trigger).toBeUndefined();
    expect(functionaryV32.alwaysParse).toBe(true);
  });
});

const V31 = "meetkai-functionary-medium-v3.1";
const V32 = "meetkai-functionary-medium-v3.2";
const CALLS = [
  { id: "c1", type: "function", function: { name: "get_weather", arguments: { city: "Oslo", unit: "c" } } },
  { id: "c2", type: "function", function: { name: "search", arguments: { query: "Oslo events" } } },
];
const MESSAGES = [
  { role: "user", content: "Weather and events in Oslo?" },
  { role: "assistant", content: "Let me check.", tool_calls: CALLS },
];

describe.skipIf(!haveTemplates)("functionary against the real templates", () => {
  test("each version's template is detected as its wire, no other template is", () => {
    expect(detectedBy(functionaryV31)).toEqual([V31]);
    expect(detectedBy(functionaryV32)).toEqual([V32]);
  });

  test("v3.1: a rendered tool-call turn parses back to the same calls, and the grammar accepts it", () => {
    const tools = TOOLS.map((t) => ({ type: "function", function: { description: "", ...t } }));
    const text = new ChatTemplate(templateSource(V31)).render({
      messages: MESSAGES,
      tools,
      addGenerationPrompt: false,
    }).text;
    const turn = text.slice(text.lastIndexOf("<|end_header_id|>\n\n") + "<|end_header_id|>\n\n".length);
    expect(turn).toEndWith("<|eom_id|>");
    const reply = turn.slice(0, -"<|eom_id|>".length);
    const m = parseAllWays(functionaryV31, reply);
    expect(m.text).toBe("Let me check.");
    expect(m.calls.map((c) => [c.name, JSON.parse(c.args)])).toEqual(
      CALLS.map((c) => [c.function.name, c.function.arguments]),
    );
    const calls = reply.slice("Let me check.".length);
    expect(recognizes(parseGbnf(functionaryV31.forcedGrammar(TOOLS, true)), calls)).toBe(true);
  });

  test("v3.2: a tool-call turn rendered with the arguments as the JSON string it concatenates parses back", () => {
    // The template writes `'\n' + arguments`: it needs the JSON string (an
    // object raises in Jinja2 too). Rendered here directly with the string.
    const messages = MESSAGES.map((m) =>
      m.role === "assistant"
        ? {
            ...m,
            tool_calls: CALLS.map((c) => ({
              ...c,
              function: { ...c.function, arguments: JSON.stringify(c.function.arguments) },
            })),
          }
        : m,
    );
    const text = renderProgram(new Template(templateSource(V32)).parsed, {
      messages,
      tools: TOOLS.map((t) => ({ type: "function", function: { description: "", ...t } })),
      bos_token: "",
      add_generation_prompt: false,
    });
    // The generation prompt ends with `>>>`: the reply is what follows it.
    const header = "<|start_header_id|>assistant<|end_header_id|>\n\n>>>";
    const reply = text.slice(text.lastIndexOf(header) + header.length, -"<|eot_id|>".length);
    expect(reply).toBe(
      'all\nLet me check.>>>get_weather\n{"city":"Oslo","unit":"c"}>>>search\n{"query":"Oslo events"}',
    );
    expect(read(functionaryV32, reply)).toEqual({
      text: "Let me check.",
      calls: CALLS.map((c) => [c.function.name, JSON.stringify(c.function.arguments)]),
    });
    const calls = reply.slice(reply.indexOf(">>>") + 3);
    expect(recognizes(parseGbnf(functionaryV32.forcedGrammar(TOOLS, true)), calls)).toBe(true);
    // ChatTemplate passes objects first; the template cannot concatenate one,
    // so the turn is rendered again with the JSON strings: the same text.
    const rendered = new ChatTemplate(templateSource(V32)).render({
      messages: MESSAGES,
      tools: TOOLS.map((t) => ({ type: "function", function: { description: "", ...t } })),
      addGenerationPrompt: false,
    }).text;
    expect(rendered).toContain(`>>>${reply}<|eot_id|>`);
  });
});
