// The session API (docs/api/sessions.md): requests on sessions by id, over
// one session log, answered in the externally tagged JSON form. Transports
// (src/web/) hand each request here with the connection it came on; a
// streaming request (Generate, Subscribe) sends its frames through that
// connection and replies last.
//
// Rules kept here:
// - A session with a generation in flight is busy: Generate and the appends
//   are refused with SessionBusy; Fork, Read and Cancel are not.
// - Requests that change one session run one at a time (its lock), so two
//   appends never render against the same history.
// - Everything a reply or a frame carries is durable first: records are
//   flushed before they are shown.
import { join } from "node:path";
import { IncrementalDecoder } from "../codec/index.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import { QOS_NAMES } from "../engine/scheduler.ts";
import { asRequestError } from "../pipeline/request-failure.ts";
import { FIM_DEFAULT_MAX_TOKENS, fimMarkersOf, fimPrompt, fimTargetOf } from "../pipeline/fim-prompt.ts";
import { generateRequest, type GenerationDefaults } from "../pipeline/engine-request.ts";
import type { EventBody, RebaseEdit, SessionEvent } from "../session-log/events.ts";
import type { SessionStore } from "../session-log/store.ts";
import { historyKeyOf, SessionBook, SessionError, type SessionHeader, type SessionView } from "./book.ts";
import { callIdOf, chatToolOf, conversationOf, renderTail, ROLE_NAMES, type TailHints } from "./conversation.ts";
import { startGeneration, type GenerationSink, type GenerationSummary, type RunningGeneration } from "./generate.ts";
import type { ToolChoice } from "../pipeline/tool-plan.ts";
import { Subscriptions, type SubscriberConnection } from "./subscriptions.ts";
import { err, Fields, parseRequest, WireError, wireEvent, type Reply, type WireRequest } from "./wire.ts";

/** One client connection: where streamed frames go, and how its Complete requests are metered. */
export interface SessionConnection extends SubscriberConnection {
  /** The completion bucket this connection draws from (one per ws connection; one for all of /web/rpc). */
  readonly completionKey: string;
  /** Hears a Generate's handle once it runs (a closing connection cancels it). */
  generationStarted?(running: RunningGeneration): void;
}

export interface SessionServiceOptions {
  store: SessionStore;
  /** The model sessions generate on (loaded again if it was unloaded). */
  model: () => Promise<ServedModel>;
  defaults: GenerationDefaults;
  /** --park: seal each session's KV after a generation; the budget sweep runs after each. */
  park?: { dir: string; sweep: () => void };
  /** Meters `Complete` per connection key (the HTTP FIM route's token buckets). */
  completionBuckets: { take(key: string): { ok: boolean; retryAfter: number } };
  metricsText: () => Promise<string>;
}

/** Requests the llama.cpp runtime cannot serve (docs/api/sessions.md#refused-requests). */
const REFUSED: Record<string, string> = {
  AppendImage: "images are not supported on the llama.cpp runtime: no served model has a vision encoder",
  PutMedia: "media (images, audio) are not supported on the llama.cpp runtime",
  GcMedia: "media (images, audio) are not supported on the llama.cpp runtime: there is no media store to collect",
  AppendBlock: "AppendBlock (media and document blocks) is not supported on the llama.cpp runtime",
  Ledger: "Ledger is not served by this server",
  RequestPermission: "RequestPermission is not served by this server",
  RespondPermission: "RespondPermission is not served by this server",
  RequestToolCancel:
    "RequestToolCancel is not served by this server: answer the call with AppendToolOutcome (outcome 2, cancelled)",
  SetBackgroundRate:
    "SetBackgroundRate is not served by this server: the background class's share is set by the scheduler (docs/api/openai.md#qos-classes)",
  SetLogLevel: "SetLogLevel is not served by this server: set the log level with --log-level at start",
};

/**
 * A session's generation from the moment it is being set up: a Cancel that
 * arrives before the engine has it is kept and applied once it does.
 */
class BusySession {
  private run?: RunningGeneration;
  private cancelled = false;
  cancel(): void {
    this.cancelled = true;
    this.run?.cancel();
  }
  started(run: RunningGeneration): void {
    this.run = run;
    if (this.cancelled) run.cancel();
  }
}

export class SessionBusyError extends SessionError {
  constructor(session: number) {
    super(`SessionBusy: session ${session} has a generation in flight`);
  }
}

export class SessionService {
  readonly book: SessionBook;
  private readonly subscriptions: Subscriptions;
  /** Sessions with a generation in flight, from the moment it starts being set up. */
  private readonly running = new Map<number, BusySession>();
  private readonly locks = new Map<number, Promise<unknown>>();
  private readonly pins = new Map<number, number>();

  constructor(private readonly opts: SessionServiceOptions) {
    this.book = new SessionBook(opts.store, (session) => this.running.has(session) || this.locks.has(session));
    this.subscriptions = new Subscriptions(opts.store);
  }

  /** Stops every generation and ends every subscription ("publisher closed"). */
  close(): void {
    for (const generation of this.running.values()) generation.cancel();
    this.subscriptions.closeAll();
    this.book.close();
  }

  /** A connection went away: its subscriptions end. */
  disconnected(conn: SessionConnection): void {
    this.subscriptions.dropConnection(conn);
  }

  /**
   * Answers one request (a parsed JSON value). Generate sends its frames
   * through `conn` before this resolves with the last reply; Subscribe sends
   * its reply itself, before its first events, and resolves with null.
   */
  async handle(value: unknown, conn: SessionConnection, opts: { streaming: boolean }): Promise<Reply | null> {
    let req: WireRequest;
    try {
      req = parseRequest(value);
    } catch (e) {
      return err((e as Error).message);
    }
    if (
      !opts.streaming &&
      (req.variant === "Generate" || req.variant === "Subscribe" || req.variant === "Unsubscribe")
    ) {
      return err(
        `${req.variant} streams its replies: send it on /web/ws${req.variant === "Generate" ? " or as POST /web/stream" : ""}, not on /web/rpc`,
      );
    }
    try {
      return await this.dispatch(req, new Fields(req), conn);
    } catch (e) {
      if (e instanceof WireError || e instanceof SessionError) return err(e.message);
      return err(asRequestError(e).message);
    }
  }

  private async dispatch(req: WireRequest, f: Fields, conn: SessionConnection): Promise<Reply | null> {
    const refused = REFUSED[req.variant];
    if (refused) return err(refused);
    switch (req.variant) {
      case "Create":
        return this.create(f);
      case "Append":
      case "AppendMessage":
      case "AppendSystem":
      case "AppendToolResult":
      case "AppendToolOutcome": {
        const session = f.int("session", 1);
        return this.exclusive(session, () => this.append(req.variant, f, session));
      }
      case "Read": {
        const view = await this.book.view(f.int("session", 1));
        const cursor = f.optionalInt("cursor") ?? 0;
        return {
          Events: { events: (await this.durableEvents(view)).filter((e) => e.event_id >= cursor).map(wireEvent) },
        };
      }
      case "List":
        await this.book.store.flush(); // list only sessions that are on disk
        return { Sessions: { ids: this.book.all().map((h) => h.id) } };
      case "Sessions": {
        const archived = f.bool("include_archived", false);
        await this.book.store.flush();
        const sessions = this.book
          .all()
          .filter((h) => archived || !h.archived)
          .map((h) => ({ id: h.id, ...headerFields(h) }));
        return { SessionList: { sessions } };
      }
      case "Tree":
        await this.book.store.flush();
        return { Tree: { nodes: this.book.all().map((h) => [h.id, h.parent, h.forkAt]) } };
      case "Inspect":
        return this.inspect(f.int("session", 1));
      case "SetMeta":
        return this.setMeta(f);
      case "Purge":
        return this.purge(f);
      case "Generate":
        return this.generate(f.int("session", 1), f.optionalInt("max_tokens", 1), toolChoiceOf(f), conn);
      case "Cancel": {
        const session = f.int("session", 1);
        const running = this.running.get(session);
        if (!running) return err(`nothing is generating on session ${session}`);
        running.cancel();
        return "Cancelling";
      }
      case "Subscribe": {
        const session = f.int("session", 1);
        const view = await this.book.view(session);
        await this.subscriptions.subscribe(conn, view, f.optionalInt("cursor") ?? 0, f.bool("provisional", false));
        return null;
      }
      case "Unsubscribe":
        return this.subscriptions.unsubscribe(conn, f.int("sub"))
          ? "Unsubscribed"
          : err(`no subscription ${f.int("sub")} on this connection`);
      case "Fork": {
        const session = f.int("session", 1);
        return this.fork(session, f.int("at_event", 1), f.params("params", true));
      }
      case "Trim": {
        const session = f.int("session", 1);
        return this.fork(session, f.int("to_event", 1), undefined);
      }
      case "Rebase":
        return this.rebase(f);
      case "OpenToolCalls": {
        const view = await this.book.view(f.int("session", 1));
        return { ToolCalls: { calls: conversationOf(view.events).openCalls } };
      }
      case "SetQos": {
        const session = f.int("session", 1);
        const qos = f.int("class", 0, 3);
        if (f.bool("batch_invariant", false))
          return err(
            "batch_invariant: llama.cpp has no batch-invariant kernels, so no lane can be made batch-invariant on this runtime",
          );
        return this.exclusive(session, async () => {
          const view = await this.book.view(session);
          return { Committed: { event: wireEvent(await this.commit(view, { QosSet: { class: qos } })) } };
        });
      }
      case "Pin": {
        const session = f.int("session", 1);
        await this.book.view(session);
        const ttl = f.int("ttl_ms");
        if (ttl === 0) {
          this.pins.delete(session);
          return { Pinned: { deadline_unix_ms: 0 } };
        }
        const deadline = Date.now() + ttl;
        this.pins.set(session, deadline);
        return { Pinned: { deadline_unix_ms: deadline } };
      }
      case "Complete":
        return this.complete(f, conn);
      case "Metrics":
        return { Text: { text: await this.opts.metricsText() } };
      default:
        return err(`unknown request '${req.variant}' (docs/api/sessions.md lists the requests)`);
    }
  }

  /** Runs `work` after every earlier change to the session has finished. */
  private exclusive<T>(session: number, work: () => Promise<T>): Promise<T> {
    const before = this.locks.get(session) ?? Promise.resolve();
    const result = before.then(work, work);
    const settled = result.catch(() => {});
    this.locks.set(session, settled);
    void settled.then(() => {
      if (this.locks.get(session) === settled) this.locks.delete(session);
    });
    return result;
  }

  /** Appends one record and makes it durable. */
  private async commit(view: SessionView, body: EventBody): Promise<SessionEvent> {
    const event = await this.book.append(view, body);
    await this.book.store.flush();
    return event;
  }

  /** The session's events that are on disk (a flush first; records appended meanwhile wait for their own). */
  private async durableEvents(view: SessionView): Promise<SessionEvent[]> {
    const count = view.events.length;
    await this.book.store.flush();
    return view.events.slice(0, count);
  }

  private async create(f: Fields): Promise<Reply> {
    const params = f.params("params", false)!;
    const parent = f.optionalInt("parent", 1);
    if (parent !== undefined && !this.book.header(parent))
      throw new SessionError(`Create.parent: no session ${parent}`);
    const view = this.book.create({ Created: { parent: parent ?? null, params: { ...params } } }, 0, params);
    await this.book.store.flush();
    return { Created: { session: view.header.id } };
  }

  private async append(variant: string, f: Fields, session: number): Promise<Reply> {
    if (this.running.has(session)) throw new SessionBusyError(session);
    const view = await this.book.view(session);
    this.book.checkWritable(view);
    const model = await this.opts.model();
    const conversation = conversationOf(view.events);
    const tools = () => conversation.tools.map((t, i) => chatToolOf(t, `tools[${i}]`));
    const hints: TailHints = {
      ...(view.rendered?.messages === conversation.messages.length ? { known: view.rendered.tokens } : {}),
      historyKey: historyKeyOf(this.book.store.storeId, view),
    };
    let rendered: number[] | undefined;
    let body: EventBody;
    switch (variant) {
      case "Append": {
        const text = f.optionalString("text");
        let span = f.has("span") ? f.tokenIds("span", model.tokenizer.vocabInfo.size) : [];
        if (span.length === 0 && text !== undefined)
          span = Array.from(await model.prompts.tokenize(text, { addSpecial: false, parseSpecial: false }));
        if (span.length === 0) throw new WireError("Append: give a span of token ids, or text");
        body = { Appended: { text: text ?? textOf(model, span), span } };
        break;
      }
      case "AppendMessage": {
        const role = f.int("role", 0, 3);
        const text = f.string("text");
        const tail = await renderTail(
          model,
          conversation,
          tools(),
          [{ role: ROLE_NAMES[role]!, content: text }],
          false,
          hints,
        );
        rendered = tail.rendered;
        body = { Message: { role, text, span: tail.span } };
        break;
      }
      case "AppendSystem": {
        const text = f.optionalString("text") ?? "";
        const declared = f.has("tools") ? f.strings("tools") : [];
        const parsed = declared.map((t, i) => {
          try {
            return chatToolOf(t, `AppendSystem.tools[${i}]`);
          } catch (e) {
            throw new WireError((e as Error).message);
          }
        });
        if (conversation.stream.length > 0 || conversation.messages.length > 0) {
          throw new SessionError(
            "AppendSystem opens a session: this one already has input (templates declare tools only in the first turn; fork from event 1 or create a new session)",
          );
        }
        const tail = await renderTail(
          model,
          { ...conversation, tools: declared },
          parsed,
          [{ role: "system", content: text }],
          false,
        );
        rendered = tail.rendered;
        body = { Message: { role: 0, text, span: tail.span, ...(declared.length > 0 ? { tools: declared } : {}) } };
        break;
      }
      default: {
        const callId = f.int("call_id");
        const call = conversation.openCalls.find(([id]) => id === callId);
        if (!call)
          throw new SessionError(
            `${variant}.call_id: ${callId} is not an open tool call of session ${session} (OpenToolCalls lists them)`,
          );
        let content: string;
        let outcome: number | undefined;
        if (variant === "AppendToolResult") content = f.string("content");
        else {
          outcome = f.int("outcome", 1, 2);
          content =
            f.optionalString("note") ?? (outcome === 1 ? "the tool call failed" : "the tool call was cancelled");
        }
        const tail = await renderTail(
          model,
          conversation,
          tools(),
          [{ role: "tool", tool_call_id: callIdOf(callId), content }],
          false,
          hints,
        );
        rendered = tail.rendered;
        body = {
          ToolResult: { call_id: callId, content, span: tail.span, ...(outcome === undefined ? {} : { outcome }) },
        };
      }
    }
    const added =
      "Appended" in body
        ? body.Appended.span
        : "Message" in body
          ? body.Message.span
          : "ToolResult" in body
            ? body.ToolResult.span
            : [];
    if (conversation.stream.length + added.length >= model.contextWindow) {
      throw new SessionError(
        `session ${session} would be longer than the model's window of ${model.contextWindow} tokens`,
      );
    }
    const event = await this.commit(view, body);
    view.rendered = rendered && { messages: conversation.messages.length + 1, tokens: rendered };
    return { Committed: { event: wireEvent(event) } };
  }

  private async inspect(session: number): Promise<Reply> {
    const view = await this.book.view(session);
    await this.book.store.flush();
    const c = conversationOf(view.events);
    const h = view.header;
    const pin = this.pins.get(session);
    return {
      Inspection: {
        inspection: {
          session: h.id,
          ...headerFields(h),
          tokens: c.stream.length,
          messages: c.messages.length,
          busy: this.running.has(session),
          params: view.params,
          qos: QOS_NAMES[c.qos ?? 2],
          open_turn: c.openTurn !== null,
          open_tool_calls: c.openCalls.length,
          pinned_until_unix_ms: pin !== undefined && pin > Date.now() ? pin : null,
        },
      },
    };
  }

  private async setMeta(f: Fields): Promise<Reply> {
    const session = f.int("session", 1);
    return this.exclusive(session, async () => {
      const view = await this.book.view(session);
      const h = view.header;
      const expected = f.optionalInt("expected_version");
      if (expected !== undefined && expected !== h.version)
        throw new SessionError(
          `SetMeta.expected_version: session ${session} is at version ${h.version}, not ${expected}`,
        );
      const title = f.has("title") ? f.string("title") : h.title;
      const archived = f.optionalBool("archived") ?? h.archived;
      const version = h.version + 1;
      this.book.store.appendGlobal({ SessionMeta: { session, version, title, archived } });
      await this.book.store.flush();
      return { Meta: { version } };
    });
  }

  private async purge(f: Fields): Promise<Reply> {
    const session = f.int("session", 1);
    const mode = f.string("mode");
    if (mode !== "Cascade" && mode !== "Reroot")
      throw new WireError(`Purge.mode: expected "Cascade" or "Reroot", got '${mode}'`);
    // After the session's appends and generation set-ups in flight, so none commits into it once purged.
    return this.exclusive(session, () => this.purgeNow(f, session, mode));
  }

  private async purgeNow(f: Fields, session: number, mode: "Cascade" | "Reroot"): Promise<Reply> {
    const h = this.book.header(session);
    if (!h) throw new SessionError(`no session ${session}`);
    const expected = f.optionalInt("expected_generation");
    if (expected !== undefined && expected !== h.events)
      throw new SessionError(`Purge.expected_generation: session ${session} has ${h.events} events, not ${expected}`);
    const sessions = mode === "Cascade" ? [session, ...this.book.descendants(session)] : [session];
    const busy = sessions.find((s) => this.running.has(s));
    if (busy !== undefined) throw new SessionBusyError(busy);
    this.book.store.appendGlobal({ Purged: { sessions, mode } });
    await this.book.store.flush();
    for (const s of sessions) {
      this.subscriptions.endSession(s, "purged");
      this.pins.delete(s);
    }
    return { Purged: { sessions } };
  }

  private async fork(session: number, at: number, params: SessionView["params"] | undefined): Promise<Reply> {
    const view = await this.book.view(session);
    const events = await this.durableEvents(view);
    if (at > events.length)
      throw new SessionError(`session ${session} has ${events.length} committed events: fork at 1 to ${events.length}`);
    const kept = params ?? view.params;
    const child = this.book.create(
      { Forked: { parent: session, fork_at: at, params: { ...kept } } },
      at,
      kept,
      events.slice(0, at),
    );
    await this.book.store.flush();
    return { Created: { session: child.header.id } };
  }

  private async rebase(f: Fields): Promise<Reply> {
    const session = f.int("session", 1);
    const view = await this.book.view(session);
    const events = await this.durableEvents(view);
    const edits = f.array("edits").map((raw, i) => editOf(raw, i, events.length));
    if (edits.length === 0) throw new WireError("Rebase.edits: give at least one edit (Trim keeps a prefix)");
    for (let i = 1; i < edits.length; i++) {
      if (rangeOf(edits[i]!).from < rangeOf(edits[i - 1]!).to)
        throw new WireError("Rebase.edits: ranges must be sorted and must not overlap");
    }
    const params = f.params("params", true) ?? view.params;
    const forkAt = rangeOf(edits[0]!).from;
    const model = await this.opts.model();
    const child = this.book.create(
      { Rebased: { parent: session, fork_at: forkAt, params: { ...params }, edits } },
      forkAt,
      params,
      events.slice(0, forkAt),
    );
    // The copy runs under the child's lock: an append on the new id waits for it.
    return this.exclusive(child.header.id, () => this.copyRebased(model, child, events, edits, forkAt));
  }

  private async copyRebased(
    model: ServedModel,
    child: SessionView,
    events: SessionEvent[],
    edits: RebaseEdit[],
    forkAt: number,
  ): Promise<Reply> {
    const callIds = new Map<number, number>();
    for (let i = forkAt; i < events.length; i++) {
      const edit = edits.find((e) => rangeOf(e).from <= i && i < rangeOf(e).to);
      if (edit && "Replace" in edit) {
        if (i !== edit.Replace.from) continue;
        const conversation = conversationOf(child.events);
        const tools = conversation.tools.map((t, k) => chatToolOf(t, `tools[${k}]`));
        const tail = await renderTail(
          model,
          conversation,
          tools,
          [{ role: ROLE_NAMES[edit.Replace.role]!, content: edit.Replace.text }],
          false,
        );
        await this.book.append(child, {
          Message: { role: edit.Replace.role, text: edit.Replace.text, span: tail.span },
        });
        continue;
      }
      if (edit) continue;
      const event = events[i]!;
      let body = event.body;
      // A parent's own opening record (a fork's Forked) is not an event of the conversation to copy.
      if ("Created" in body || "Forked" in body || "Rebased" in body) continue;
      if ("ToolResult" in body) {
        const callId = body.ToolResult.call_id;
        // Calls before the first edit keep their ids; a result whose call was dropped goes with it.
        if (callId >= forkAt && !callIds.has(callId)) continue;
        body = { ToolResult: { ...body.ToolResult, call_id: callIds.get(callId) ?? callId } };
      }
      const copied = await this.book.append(child, body);
      if ("ToolUse" in body) callIds.set(event.event_id, copied.event_id);
    }
    await this.book.store.flush();
    return { Created: { session: child.header.id } };
  }

  private async generate(
    session: number,
    maxTokens: number | undefined,
    toolChoice: ToolChoice,
    conn: SessionConnection,
  ): Promise<Reply> {
    const summary = await this.runGeneration(
      session,
      maxTokens,
      { committed: (event) => conn.send({ Delta: { event: wireEvent(event) } }) },
      (running) => conn.generationStarted?.(running),
      toolChoice,
    );
    return { Generated: { ...summary, events: summary.events.map(wireEvent) } };
  }

  /**
   * Runs one generation on a session, streaming its committed events to
   * `sink` (and to subscribers); used by Generate on /web/ws and by /web/stream.
   * `started` hears the handle, so a transport can cancel it when its client goes.
   */
  async runGeneration(
    session: number,
    maxTokens: number | undefined,
    sink: GenerationSink,
    started?: (running: RunningGeneration) => void,
    toolChoice: ToolChoice = "auto",
  ): Promise<GenerationSummary> {
    const busy = new BusySession();
    const running = await this.exclusive(session, async () => {
      if (this.running.has(session)) throw new SessionBusyError(session);
      const view = await this.book.view(session);
      this.book.checkWritable(view);
      this.running.set(session, busy);
      try {
        return await this.setUpGeneration(session, view, maxTokens, sink, toolChoice);
      } catch (err) {
        this.running.delete(session);
        throw err;
      }
    });
    busy.started(running);
    started?.(running);
    try {
      return await running.done;
    } finally {
      this.running.delete(session);
    }
  }

  private async setUpGeneration(
    session: number,
    view: SessionView,
    maxTokens: number | undefined,
    sink: GenerationSink,
    toolChoice: ToolChoice,
  ): Promise<RunningGeneration> {
    const park = this.opts.park;
    const pin = this.pins.get(session);
    const deps = {
      model: await this.opts.model(),
      book: this.book,
      defaults: this.opts.defaults,
      ...(park ? { parkPath: (s: number) => join(park.dir, `${s}.park`), parked: park.sweep } : {}),
      ...(pin !== undefined && pin > Date.now() ? { pinTtlMs: pin - Date.now() } : {}),
    };
    // Text ahead of its commit goes to the caller and to the session's subscribers.
    const fanOut: GenerationSink = {
      committed: (event) => sink.committed(event),
      provisional: (channel, text) => {
        sink.provisional?.(channel, text);
        this.subscriptions.provisional(session, channel, text);
      },
    };
    return startGeneration(deps, view, maxTokens, fanOut, toolChoice);
  }

  private async complete(f: Fields, conn: SessionConnection): Promise<Reply> {
    const prefix = f.string("prefix");
    const suffix = f.optionalString("suffix") ?? "";
    const mode = f.int("mode", 0, 1) === 1 ? "spm" : "psm";
    const maxTokens = f.optionalInt("max_tokens", 1) ?? FIM_DEFAULT_MAX_TOKENS;
    const taken = this.opts.completionBuckets.take(conn.completionKey);
    if (!taken.ok) return { Throttled: { retry_after_ms: taken.retryAfter * 1000 } };
    const model = fimTargetOf(await this.opts.model(), "Complete");
    const prompt = await fimPrompt(model, fimMarkersOf(model.info.fimTokens)!, prefix, suffix, mode);
    const request = generateRequest(this.opts.defaults, model, prompt, { sampling: {}, maxTokens, qos: 1 });
    const result = await model.worker.generate(request, { durable: false }).result();
    if (result.reason === "error") throw new SessionError(`Complete failed: ${result.error ?? "generation failed"}`);
    return {
      Completion: {
        text: textOf(model, result.tokens),
        tokens: result.completionTokens,
        cached: result.cachedTokens,
        expired: result.reason === "expired",
      },
    };
  }
}

/** What Sessions and Inspect show of a session's header. */
function headerFields(h: SessionHeader): Record<string, unknown> {
  return {
    parent: h.parent,
    fork_at: h.forkAt,
    title: h.title,
    archived: h.archived,
    version: h.version,
    events: h.events,
    updated_unix_ms: h.updatedUnixMs,
    source: h.source,
  };
}

/** Token ids as text. */
function textOf(model: ServedModel, tokens: number[]): string {
  const decoder = new IncrementalDecoder(model.tokenizer);
  return decoder.push(tokens) + decoder.flush();
}

/**
 * Generate's `tool_choice` (beyond the spec, as OpenAI's): "auto" (the
 * default), "none", "required", or {"name"} to force one declared tool.
 */
export function toolChoiceOf(f: Fields): ToolChoice {
  if (!f.has("tool_choice")) return "auto";
  const raw = f.raw("tool_choice");
  if (raw === "auto" || raw === "none" || raw === "required") return raw;
  if (typeof raw === "object" && raw !== null && typeof (raw as { name?: unknown }).name === "string")
    return { name: (raw as { name: string }).name };
  throw new WireError(
    `Generate.tool_choice: expected "auto", "none", "required" or {"name": "<tool>"}, got ${JSON.stringify(raw)}`,
  );
}

function rangeOf(edit: RebaseEdit): { from: number; to: number } {
  return "Drop" in edit ? edit.Drop : edit.Replace;
}

/** One Rebase edit, checked: a half-open range within the session, never event 0. */
function editOf(raw: unknown, i: number, events: number): RebaseEdit {
  const field = `Rebase.edits[${i}]`;
  const req = parseRequest(raw);
  const f = new Fields({ variant: field, fields: req.fields });
  const from = f.int("from", 1, events);
  const to = f.int("to", from + 1, events);
  if (req.variant === "Drop") return { Drop: { from, to } };
  if (req.variant === "Replace") return { Replace: { from, to, role: f.int("role", 0, 3), text: f.string("text") } };
  throw new WireError(`${field}: an edit is {"Drop":{...}} or {"Replace":{...}}, got '${req.variant}'`);
}
