// LFM2 / LFM2.5 (Liquid AI) tool calls: a Python list of calls between two
// special tokens, `<|tool_call_start|>[get_weather(city='Oslo', days=3), search(q='x')]<|tool_call_end|>`
// (./python-calls.ts reads and writes the list). LFM2.5-8B-A1B's template
// renders calls this way (strings in single quotes, unescaped; dicts as
// JSON; other values with Python's str()); LFM2's only lists the tools,
// between `<|tool_list_start|>` and `<|tool_list_end|>`, and LFM2.5-Instruct's
// as plain "List of tools: [...]": the models write the same wire (Liquid's
// model cards, and llama.cpp parses all three templates with one parser).
// Text before the list is content; reasoning (`<think>…</think>`) was split
// off before this parser.
import { seekMarker } from "../holdback.ts";
import { callsGrammar, lit, oneOrMore, seq } from "../tool-grammar.ts";
import { ContentGap } from "./events.ts";
import { PythonCallReader, pythonCall } from "./python-calls.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect } from "./types.ts";

const START = "<|tool_call_start|>";
const END = "<|tool_call_end|>";

class Lfm2ToolParser implements ToolCallParser {
  private readonly calls: PythonCallReader;
  private inList = false;
  private readonly gap = new ContentGap();
  /** Outside a list: text not yet emitted. Inside: list text held back as a possible closing marker. */
  private buf = "";

  constructor(newId?: () => string) {
    this.calls = new PythonCallReader(newId);
  }

  push(text: string): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    this.buf += text;
    this.drain(out);
    return out;
  }

  flush(): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    this.drain(out);
    // A list cut off by the end of the reply: a call whose arguments began
    // ends as far as it was written; the rest of the markup is dropped.
    if (this.inList) this.calls.finish(out);
    else this.gap.flush(out, this.buf);
    this.inList = false;
    this.buf = "";
    return out;
  }

  private drain(out: ToolCallEvent[]): void {
    for (;;) {
      if (!this.inList) {
        const found = seekMarker(this.buf, START);
        if (this.gap.wait(out, found.before, found.after !== undefined)) return;
        if (found.after === undefined) {
          this.buf = found.held;
          return;
        }
        this.buf = found.after;
        this.inList = true;
        this.calls.begin();
        continue;
      }
      const found = seekMarker(this.buf, END);
      this.calls.push(found.before, out);
      if (found.after === undefined) {
        this.buf = found.held;
        return;
      }
      this.calls.finish(out);
      this.buf = found.after;
      this.inList = false;
      this.gap.callEnded();
    }
  }
}

export const lfm2: ToolDialect = {
  name: "lfm2",
  // LFM2.5-8B-A1B writes the call markers, LFM2 the tool-list markers,
  // LFM2.5-Instruct only the plain-text tool list (as llama.cpp tells them).
  detect: (template) =>
    template.includes(START) || template.includes("<|tool_list_start|>") || template.includes("List of tools: ["),
  parser: (opts) => new Lfm2ToolParser(opts?.newId),
  forcedGrammar: (tools, parallel) =>
    callsGrammar(tools, pythonCall, (call) =>
      seq(lit(`${START}[`), oneOrMore(call, parallel, lit(", ")), lit(`]${END}`)),
    ),
  trigger: START,
  openers: [START],
};
