// Writing one reply's calls as events: every parser numbers its calls from 0,
// gives each an id, and streams its arguments as fragments. What went out
// cannot be taken back, so a call's arguments only ever grow: a later, better
// reading (the trailing-comma repair of a closed object) goes out only where
// it extends what was sent, and the call ends with what was sent otherwise.
import { jsonValueEnd, removeTrailingCommas } from "../json-scan.ts";
import { argumentsSoFar } from "./cut-call.ts";
import { emitCall } from "./events.ts";
import { newCallId } from "./ids.ts";
import type { ToolCallEvent } from "./types.ts";

/** A call whose call-start went out. */
export interface OpenCall {
  readonly index: number;
  /** The arguments text sent so far (its call-args, joined). */
  streamed: string;
}

export class CallWriter {
  private count = 0;

  constructor(private readonly newId: () => string = newCallId) {}

  /** Calls started so far (whole ones included). */
  get started(): number {
    return this.count;
  }

  /** call-start: the next index, and `id` where the wire wrote one of its own. */
  start(name: string, out: ToolCallEvent[], id?: string): OpenCall {
    const index = this.count++;
    out.push({ type: "call-start", index, id: id ?? this.newId(), name });
    return { index, streamed: "" };
  }

  /** A call known whole: start, arguments and end at once. */
  whole(call: { name: string; args: string }, out: ToolCallEvent[], id?: string): void {
    emitCall(out, this.count++, id ?? this.newId(), call);
  }

  /** The next fragment of the arguments. */
  send(call: OpenCall, text: string, out: ToolCallEvent[]): void {
    if (!text) return;
    call.streamed += text;
    out.push({ type: "call-args", index: call.index, text });
  }

  /** The arguments as far as they can be told: what extends what was sent goes out. */
  sendSoFar(call: OpenCall, soFar: string, out: ToolCallEvent[]): void {
    if (soFar.startsWith(call.streamed)) this.send(call, soFar.slice(call.streamed.length), out);
  }

  /** A JSON arguments object as far as `written` shows it (./cut-call.ts). */
  sendJson(call: OpenCall, written: string, out: ToolCallEvent[]): void {
    this.sendSoFar(call, argumentsSoFar(written), out);
  }

  /** call-end: with `args` where it extends what was sent (the rest goes out first), else with what was sent. */
  end(call: OpenCall, out: ToolCallEvent[], args = call.streamed): void {
    this.sendSoFar(call, args, out);
    out.push({ type: "call-end", index: call.index, arguments: call.streamed });
  }

  /**
   * Ends a JSON-arguments call at `written` (from the object's `{`): with the
   * object once it closed (trailing commas repaired), else with what was sent
   * (a cut or broken call: not valid JSON, so never run).
   */
  endJson(call: OpenCall, written: string, out: ToolCallEvent[]): void {
    this.sendJson(call, written, out);
    const end = jsonValueEnd(written, 0);
    this.end(call, out, end >= 0 ? removeTrailingCommas(written.slice(0, end)) : call.streamed);
  }
}
