// Building a parser's event list: adjacent text merges into one event, and a
// call known whole comes out as start, arguments and end.
import type { ToolCallEvent } from "./types.ts";

export function emitText(out: ToolCallEvent[], text: string): void {
  if (!text) return;
  const last = out[out.length - 1];
  if (last && last.type === "text") last.text += text;
  else out.push({ type: "text", text });
}

export function emitCall(out: ToolCallEvent[], index: number, id: string, call: { name: string; args: string }): void {
  out.push({ type: "call-start", index, id, name: call.name });
  if (call.args) out.push({ type: "call-args", index, text: call.args });
  out.push({ type: "call-end", index, arguments: call.args });
}
