// Tool-call events from the reply parser in OpenAI's shapes: whole calls for
// a non-streamed message, partial deltas for a stream (api.md 5.4-5.5).
import type { ToolCallEvent } from "../../codec/tool-calls.ts";

export interface ToolCallOut {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** Gathers a choice's calls across its deltas. */
export class ToolCallCollector {
  private readonly calls = new Map<number, ToolCallOut>();

  add(events: ToolCallEvent[] | undefined): void {
    for (const e of events ?? []) {
      if (e.type === "call-start") this.calls.set(e.index, { id: e.id, type: "function", function: { name: e.name, arguments: "" } });
      else if (e.type === "call-end") this.calls.get(e.index)!.function.arguments = e.arguments;
    }
  }

  /** The finished calls, in index order. */
  done(): ToolCallOut[] {
    return [...this.calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
  }
}

/** One delta's calls as OpenAI stream entries: an opening entry with id and name, then argument fragments on the same index. */
export function streamedToolCalls(events: ToolCallEvent[] | undefined) {
  const out: Record<string, unknown>[] = [];
  for (const e of events ?? []) {
    if (e.type === "call-start") out.push({ index: e.index, id: e.id, type: "function", function: { name: e.name, arguments: "" } });
    else if (e.type === "call-args" && e.text !== "") out.push({ index: e.index, function: { arguments: e.text } });
  }
  return out;
}
