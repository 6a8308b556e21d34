// Apertus tool calls: `<|tools_prefix|>[{"f": {...}}, ...]<|tools_suffix|>`,
// each call an object whose one key is the function's name (the template
// writes '{"' + name + '": ' + arguments|tojson + '}', joined by ', ').
// The tool outputs follow `<|tools_suffix|>` in the same assistant turn, so
// the reply has to stop at that marker.
import { lit, seq, type CallShape } from "../tool-grammar.ts";
import { JsonListToolParser, callListGrammar, type JsonListWire } from "./json-list.ts";
import type { ToolDialect } from "./types.ts";

const PREFIX = "<|tools_prefix|>";
const SUFFIX = "<|tools_suffix|>";

const WIRE: JsonListWire = { openers: [PREFIX], closer: SUFFIX, shape: { kind: "name-as-key" } };

const nameAsKeyCall: CallShape = (tool, args) => seq(lit(`{${JSON.stringify(tool.name)}: `), args, lit("}"));

export const apertus: ToolDialect = {
  name: "apertus",
  detect: (template) => template.includes(PREFIX) && template.includes(SUFFIX),
  parser: (opts) => new JsonListToolParser(WIRE, opts?.newId),
  forcedGrammar: (tools, parallel) =>
    callListGrammar(tools, nameAsKeyCall, { open: `${PREFIX}[`, sep: lit(", "), close: `]${SUFFIX}` }, parallel),
  trigger: PREFIX,
  openers: [PREFIX],
  stops: [SUFFIX],
};
