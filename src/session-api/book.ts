// The sessions of one session log, by id (docs/api/sessions.md): a header per
// session for List, Sessions and Tree (read from the log once, then kept up
// to date from each record as it becomes durable), and the full event list of
// the sessions a client touches, loaded from the log on first use. A fork's
// history is its parent's events before the fork point followed by its own.
// Metadata (title, archived) and purges are store-wide records, so the
// session's own event ids stay those of its conversation.
import type { EventBody, SessionEvent, SessionParams } from "../session-log/events.ts";
import { scanLog } from "../session-log/wal.ts";
import type { SessionStore } from "../session-log/store.ts";

export interface SessionHeader {
  id: number;
  parent: number | null;
  /** Events shared with the parent (a fork's first own event id); null for a new conversation. */
  forkAt: number | null;
  /** The session's next event id (the length of its Read from 0). */
  events: number;
  updatedUnixMs: number;
  title: string | null;
  archived: boolean;
  /** SetMeta's version: 0 until the first SetMeta. */
  version: number;
  purged: boolean;
  /** Who made it: a session-API request, or an HTTP generation (every one is a session). */
  source: "session" | "http";
}

/** A session the client touched: its whole history, kept in memory. */
export interface SessionView {
  header: SessionHeader;
  params: SessionParams;
  events: SessionEvent[];
  /**
   * The template's render of the session's first `messages` messages (no generation prompt), from its last append: the
   * next Generate starts from it.
   */
  rendered?: { messages: number; tokens: number[] };
}

/**
 * The key a session's history renders are remembered under (continued-prompt.ts), for its state after `events` events.
 */
export function historyKeyOf(storeId: string, view: SessionView): string {
  return `session:${storeId}:${view.header.id}:${view.events.length}`;
}

export class SessionError extends Error {}

/** The params a record carries, when it carries a complete set (HTTP generations record theirs in another shape). */
export function paramsOf(raw: Record<string, unknown> | undefined): SessionParams | undefined {
  if (!raw) return undefined;
  const sampling = (raw.sampling ?? raw) as Record<string, unknown>;
  const fields = ["temperature", "top_p", "min_p", "top_k", "seed"] as const;
  if (fields.some((f) => typeof sampling[f] !== "number")) return undefined;
  return {
    temperature: sampling.temperature as number,
    top_p: sampling.top_p as number,
    min_p: sampling.min_p as number,
    top_k: sampling.top_k as number,
    seed: sampling.seed as number,
  };
}

/** The session's opening record: who it forked from and where. */
function opening(
  body: EventBody,
): { parent: number | null; forkAt: number | null; params: Record<string, unknown> } | undefined {
  if ("Created" in body) return { parent: body.Created.parent, forkAt: null, params: body.Created.params };
  if ("Forked" in body) return { parent: body.Forked.parent, forkAt: body.Forked.fork_at, params: body.Forked.params };
  if ("Rebased" in body)
    return { parent: body.Rebased.parent, forkAt: body.Rebased.fork_at, params: body.Rebased.params };
  return undefined;
}

/**
 * HTTP generations record the model and their cap in their params; session-API sessions only the five sampling fields.
 */
function sourceOf(params: Record<string, unknown>): "session" | "http" {
  return "model" in params ? "http" : "session";
}

const GREEDY_PARAMS: SessionParams = { temperature: 0, top_p: 1, min_p: 0, top_k: 0, seed: 0 };

/** Views kept in memory; past this, the least recently used one not in use is dropped (it loads again from the log). */
export const MAX_VIEWS = 256;

export class SessionBook {
  private headers: Map<number, SessionHeader> | null = null;
  private readonly views = new Map<number, SessionView>();
  private readonly loading = new Map<number, Promise<SessionView>>();
  /** Sessions this book has made or reopened in the store: the ones it may append to while they are live. */
  private readonly owned = new Set<number>();
  /** Sessions whose views were dropped past MAX_VIEWS with every record durable: reopened at their view's next id. */
  private readonly released = new Set<number>();
  private readonly stopListening: () => void;

  constructor(
    readonly store: SessionStore,
    /** Sessions a request is working on (generating, or holding the session's lock): their views stay. */
    private readonly inUse: (session: number) => boolean = () => false,
  ) {
    const stopDurable = store.onDurable((event) => this.note(event));
    // A failed write lost what was buffered: views holding those records are dropped and read again from the log.
    const stopEnded = store.onSessionsEnded(() => {
      for (const id of this.owned) this.views.delete(id);
      this.owned.clear();
      this.released.clear();
    });
    this.stopListening = () => {
      stopDurable();
      stopEnded();
    };
  }

  /** Keeps `view` as the most recently used, and drops the least recently used views past MAX_VIEWS. */
  private keep(view: SessionView): void {
    const id = view.header.id;
    this.views.delete(id);
    this.views.set(id, view);
    if (this.views.size <= MAX_VIEWS) return;
    for (const [old] of this.views) {
      if (this.views.size <= MAX_VIEWS) break;
      if (old === id || this.inUse(old)) continue;
      this.views.delete(old);
      // Its next append reopens it at the next id its reloaded view holds (every record of it was durable).
      if (this.owned.delete(old)) {
        this.store.release(old);
        this.released.add(old);
      }
    }
  }

  close(): void {
    this.stopListening();
  }

  /** Every session's header, read from the log the first time. */
  private index(): Map<number, SessionHeader> {
    if (this.headers) return this.headers;
    const headers = new Map<number, SessionHeader>();
    this.headers = headers;
    scanLog(this.store.path, (event) => this.note(event));
    return headers;
  }

  /** Brings the headers up to date with one durable record (seen again is harmless). */
  private note(event: SessionEvent): void {
    const headers = this.headers;
    if (!headers) return;
    const body = event.body;
    if (event.session === 0) {
      if ("SessionMeta" in body) {
        const h = headers.get(body.SessionMeta.session);
        if (h && body.SessionMeta.version >= h.version) {
          h.version = body.SessionMeta.version;
          h.title = body.SessionMeta.title;
          h.archived = body.SessionMeta.archived;
        }
      } else if ("Purged" in body) {
        for (const id of body.Purged.sessions) {
          const h = headers.get(id);
          if (h) h.purged = true;
          this.views.delete(id);
          if (this.owned.delete(id)) this.store.release(id);
        }
        if (body.Purged.mode === "Reroot") {
          for (const h of headers.values()) if (h.parent !== null && headers.get(h.parent)?.purged) h.parent = null;
        }
      }
      return;
    }
    // A view of a session someone else writes (an HTTP generation) follows its durable records.
    const view = this.views.get(event.session);
    if (view && event.event_id === view.events.length) view.events.push(event);
    const open = opening(body);
    let h = headers.get(event.session);
    if (!h && open) {
      h = {
        id: event.session,
        parent: open.parent,
        forkAt: open.forkAt,
        events: 0,
        updatedUnixMs: 0,
        title: null,
        archived: false,
        version: 0,
        purged: false,
        source: sourceOf(open.params),
      };
      headers.set(event.session, h);
    }
    if (!h) return;
    h.events = Math.max(h.events, event.event_id + 1);
    h.updatedUnixMs = Math.max(h.updatedUnixMs, event.ts_unix_ms);
  }

  header(id: number): SessionHeader | undefined {
    const h = this.index().get(id);
    return h && !h.purged ? h : undefined;
  }

  /** Sessions not purged, oldest first. */
  all(): SessionHeader[] {
    return [...this.index().values()].filter((h) => !h.purged);
  }

  /** Descendants of a session (forks of forks), nearest first. */
  descendants(id: number): number[] {
    const out: number[] = [];
    const queue = [id];
    while (queue.length > 0) {
      const at = queue.shift()!;
      for (const h of this.index().values()) {
        if (h.parent === at && !h.purged) {
          out.push(h.id);
          queue.push(h.id);
        }
      }
    }
    return out;
  }

  /** The session's history, loaded from the log the first time; throws SessionError for an unknown or purged id. */
  async view(id: number): Promise<SessionView> {
    const known = this.views.get(id);
    if (known) {
      this.keep(known);
      return known;
    }
    const header = this.header(id);
    if (!header) throw new SessionError(`no session ${id}${this.index().get(id)?.purged ? " (it was purged)" : ""}`);
    let loading = this.loading.get(id);
    if (!loading) {
      // One load per session, however many requests ask for it at once.
      loading = (async () => {
        await this.store.flush();
        const view = this.views.get(id) ?? (await this.load(header));
        // Purged while it loaded: not kept.
        if (header.purged) throw new SessionError(`no session ${id} (it was purged)`);
        this.keep(view);
        return view;
      })();
      this.loading.set(id, loading);
      void loading.finally(() => this.loading.delete(id)).catch(() => {});
    }
    return loading;
  }

  private async load(header: SessionHeader): Promise<SessionView> {
    const own = this.store.read(header.id);
    const first = own[0];
    const open = first && opening(first.body);
    if (!first || !open) throw new SessionError(`session ${header.id} has no opening record in the log`);
    let events = own;
    let params = paramsOf(open.params);
    if (open.parent !== null && open.forkAt !== null) {
      const parentHeader = this.index().get(open.parent);
      if (!parentHeader)
        throw new SessionError(`session ${header.id} forks from session ${open.parent}, which is not in the log`);
      const parent = this.views.get(open.parent) ?? (await this.load(parentHeader));
      events = [...parent.events.filter((e) => e.event_id < open.forkAt!), ...own];
      params ??= parent.params;
    }
    return { header, params: params ?? GREEDY_PARAMS, events };
  }

  /**
   * A new session whose first own record is `body` at `firstEventId`; returns its view (the record is durable after a
   * flush).
   */
  create(body: EventBody, firstEventId: number, params: SessionParams, inherited: SessionEvent[] = []): SessionView {
    const event = this.store.createWith(body, firstEventId);
    this.owned.add(event.session);
    const open = opening(body)!;
    const header: SessionHeader = {
      id: event.session,
      parent: open.parent,
      forkAt: open.forkAt,
      events: firstEventId + 1,
      updatedUnixMs: event.ts_unix_ms,
      title: null,
      archived: false,
      version: 0,
      purged: false,
      source: sourceOf(open.params),
    };
    this.index().set(header.id, header);
    const view: SessionView = { header, params, events: [...inherited, event] };
    this.keep(view);
    return view;
  }

  /**
   * Refuses a session this book may not write: purged, or still being
   * written by an HTTP generation (the journal holds it open).
   */
  checkWritable(view: SessionView): void {
    const id = view.header.id;
    if (view.header.purged) throw new SessionError(`no session ${id} (it was purged)`);
    if (this.store.isLive(id) && !this.owned.has(id)) {
      throw new SessionError(
        `SessionBusy: session ${id} is an HTTP request still generating; read it, or fork it at a committed event`,
      );
    }
  }

  /** Appends a record to a session the client touched; durable after a flush. */
  async append(view: SessionView, body: EventBody): Promise<SessionEvent> {
    const id = view.header.id;
    this.checkWritable(view);
    // A view dropped meanwhile (a failed write lost records it held) must not be written on.
    if (this.views.get(id) !== view)
      throw new SessionError(
        `session ${id} changed while this request ran (the session log failed a write); read it again`,
      );
    if (!this.store.isLive(id)) {
      // A session this book released holds every record in its view; any other is read from the log.
      const known = this.released.delete(id) ? view.events.length : undefined;
      const next = await this.store.resume(id, known);
      if (next !== view.events.length) {
        this.views.delete(id);
        throw new SessionError(`session ${id} changed while this request ran; read it again`);
      }
    }
    this.owned.add(id);
    const event = this.store.appendEvent(view.header.id, body);
    view.events.push(event);
    view.header.events = event.event_id + 1;
    view.header.updatedUnixMs = event.ts_unix_ms;
    return event;
  }
}
