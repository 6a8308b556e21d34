// Llama 3.1/3.2/3.3 JSON tool calls: the reply is `{"name": "f", "parameters": {...}}`
// (some models write "arguments"), optionally after `<|python_tag|>`, several calls
// separated by `;` or newlines. The reply ends at <|eot_id|>/<|eom_id|>, where the
// engine stops, so the parser never sees those.
//
// Streaming: a reply that starts with `{` is held until the object closes, then comes
// out as one call (arguments whole, not progressively) or, if it is not a call, as text.
// Anything else is content, streamed as it arrives.
import { forcedCallGrammar, jsonObjectCall, lit, oneOrMore } from "../tool-grammar.ts";
import { jsonValueEnd } from "../json-scan.ts";
import { CallWriter } from "./call-writer.ts";
import { emitText } from "./events.ts";
import { parseJsonCall } from "./generic-json.ts";
import { cutJsonCall } from "./cut-call.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect } from "./types.ts";

const PYTHON_TAG = "<|python_tag|>";
/** The key of a call's arguments: "parameters" as the templates write it, "arguments" as some models do. */
const ARGUMENT_KEYS = ["parameters", "arguments"] as const;

class Llama3ToolParser implements ToolCallParser {
  private held = ""; // text not yet emitted, from the last decision point
  private mode: "lead" | "object" | "text" = "lead";
  private objStart = 0; // offset of the candidate's `{` in held (mode "object")
  private readonly calls: CallWriter;

  constructor(newId?: () => string) {
    this.calls = new CallWriter(newId);
  }

  push(text: string): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    if (this.mode === "text") emitText(out, text);
    else {
      this.held += text;
      this.drain(out);
    }
    return out;
  }

  flush(): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    if (this.mode !== "text") {
      this.drain(out);
      // Separators after a call are dropped. A call cut off by the end of the
      // reply is a partial call once its arguments began (./cut-call.ts);
      // before that (an unclosed object, a partial tag) it is dropped: call
      // markup is never content. Anything else left (leading whitespace of an
      // empty reply) is content.
      const onlySeparators = this.mode === "lead" && this.calls.started > 0 && /^[\s;]*$/.test(this.held);
      const cutCall =
        this.mode === "object" ||
        (this.mode === "lead" && this.held.trim() !== "" && PYTHON_TAG.startsWith(this.held.trim()));
      const partial = this.mode === "object" ? cutJsonCall(this.held.slice(this.objStart), ARGUMENT_KEYS) : undefined;
      if (partial) this.calls.whole(partial, out);
      else if (!onlySeparators && !cutCall) emitText(out, this.held);
      this.held = "";
      this.mode = "text";
    }
    return out;
  }

  private toText(out: ToolCallEvent[]): void {
    this.mode = "text";
    emitText(out, this.held);
    this.held = "";
  }

  private drain(out: ToolCallEvent[]): void {
    for (;;) {
      if (this.mode === "lead") {
        const s = this.held;
        let i = 0;
        const sep = this.calls.started > 0 ? /[\s;]/ : /\s/; // `;` only between calls
        while (i < s.length && sep.test(s[i]!)) i++;
        if (s.startsWith(PYTHON_TAG, i)) {
          i += PYTHON_TAG.length;
          while (i < s.length && /\s/.test(s[i]!)) i++;
        }
        if (i === s.length) return;
        if (s[i] !== "{") {
          if (PYTHON_TAG.startsWith(s.slice(i))) return; // maybe the tag, still arriving
          this.toText(out);
          return;
        }
        this.mode = "object";
        this.objStart = i;
      }
      if (this.mode !== "object") return;
      const end = jsonValueEnd(this.held, this.objStart);
      if (end < 0) return;
      const call = parseJsonCall(this.held.slice(this.objStart, end));
      if (!call) {
        this.toText(out);
        return;
      }
      this.calls.whole(call, out);
      this.held = this.held.slice(end);
      this.mode = "lead";
    }
  }
}

export const llama3: ToolDialect = {
  name: "llama3",
  detect: (template) =>
    template.includes(PYTHON_TAG) ||
    (template.includes("<|start_header_id|>") && /"name"\s*:/.test(template) && /"parameters"\s*:/.test(template)),
  parser: (opts) => new Llama3ToolParser(opts?.newId),
  forcedGrammar: (tools, parallel) =>
    forcedCallGrammar(tools, jsonObjectCall("parameters"), (call) => oneOrMore(call, parallel, lit("; "))),
  openers: [PYTHON_TAG],
};
