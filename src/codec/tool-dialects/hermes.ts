// Hermes-style calls (Qwen 2.5/3, Hermes, SmolLM3 and most ChatML models):
// `<tool_call>{"name": "f", "arguments": {...}}</tool_call>`, one block per call.
import { TaggedJsonToolParser } from "../tool-calls.ts";
import { toolCallGrammar } from "../tool-grammar.ts";
import type { ToolDialect } from "./types.ts";

const WIRE = { open: "<tool_call>", close: "</tool_call>" };

export const hermes: ToolDialect = {
  name: "hermes",
  detect: (template) => template.includes(WIRE.open),
  parser: (newId) => new TaggedJsonToolParser({ ...WIRE, ...(newId ? { newId } : {}) }),
  forcedGrammar: (tools, parallel) => toolCallGrammar(tools, WIRE, parallel),
  trigger: WIRE.open,
  openers: [WIRE.open],
};
