// Every wire: a reply cut anywhere inside a call (as max_tokens cuts it, at a
// token boundary, so never inside a special-token marker) leaves no call
// markup in the content: the cut call is a partial call or nothing. And once
// the call's name and the opening of its arguments were written, the cut
// call is a partial call (issue #34: the Llama 3 wire dropped it), the same
// whether the reply came in one piece or token by token.
import { describe, expect, test } from "bun:test";
import { DEEPSEEK_MARKERS as D } from "../../../src/codec/tool-dialects/deepseek.ts";
import { DSML_BLOCKS } from "../../../src/codec/tool-dialects/deepseek-dsml.ts";
import { KIMI_K2_MARKERS as K } from "../../../src/codec/tool-dialects/kimi-k2.ts";
import { MINIMAX_NS as NS } from "../../../src/codec/tool-dialects/minimax-m3.ts";
import { TOOL_DIALECTS } from "../../../src/codec/tool-dialects/index.ts";
import { cutPoints, parseAllWays, run } from "./parse-harness.ts";

const ARGS = '{"city": "Oslo", "unit": "c"}';
/** The arguments a wire that writes values as raw text gives back (compact JSON). */
const TYPED = '{"city":"Oslo","unit":"c"}';

/**
 * A whole reply holding one call to get_weather, the markers a cut may not
 * fall inside, the arguments the call ends with (ARGS unless said), and
 * where the call is named (by default where ARGS begins).
 */
const REPLIES: Record<string, { reply: string; markers: string[]; args?: string; named?: string }> = {
  hermes: {
    reply: `<tool_call>\n{"name": "get_weather", "arguments": ${ARGS}}\n</tool_call>`,
    markers: ["<tool_call>", "</tool_call>"],
  },
  llama3: { reply: `<|python_tag|>{"name": "get_weather", "parameters": ${ARGS}}`, markers: ["<|python_tag|>"] },
  mistral: { reply: `[TOOL_CALLS][{"name": "get_weather", "arguments": ${ARGS}}]`, markers: ["[TOOL_CALLS]"] },
  "mistral-call-id": {
    reply: `[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]${ARGS}`,
    markers: ["[TOOL_CALLS]", "[CALL_ID]", "[ARGS]"],
  },
  "mistral-args": { reply: `[TOOL_CALLS]get_weather[ARGS]${ARGS}`, markers: ["[TOOL_CALLS]", "[ARGS]"] },
  deepseek: {
    reply: `${D.callsBegin}${D.callBegin}function${D.sep}get_weather\n\`\`\`json\n${ARGS}\n\`\`\`${D.callEnd}${D.callsEnd}`,
    markers: Object.values(D),
  },
  "deepseek-v3.1": {
    reply: `${D.callsBegin}${D.callBegin}get_weather${D.sep}${ARGS}${D.callEnd}${D.callsEnd}`,
    markers: Object.values(D),
  },
  "deepseek-v3.2": {
    reply: `${DSML_BLOCKS.v32.open}\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Oslo</｜DSML｜parameter>\n<｜DSML｜parameter name="unit" string="true">c</｜DSML｜parameter>\n</｜DSML｜invoke>\n${DSML_BLOCKS.v32.close}`,
    markers: ["<｜DSML｜", "</｜DSML｜"],
    args: TYPED,
    named: '<｜DSML｜invoke name="get_weather">',
  },
  "deepseek-v4": {
    reply: `${DSML_BLOCKS.v4.open}\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Oslo</｜DSML｜parameter>\n<｜DSML｜parameter name="unit" string="true">c</｜DSML｜parameter>\n</｜DSML｜invoke>\n${DSML_BLOCKS.v4.close}`,
    markers: ["<｜DSML｜", "</｜DSML｜"],
    args: TYPED,
    named: '<｜DSML｜invoke name="get_weather">',
  },
  "kimi-k2": {
    reply: `${K.sectionBegin}${K.callBegin}functions.get_weather:0${K.argumentBegin}${ARGS}${K.callEnd}${K.sectionEnd}`,
    markers: Object.values(K),
  },
  "kimi-k3": {
    reply:
      '<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" type="string"<|sep|>Oslo<|close|>argument<|sep|><|open|>argument key="unit" type="string"<|sep|>c<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>',
    markers: ["<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"],
    args: TYPED,
    named: 'tool="get_weather" index="1"<|sep|>',
  },
  "gpt-oss": {
    reply: `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${ARGS}<|call|>`,
    markers: ["<|channel|>", "<|constrain|>", "<|message|>", "<|call|>"],
  },
  granite: { reply: `<|tool_call|>[{"name": "get_weather", "arguments": ${ARGS}}]`, markers: ["<|tool_call|>"] },
  firefunction: { reply: ` functools[{"name": "get_weather", "arguments": ${ARGS}}]`, markers: [" functools["] },
  apertus: {
    reply: `<|tools_prefix|>[{"get_weather": ${ARGS}}]<|tools_suffix|>`,
    markers: ["<|tools_prefix|>", "<|tools_suffix|>"],
  },
  "command-r": {
    reply: `<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": ${ARGS}}\n]<|END_ACTION|>`,
    markers: ["<|START_ACTION|>", "<|END_ACTION|>"],
  },
  "command-r-plus": {
    reply: `Action:\n\`\`\`json\n[\n    {\n        "tool_name": "get_weather",\n        "parameters": ${ARGS}\n    }\n]\`\`\``,
    markers: ["Action:", "```json\n", "```"],
  },
  "qwen-xml": {
    reply:
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>",
    markers: ["<tool_call>", "</tool_call>"],
    args: TYPED,
    named: "<function=get_weather>",
  },
  "seed-oss": {
    reply:
      "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n<parameter=unit>c</parameter>\n</function>\n</seed:tool_call>",
    markers: ["<seed:tool_call>", "</seed:tool_call>"],
    args: TYPED,
    named: "<function=get_weather>",
  },
  "glm-4.5": {
    reply:
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n<arg_key>unit</arg_key>\n<arg_value>c</arg_value>\n</tool_call>",
    markers: ["<tool_call>", "</tool_call>"],
    args: TYPED,
    named: "get_weather\n",
  },
  "glm-4.7": {
    reply:
      "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value><arg_key>unit</arg_key><arg_value>c</arg_value></tool_call>",
    markers: ["<tool_call>", "</tool_call>"],
    args: TYPED,
    named: "get_weather<arg_key>",
  },
  "minimax-m2": {
    reply:
      '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n<parameter name="unit">c</parameter>\n</invoke>\n</minimax:tool_call>',
    markers: ["<minimax:tool_call>", "</minimax:tool_call>"],
    args: TYPED,
    named: '<invoke name="get_weather">',
  },
  "minimax-m3": {
    reply: `${NS}<tool_call>\n${NS}<invoke name="get_weather">${NS}<city>Oslo${NS}</city>${NS}<unit>c${NS}</unit>${NS}</invoke>\n${NS}</tool_call>`,
    markers: [NS],
    args: TYPED,
    named: '<invoke name="get_weather">',
  },
  gemma4: {
    reply: '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>,unit:<|"|>c<|"|>}<tool_call|>',
    markers: ["<|tool_call>", "<tool_call|>", '<|"|>'],
    args: TYPED,
    named: "call:get_weather{",
  },
  "functionary-v3.1": { reply: `<function=get_weather>${ARGS}</function>`, markers: ["<function=", "</function>"] },
  // The generation prompt ends with `>>>`: the reply starts with the recipient.
  "functionary-v3.2": { reply: `get_weather\n${ARGS}`, markers: [] },
  lfm2: {
    reply: '<|tool_call_start|>[get_weather(city="Oslo", unit="c")]<|tool_call_end|>',
    markers: ["<|tool_call_start|>", "<|tool_call_end|>"],
    args: TYPED,
    named: "get_weather(",
  },
  "generic-json": { reply: `{"name": "get_weather", "arguments": ${ARGS}}`, markers: [] },
};

/** Where a sample's call is named: cuts from there on leave a partial call. */
function namedAt(sample: { reply: string; named?: string }): number {
  if (sample.named === undefined) return sample.reply.indexOf(ARGS) + 1;
  return sample.reply.indexOf(sample.named) + sample.named.length;
}

describe("a call cut anywhere leaves no markup in content", () => {
  for (const dialect of TOOL_DIALECTS) {
    const sample = REPLIES[dialect.name];
    test(dialect.name, () => {
      expect(sample).toBeDefined();
      const { reply, markers } = sample!;
      const args = sample!.args ?? ARGS;
      let whole = 0;
      for (const k of cutPoints(reply, markers)) {
        const { text, calls } = run(dialect, [reply.slice(0, k)]);
        if (text !== "")
          throw new Error(`cut at ${k} (${JSON.stringify(reply.slice(0, k))}) left content ${JSON.stringify(text)}`);
        for (const c of calls) expect(c.name).toBe("get_weather");
        if (calls.some((c) => c.end === args)) whole++;
      }
      // The uncut reply is the call itself.
      expect(whole).toBeGreaterThan(0);
    });
  }
});

describe("a call cut after its name is a partial call, streamed equal to whole", () => {
  for (const dialect of TOOL_DIALECTS) {
    test(dialect.name, () => {
      const sample = REPLIES[dialect.name]!;
      const { reply, markers } = sample;
      const args = sample.args ?? ARGS;
      const named = namedAt(sample);
      let checked = 0;
      for (const k of cutPoints(reply, markers).filter((k) => k >= named)) {
        const cut = reply.slice(0, k);
        const whole = run(dialect, [cut]).calls;
        const context = `cut at ${k} (${JSON.stringify(cut)})`;
        if (whole.length !== 1) throw new Error(`${context}: ${whole.length} calls`);
        expect(whole[0]!.name).toBe("get_weather");
        // The arguments as far as they were written: a prefix of the whole arguments.
        expect(whole[0]!.end).toBeDefined();
        if (!args.startsWith(whole[0]!.end!)) throw new Error(`${context}: arguments ${JSON.stringify(whole[0]!.end)}`);
        expect(whole[0]!.args).toBe(whole[0]!.end!);
        expect(run(dialect, [...cut]).calls).toEqual(whole);
        checked++;
      }
      expect(checked).toBeGreaterThan(10);
    });
  }
});

// What follows a call does not depend on how the reply was chunked: the
// whitespace after a call is held until it turns out to be content.
describe("content between two calls reads the same whole and streamed", () => {
  for (const dialect of TOOL_DIALECTS) {
    test(dialect.name, () => {
      const { reply } = REPLIES[dialect.name]!;
      parseAllWays(dialect, `${reply}\n\nDone?\n${reply}\n`);
    });
  }
});
