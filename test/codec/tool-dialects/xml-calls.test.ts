// The XML-style wires (Qwen3.5/Qwen3-Coder/Nemotron 3/StepFun, Seed-OSS, GLM
// 4.5-4.7, MiniMax M2): canonical model outputs in each template's layout
// parse into calls with arguments typed by the schema, whole and streamed a
// character at a time; cut and broken calls keep no markup in the content;
// the forced grammar writes exactly what the template writes; and a real
// template's rendering of a tool-call turn parses back to the same calls.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseGbnf } from "../../../grammar/index.ts";
import { ChatTemplate } from "../../../src/codec/index.ts";
import { detectToolDialect, type ToolDialect } from "../../../src/codec/tool-dialects/index.ts";
import { glm45, glm47 } from "../../../src/codec/tool-dialects/glm.ts";
import { minimaxM2 } from "../../../src/codec/tool-dialects/minimax.ts";
import { qwenXml, seedOss } from "../../../src/codec/tool-dialects/qwen-xml.ts";
import type { ToolSpec } from "../../../src/codec/tool-grammar.ts";
import { recognizes } from "../../grammar/recognizer.ts";
import { haveTemplates, type MergedCall, parseAllWays, TEMPLATES_DIR } from "./parse-harness.ts";

const TOOLS: ToolSpec[] = [
  {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string" },
        days: { type: "integer" },
        unit: { enum: ["c", "f"] },
        detail: { type: "object", properties: { hourly: { type: "boolean" } } },
      },
      required: ["city"],
    },
  },
  { name: "search", parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] } },
];

const parse = (dialect: ToolDialect, text: string) => parseAllWays(dialect, text, { tools: TOOLS });

const args = (c: MergedCall) => JSON.parse(c.end!) as unknown;

// Each wire, written as its template writes a call to get_weather (city, days, detail) and one to search.
const WIRES: { dialect: ToolDialect; weather: string; search: string; between: string }[] = [
  {
    dialect: qwenXml,
    weather:
      '<tool_call>\n<function=get_weather>\n<parameter=city>\nSão "Paulo"\nnorth\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=detail>\n{"hourly": true}\n</parameter>\n</function>\n</tool_call>',
    search: "<tool_call>\n<function=search>\n<parameter=query>\n3\n</parameter>\n</function>\n</tool_call>",
    between: "\n",
  },
  {
    dialect: seedOss,
    weather:
      '<seed:tool_call>\n<function=get_weather>\n<parameter=city>São "Paulo"\nnorth</parameter>\n<parameter=days>3</parameter>\n<parameter=detail>{"hourly": true}</parameter>\n</function>\n</seed:tool_call>',
    search: "<seed:tool_call>\n<function=search>\n<parameter=query>3</parameter>\n</function>\n</seed:tool_call>",
    between: "\n",
  },
  {
    dialect: glm45,
    weather:
      '<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>São "Paulo"\nnorth</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>detail</arg_key>\n<arg_value>{"hourly": true}</arg_value>\n</tool_call>',
    search: "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
    between: "\n",
  },
  {
    dialect: glm47,
    weather:
      '<tool_call>get_weather<arg_key>city</arg_key><arg_value>São "Paulo"\nnorth</arg_value><arg_key>days</arg_key><arg_value>3</arg_value><arg_key>detail</arg_key><arg_value>{"hourly": true}</arg_value></tool_call>',
    search: "<tool_call>search<arg_key>query</arg_key><arg_value>3</arg_value></tool_call>",
    between: "",
  },
];

const WEATHER_ARGS = { city: 'São "Paulo"\nnorth', days: 3, detail: { hourly: true } };

describe("XML-style wires: auto-mode parsing", () => {
  for (const w of WIRES) {
    test(`${w.dialect.name}: text before, two calls, values typed by the schema`, () => {
      const r = parse(w.dialect, `Let me look.\n\n${w.weather}${w.between}${w.search}`);
      expect(r.text).toBe("Let me look.\n\n");
      expect(r.calls.map((c) => c.name)).toEqual(["get_weather", "search"]);
      expect(args(r.calls[0]!)).toEqual(WEATHER_ARGS);
      // `query` is a string: "3" stays a string.
      expect(args(r.calls[1]!)).toEqual({ query: "3" });
    });

    test(`${w.dialect.name}: a call cut mid-value keeps its arguments as written, no markup in content`, () => {
      const cutAt = w.weather.indexOf("north");
      const r = parse(w.dialect, w.weather.slice(0, cutAt + 2));
      expect(r.text).toBe("");
      expect(r.calls).toHaveLength(1);
      expect(r.calls[0]!.end).toBe('{"city":"São \\"Paulo\\"\\nno');
    });

    test(`${w.dialect.name}: a call cut before its name is dropped`, () => {
      const open = w.weather.slice(0, w.weather.indexOf("get_weather") + 3);
      const r = parse(w.dialect, `Hi ${open}`);
      expect(r.text).toBe("Hi ");
      expect(r.calls).toEqual([]);
    });

    test(`${w.dialect.name}: broken markup inside a block never reaches the content`, () => {
      const block = w.dialect.trigger!;
      const close = block.replace("<", "</");
      const r = parse(w.dialect, `A ${block}<oops>not a call${close} B`);
      expect(r.text).toBe("A  B");
      expect(r.calls).toEqual([]);
    });

    test(`${w.dialect.name}: without tools, values are the strings written`, () => {
      const p = w.dialect.parser();
      const events = [...p.push(w.search), ...p.flush()];
      const end = events.find((e) => e.type === "call-end");
      expect(end && JSON.parse(end.arguments)).toEqual({ query: "3" });
    });
  }

  test("minimax-m2: several invokes in one block", () => {
    const text =
      'Sure.\n<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">São "Paulo"\nnorth</parameter>\n<parameter name="days">3</parameter>\n<parameter name="detail">{"hourly": true}</parameter>\n</invoke>\n<invoke name="search">\n<parameter name="query">3</parameter>\n</invoke>\n</minimax:tool_call>';
    const r = parse(minimaxM2, text);
    expect(r.text).toBe("Sure.\n");
    expect(r.calls.map((c) => c.name)).toEqual(["get_weather", "search"]);
    expect(args(r.calls[0]!)).toEqual(WEATHER_ARGS);
    expect(args(r.calls[1]!)).toEqual({ query: "3" });
  });

  test("a string value streams before its closing tag arrives", () => {
    const p = qwenXml.parser({ tools: TOOLS });
    const events = p.push("<tool_call>\n<function=search>\n<parameter=query>\nhello wor");
    const sent = events.flatMap((e) => (e.type === "call-args" ? [e.text] : [])).join("");
    expect(events[0]).toMatchObject({ type: "call-start", name: "search" });
    expect(sent).toBe('{"query":"hello wor');
  });
});

describe("XML-style wires: the forced grammar writes the template's layout", () => {
  const dialects = [qwenXml, seedOss, glm45, glm47, minimaxM2];
  for (const d of dialects) {
    test(`${d.name}: accepts the canonical calls, refuses wrong types and unknown tools`, () => {
      const one = parseGbnf(d.forcedGrammar(TOOLS, false));
      const many = parseGbnf(d.forcedGrammar(TOOLS, true));
      const w = WIRES.find((x) => x.dialect === d);
      const weather =
        w?.weather ??
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">São "Paulo"\nnorth</parameter>\n<parameter name="days">3</parameter>\n<parameter name="detail">{"hourly":true}</parameter>\n</invoke>\n</minimax:tool_call>';
      // The grammar writes compact JSON for object values.
      const compact = weather.replace('{"hourly": true}', '{"hourly":true}');
      expect(recognizes(one, compact)).toBe(true);
      expect(recognizes(one, compact.replace(">3<", ">three<").replace("\n3\n", "\nthree\n"))).toBe(false);
      expect(recognizes(one, compact.replace("get_weather", "get_time"))).toBe(false);
      if (w) {
        expect(recognizes(one, `${compact}${w.between}${w.search}`)).toBe(false);
        expect(recognizes(many, `${compact}${w.between}${w.search}`)).toBe(true);
      }
    });
  }

  test("a string value may hold anything but its closing tag", () => {
    const g = parseGbnf(qwenXml.forcedGrammar([TOOLS[1]!], false));
    const call = (v: string) =>
      `<tool_call>\n<function=search>\n<parameter=query>\n${v}\n</parameter>\n</function>\n</tool_call>`;
    expect(recognizes(g, call("a < b </param </parameterx"))).toBe(true);
    expect(recognizes(g, call("a </parameter> b"))).toBe(false);
  });
});

describe.skipIf(!haveTemplates)("XML-style wires: real templates", () => {
  const expected: Record<string, string> = {
    "Qwen3.5-4B.jinja": "qwen-xml",
    "Qwen3-Coder.jinja": "qwen-xml",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": "qwen-xml",
    "StepFun3.5-Flash.jinja": "qwen-xml",
    "ByteDance-Seed-OSS.jinja": "seed-oss",
    "GLM-4.6.jinja": "glm-4.5",
    "GLM-4.7-Flash.jinja": "glm-4.7",
    "MiniMax-M2.jinja": "minimax-m2",
  };
  const read = (f: string) => readFileSync(join(TEMPLATES_DIR, f), "utf8");
  const cases = () => JSON.parse(read("cases.json"));

  test("each family's templates are detected as its wire, and no other template is", () => {
    const names = new Set(Object.values(expected));
    for (const f of readdirSync(TEMPLATES_DIR).filter((x) => x.endsWith(".jinja"))) {
      const got = detectToolDialect(read(f), () => true)?.name;
      if (expected[f]) expect(`${f}: ${got}`).toBe(`${f}: ${expected[f]}`);
      else if (got && names.has(got) && !/GLM|Spark|Laguna|ling/.test(f)) throw new Error(`${f} detected as ${got}`);
    }
  });

  for (const [file, name] of Object.entries(expected)) {
    test(`${file}: a rendered tool-call turn parses back to the same calls`, () => {
      const all = cases();
      const c = structuredClone(all.cases["parallel-calls"]);
      c.messages[1].tool_calls[0].function.arguments.days = 3;
      c.tools[0].function.parameters.properties.days = { type: "integer" };
      const template = new ChatTemplate(read(file), { bosToken: all.bos_token, eosToken: all.eos_token });
      const text = template.render({ messages: c.messages.slice(0, 2), tools: c.tools }).text;
      const dialect = detectToolDialect(read(file), () => true)!;
      expect(dialect.name).toBe(name);
      const from = text.lastIndexOf("Weather in Oslo");
      const tools = c.tools.map((t: any) => ({ name: t.function.name, parameters: t.function.parameters }));
      const parser = dialect.parser({ tools });
      const events = [...parser.push(text.slice(text.indexOf(dialect.trigger!, from))), ...parser.flush()];
      const calls = events.flatMap((e) => (e.type === "call-end" ? [JSON.parse(e.arguments)] : []));
      expect(calls).toEqual(c.messages[1].tool_calls.map((t: any) => t.function.arguments));
    });
  }
});
