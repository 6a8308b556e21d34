// A choice's neutral deltas as a response's output items
// (docs/api/responses.md#response-object, #streaming): items in the order
// the model produced them (reasoning, message, function_call), each opened,
// grown by deltas and closed, with the stream events that say so. The whole
// response holds the items the same events built, so a client's accumulated
// stream equals the response it would have got unstreamed.
import type { ChoiceDelta } from "../../../pipeline/choice-stream.ts";
import type { Item } from "../../../response-store/store.ts";

/** A stream event before its sequence number. */
export type OutputEvent = { type: string } & Record<string, unknown>;

type Kind = "reasoning" | "message" | "function_call";

/** A call's arguments parse as a JSON object. */
function isObjectJson(args: string): boolean {
  try {
    const parsed = JSON.parse(args === "" ? "{}" : args);
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed);
  } catch {
    return false;
  }
}

export class OutputItems {
  readonly items: Item[] = [];
  /** The open item and, for a call, its index in the parser's numbering. */
  private open?: { kind: Kind; call?: number };
  /** A call whose arguments are held back until they are known to parse. */
  private held?: { index: number; name: string };

  /**
   * `suffix`: the response id's hex, which item ids reuse. `callsValid`: a
   * grammar holds every call to its schema, so argument fragments stream as
   * they come; otherwise a call goes out whole when it closes, as a
   * function_call if its arguments are a JSON object and as text if not.
   * `namespaces`: declared namespaces, whose members' calls are split back
   * into `namespace` and `name`.
   */
  constructor(
    private readonly suffix: string,
    private readonly callsValid: boolean,
    private readonly namespaces: ReadonlySet<string>,
  ) {}

  /** One delta as events: reasoning, then text, then call events (the order the model wrote them within a tick). */
  push(d: ChoiceDelta): OutputEvent[] {
    const out: OutputEvent[] = [];
    if (d.reasoning) this.appendText("reasoning", d.reasoning, out);
    if (d.content) this.appendText("message", d.content, out);
    for (const e of d.calls ?? []) {
      if (e.type === "call-start") {
        this.close("completed", out);
        if (this.callsValid) this.openCall(e.index, e.name, out);
        else this.held = { index: e.index, name: e.name };
      } else if (e.type === "call-args" && e.text !== "") {
        if (this.open?.call === e.index) this.argumentsDelta(e.text, out);
      } else if (e.type === "call-end") {
        if (this.held?.index === e.index) {
          const { name } = this.held;
          this.held = undefined;
          if (!isObjectJson(e.arguments)) {
            this.appendText("message", e.arguments, out);
            continue;
          }
          this.openCall(e.index, name, out);
          if (e.arguments !== "") this.argumentsDelta(e.arguments, out);
        }
        if (this.open?.call !== e.index) continue;
        this.close("completed", out);
      }
    }
    return out;
  }

  /**
   * The end of the reply: the open item closes, `incomplete` when the output cap cut it (a cut call must not be run).
   */
  finish(cut: boolean): OutputEvent[] {
    const out: OutputEvent[] = [];
    this.close(cut ? "incomplete" : "completed", out);
    return out;
  }

  /** The reply's reasoning text, all items together. */
  get reasoningText(): string {
    return this.items
      .filter((i) => i.type === "reasoning")
      .map((i) => (i.content as { text: string }[])[0]!.text)
      .join("");
  }

  private get index(): number {
    return this.items.length - 1;
  }

  private id(prefix: string): string {
    return `${prefix}_${this.suffix}_${this.items.length}`;
  }

  private openItem(kind: Kind, item: Item, out: OutputEvent[], call?: number): void {
    this.items.push(item);
    this.open = { kind, ...(call === undefined ? {} : { call }) };
    out.push({ type: "response.output_item.added", output_index: this.index, item: structuredClone(item) });
  }

  private openCall(index: number, qualified: string, out: OutputEvent[]): void {
    const dot = qualified.indexOf(".");
    const namespace = dot > 0 && this.namespaces.has(qualified.slice(0, dot)) ? qualified.slice(0, dot) : undefined;
    const item: Item = {
      id: this.id("fc"),
      type: "function_call",
      status: "in_progress",
      arguments: "",
      call_id: this.id("call"),
      name: namespace === undefined ? qualified : qualified.slice(dot + 1),
      ...(namespace === undefined ? {} : { namespace }),
    };
    this.openItem("function_call", item, out, index);
  }

  private argumentsDelta(text: string, out: OutputEvent[]): void {
    const item = this.items[this.index]!;
    item.arguments = (item.arguments as string) + text;
    out.push({
      type: "response.function_call_arguments.delta",
      item_id: item.id,
      output_index: this.index,
      delta: text,
    });
  }

  private appendText(kind: "reasoning" | "message", text: string, out: OutputEvent[]): void {
    if (this.open?.kind !== kind) {
      this.close("completed", out);
      const part =
        kind === "reasoning"
          ? { type: "reasoning_text", text: "" }
          : { type: "output_text", text: "", annotations: [], logprobs: [] };
      const item: Item =
        kind === "reasoning"
          ? { id: this.id("rs"), type: "reasoning", summary: [], content: [], status: "in_progress" }
          : { id: this.id("msg"), type: "message", role: "assistant", status: "in_progress", content: [] };
      this.openItem(kind, item, out);
      (item.content as unknown[]).push(part);
      out.push({
        type: "response.content_part.added",
        item_id: item.id,
        output_index: this.index,
        content_index: 0,
        part: structuredClone(part),
      });
    }
    const item = this.items[this.index]!;
    const part = (item.content as { text: string }[])[0]!;
    part.text += text;
    const delta =
      kind === "reasoning"
        ? { type: "response.reasoning_text.delta" }
        : { type: "response.output_text.delta", logprobs: [] };
    out.push({ ...delta, item_id: item.id, output_index: this.index, content_index: 0, delta: text });
  }

  private close(status: "completed" | "incomplete", out: OutputEvent[]): void {
    if (!this.open) return;
    const item = this.items[this.index]!;
    const at = { item_id: item.id, output_index: this.index };
    if (this.open.kind === "function_call") {
      out.push({ type: "response.function_call_arguments.done", ...at, name: item.name, arguments: item.arguments });
    } else {
      const part = (item.content as { text: string }[])[0]!;
      const done =
        this.open.kind === "reasoning"
          ? { type: "response.reasoning_text.done" }
          : { type: "response.output_text.done", logprobs: [] };
      out.push({ ...done, ...at, content_index: 0, text: part.text });
      out.push({ type: "response.content_part.done", ...at, content_index: 0, part: structuredClone(part) });
    }
    item.status = status;
    out.push({ type: "response.output_item.done", output_index: this.index, item: structuredClone(item) });
    this.open = undefined;
  }
}
