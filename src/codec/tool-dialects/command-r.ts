// Cohere's tool calls, two wires:
//   Command R7B, Cohere2 MoE (North):
//     <|START_ACTION|>[
//         {"tool_call_id": "0", "tool_name": "f", "parameters": {...}},
//         ...
//     ]<|END_ACTION|>
//   with the answer wrapped as <|START_RESPONSE|>…<|END_RESPONSE|> (R7B) or
//   <|START_TEXT|>…<|END_TEXT|> (Cohere2 MoE): every reply is wrapped, so every
//   reply is parsed and the wrapper markers never reach the content. The
//   tool_call_id is the template's running call number, not an id a client
//   sees: calls get ids of their own.
//   Command R+ (tool-use template): `Action:` and a ```json fence holding a list of
//     {"tool_name": "f", "parameters": {...}} objects, closed by ``` (plain text, no special tokens).
//     The template asks for an action on every turn (a `directly-answer` tool when none is
//     needed); that call comes out as a call like any other.
// Reasoning (<|START_THINKING|>…<|END_THINKING|>) is split out before these parsers.
import { partialSuffixLength } from "../holdback.ts";
import { lit, repeat, seq, type CallShape } from "../tool-grammar.ts";
import { emitText } from "./events.ts";
import { JsonListToolParser, callListGrammar, type JsonListWire } from "./json-list.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect } from "./types.ts";

const START_ACTION = "<|START_ACTION|>";
const END_ACTION = "<|END_ACTION|>";
/** The markers that wrap an answer: R7B's and Cohere2 MoE's. */
const CONTENT_MARKERS = ["<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"] as const;

const ACTION_WIRE: JsonListWire = {
  openers: [START_ACTION],
  closer: END_ACTION,
  shape: { kind: "keyed", name: "tool_name", args: "parameters" },
};

/** Passes a parser's events on with the answer's wrapper markers taken out of its text. */
class UnwrappedContent implements ToolCallParser {
  private held = ""; // text ending in what may be the start of a marker

  constructor(
    private readonly inner: ToolCallParser,
    private readonly markers: readonly string[],
  ) {}

  push(text: string): ToolCallEvent[] {
    return this.unwrap(this.inner.push(text), false);
  }

  flush(): ToolCallEvent[] {
    return this.unwrap(this.inner.flush(), true);
  }

  private unwrap(events: ToolCallEvent[], final: boolean): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    for (const e of events) {
      if (e.type !== "text") {
        // Text broken off by a call cannot end in a marker: what is held goes out.
        emitText(out, this.held);
        this.held = "";
        out.push(e);
        continue;
      }
      let text = this.held + e.text;
      for (const m of this.markers) text = text.split(m).join("");
      const keep = partialSuffixLength(text, this.markers);
      emitText(out, text.slice(0, text.length - keep));
      this.held = text.slice(text.length - keep);
    }
    if (final) {
      emitText(out, this.held);
      this.held = "";
    }
    return out;
  }
}

const DIGITS = repeat({ kind: "class", negated: false, ranges: [[0x30, 0x39]] }, 1, 4);

// As the templates render a call: {"tool_call_id": "N", "tool_name": "f", "parameters": {...}}, one per line.
const actionCall: CallShape = (tool, args) =>
  seq(
    lit('{"tool_call_id": "'),
    DIGITS,
    lit(`", "tool_name": ${JSON.stringify(tool.name)}, "parameters": `),
    args,
    lit("}"),
  );

export const commandR: ToolDialect = {
  name: "command-r",
  detect: (template) => template.includes(START_ACTION),
  parser: (opts) => new UnwrappedContent(new JsonListToolParser(ACTION_WIRE, opts?.newId), CONTENT_MARKERS),
  forcedGrammar: (tools, parallel) =>
    callListGrammar(
      tools,
      actionCall,
      { open: `${START_ACTION}[\n    `, sep: lit(",\n    "), close: `\n]${END_ACTION}` },
      parallel,
    ),
  alwaysParse: true,
  trigger: START_ACTION,
  openers: [START_ACTION],
};

const ACTION = "Action:";

const PLUS_WIRE: JsonListWire = {
  openers: [ACTION],
  plainOpeners: true,
  fenced: true,
  shape: { kind: "keyed", name: "tool_name", args: "parameters" },
};

// As the R+ template renders a call (its arguments pretty-printed there, compact here).
const plusCall: CallShape = (tool, args) =>
  seq(lit(`{\n        "tool_name": ${JSON.stringify(tool.name)},\n        "parameters": `), args, lit("\n    }"));

export const commandRPlus: ToolDialect = {
  name: "command-r-plus",
  // R7B's template mentions "Action:" and ```json in its instructions too; its wire is <|START_ACTION|>.
  detect: (template) =>
    template.includes(ACTION) &&
    template.includes("```json") &&
    template.includes('"tool_name"') &&
    template.includes("<|START_OF_TURN_TOKEN|>") &&
    !template.includes(START_ACTION),
  parser: (opts) => new JsonListToolParser(PLUS_WIRE, opts?.newId),
  forcedGrammar: (tools, parallel) =>
    callListGrammar(
      tools,
      plusCall,
      { open: `${ACTION}\n\`\`\`json\n[\n    `, sep: lit(",\n    "), close: "\n]```" },
      parallel,
    ),
  // No lazy trigger: the template has the model open every reply with `Action:`,
  // calling its `directly-answer` tool when no tool is needed; held to the
  // request's tools from `Action:` on, that choice would be taken away.
};
