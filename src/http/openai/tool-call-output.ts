// Tool-call events from the reply parser in OpenAI's shapes: whole calls for
// a non-streamed message, partial deltas for a stream (docs/api/openai.md#chat-streaming).
import type { ToolCallEvent } from "../../codec/tool-dialects/index.ts";

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
      if (e.type === "call-start")
        this.calls.set(e.index, { id: e.id, type: "function", function: { name: e.name, arguments: "" } });
      else if (e.type === "call-end") this.calls.get(e.index)!.function.arguments = e.arguments;
    }
  }

  /** The finished calls, in index order. */
  done(): ToolCallOut[] {
    return [...this.calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
  }
}

interface StreamedCall {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
}

/**
 * One delta's calls as OpenAI stream entries, one entry per call index as
 * OpenAI sends them: the opening entry carries id and name (and whatever
 * arguments arrived with it), later entries argument fragments.
 */
export function streamedToolCalls(events: ToolCallEvent[] | undefined): StreamedCall[] {
  const out: StreamedCall[] = [];
  const byIndex = new Map<number, StreamedCall>();
  for (const e of events ?? []) {
    if (e.type === "call-start") {
      const entry: StreamedCall = {
        index: e.index,
        id: e.id,
        type: "function",
        function: { name: e.name, arguments: "" },
      };
      byIndex.set(e.index, entry);
      out.push(entry);
    } else if (e.type === "call-args" && e.text !== "") {
      const entry = byIndex.get(e.index);
      if (entry) entry.function.arguments += e.text;
      else {
        const fresh: StreamedCall = { index: e.index, function: { arguments: e.text } };
        byIndex.set(e.index, fresh);
        out.push(fresh);
      }
    }
  }
  return out;
}
