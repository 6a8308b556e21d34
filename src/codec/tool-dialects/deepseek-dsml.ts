// DeepSeek V3.2 and V4 tool calls: the "DSML" markup, tags whose names carry
// the `｜DSML｜` special token (fullwidth bars U+FF5C). As the templates
// write an assistant turn's calls, after its content:
//   \n\n<｜DSML｜function_calls>\n
//   <｜DSML｜invoke name="NAME">\n
//   <｜DSML｜parameter name="P" string="true">raw text</｜DSML｜parameter>\n
//   <｜DSML｜parameter name="Q" string="false">JSON</｜DSML｜parameter>\n
//   </｜DSML｜invoke>\n
//   …
//   </｜DSML｜function_calls>
// V4 names the block `tool_calls` and writes an extra newline in a call
// without arguments. A string value is written as it is (no quoting, no
// escaping) with string="true"; any other as JSON with string="false". The
// parser and grammar builder are ./tagged-params.ts's.
import { lit, NL, repeat, seq } from "../tool-grammar.ts";
import { type TaggedLayout, TaggedParamParser, type TaggedWire, taggedCallsGrammar } from "./tagged-params.ts";
import type { ToolDialect } from "./types.ts";

const DSML = "｜DSML｜";

/** The calls block's tags, by the name each generation gives it. */
const block = (name: string) => ({ open: `<${DSML}${name}>`, close: `</${DSML}${name}>` });
export const DSML_BLOCKS = { v32: block("function_calls"), v4: block("tool_calls") } as const;

const INVOKE_CLOSE = `</${DSML}invoke>`;
const PARAM_CLOSE = `</${DSML}parameter>`;

const WIRE: TaggedWire = {
  // Either generation's block is read: a model may write the other's name.
  blockOpens: [DSML_BLOCKS.v32.open, DSML_BLOCKS.v4.open],
  blockCloses: [DSML_BLOCKS.v32.close, DSML_BLOCKS.v4.close],
  call: { open: `<${DSML}invoke`, tag: /^<｜DSML｜invoke\s+name="([^"<>]*)"\s*>/, close: INVOKE_CLOSE },
  param: {
    open: `<${DSML}parameter`,
    // string= may be missing (the schema then types the value).
    tag: /^<｜DSML｜parameter\s+name="([^"<>]*)"(?:\s+string="(true|false)")?\s*>/,
    close: PARAM_CLOSE,
    mark: (tag) => (tag[2] === "true" ? "string" : tag[2] === "false" ? "json" : undefined),
  },
  tokens: [DSML],
};

function layout(blockName: "v32" | "v4"): TaggedLayout {
  const tags = DSML_BLOCKS[blockName];
  return {
    callOpen: (name) => lit(`<${DSML}invoke name="${name}">\n`),
    paramOpen: (key, value) => lit(`<${DSML}parameter name="${key}" string="${value.string}">`),
    paramClose: PARAM_CLOSE,
    paramAfter: "\n",
    // V4 writes a newline in place of no arguments.
    callClose: blockName === "v4" ? seq(NL, lit(`${INVOKE_CLOSE}\n`)) : lit(`${INVOKE_CLOSE}\n`),
    // The template's "\n\n" before the block, optional: the trigger is the block's tag.
    block: (calls) => seq(repeat(lit("\n\n"), 0, 1), lit(`${tags.open}\n`), calls, lit(tags.close)),
  };
}

// Both templates define `dsml_token = '｜DSML｜'` and write `invoke name=`.
const usesDsml = (template: string): boolean => template.includes(DSML) && template.includes("invoke name=");

function dsmlDialect(name: string, blockName: "v32" | "v4", detect: (template: string) => boolean): ToolDialect {
  const tags = DSML_BLOCKS[blockName];
  const callLayout = layout(blockName);
  return {
    name,
    detect,
    parser: (opts) => new TaggedParamParser(WIRE, opts),
    forcedGrammar: (tools, parallel) => taggedCallsGrammar(tools, parallel, callLayout),
    trigger: tags.open,
    // `｜DSML｜` is one special token, written only in call markup.
    openers: [tags.open, DSML],
  };
}

/** V3.2: the block is `function_calls`. */
export const deepseekV32 = dsmlDialect(
  "deepseek-v3.2",
  "v32",
  (template) => usesDsml(template) && template.includes("function_calls"),
);

/** V4 (and V4 Flash): the block is `tool_calls`. */
export const deepseekV4 = dsmlDialect(
  "deepseek-v4",
  "v4",
  (template) => usesDsml(template) && !template.includes("function_calls") && template.includes("tool_calls"),
);
