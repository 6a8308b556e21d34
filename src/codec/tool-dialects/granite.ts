// IBM Granite 3.x tool calls: `<|tool_call|>` and a JSON list of
// `{"name": "f", "arguments": {...}}` objects (the template's system prompt:
// "respond only with <|tool_call|> followed by a JSON list of tools used"; the
// template itself never renders an assistant's calls). The reply ends at
// <|end_of_text|>, so the list has no closing marker. Granite 4.x writes
// Hermes-style `<tool_call>` blocks instead (./hermes.ts).
import { SP, jsonObjectCall, lit, seq } from "../tool-grammar.ts";
import { JsonListToolParser, callListGrammar, type JsonListWire } from "./json-list.ts";
import type { ToolDialect } from "./types.ts";

const TOOL_CALL = "<|tool_call|>";

const WIRE: JsonListWire = { openers: [TOOL_CALL], shape: { kind: "keyed", name: "name", args: "arguments" } };

export const granite: ToolDialect = {
  name: "granite",
  detect: (template) => template.includes(TOOL_CALL) && template.includes("<|start_of_role|>"),
  parser: (opts) => new JsonListToolParser(WIRE, opts?.newId),
  forcedGrammar: (tools, parallel) =>
    callListGrammar(tools, jsonObjectCall(), { open: `${TOOL_CALL}[`, sep: seq(lit(","), SP), close: "]" }, parallel),
  trigger: TOOL_CALL,
  openers: [TOOL_CALL],
};
