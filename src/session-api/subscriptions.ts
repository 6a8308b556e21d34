// Subscribe (docs/api/sessions.md#subscribe): a session's events from a
// cursor, the backlog first and then each record as it becomes durable,
// de-duplicated by event id so the seam between the two shows no gap and no
// repeat. With `provisional`, a generation's text also arrives ahead of its
// commit. A subscription ends with SubEnded: unsubscribed, lagged (its
// connection stopped reading), publisher closed (the server stops) or purged.
import type { SessionEvent } from "../session-log/events.ts";
import type { SessionStore } from "../session-log/store.ts";
import type { SessionView } from "./book.ts";
import { wireEvent, type Reply } from "./wire.ts";

/** A connection that subscriptions send frames on. */
export interface SubscriberConnection {
  send(reply: Reply): void;
  /** The client has gone: nothing more is sent, and no subscription starts on it. */
  readonly closed?: boolean;
  /** Bytes queued and not yet taken by the client; past LAG_LIMIT_BYTES the subscription ends as lagged. */
  backlogBytes?(): number;
}

/** A subscriber this far behind is cut off rather than buffered without bound. */
const LAG_LIMIT_BYTES = 16 * 1024 * 1024;

interface Subscription {
  id: number;
  session: number;
  conn: SubscriberConnection;
  provisional: boolean;
  /** The highest event id sent; -1 before any. */
  sent: number;
  /** Live events heard while the backlog was being read, in order. */
  early: SessionEvent[] | null;
}

export class Subscriptions {
  private readonly subs = new Map<number, Subscription>();
  private nextId = 1;
  private readonly stopListening: () => void;

  constructor(private readonly store: SessionStore) {
    this.stopListening = store.onDurable((event) => this.live(event));
  }

  /** Starts a subscription: sends Subscribed {sub}, then the backlog; live events follow as they become durable. */
  async subscribe(conn: SubscriberConnection, view: SessionView, cursor: number, provisional: boolean): Promise<void> {
    const sub: Subscription = {
      id: this.nextId++,
      session: view.header.id,
      conn,
      provisional,
      sent: cursor - 1,
      early: [],
    };
    // Listening starts before the backlog is read, so nothing made durable in between is missed.
    this.subs.set(sub.id, sub);
    const count = view.events.length;
    try {
      await this.store.flush();
    } catch (err) {
      this.subs.delete(sub.id);
      throw err;
    }
    if (conn.closed) {
      this.subs.delete(sub.id);
      return;
    }
    const backlog = view.events.slice(0, count).filter((e) => e.event_id >= cursor);
    const early = sub.early ?? [];
    sub.early = null;
    conn.send({ Subscribed: { sub: sub.id } });
    for (const event of [...backlog, ...early]) this.send(sub, event);
  }

  private live(event: SessionEvent): void {
    for (const sub of this.subs.values()) {
      if (sub.session !== event.session) continue;
      if (sub.early) sub.early.push(event);
      else this.send(sub, event);
    }
  }

  private send(sub: Subscription, event: SessionEvent): void {
    if (!this.subs.has(sub.id) || event.event_id <= sub.sent) return;
    if ((sub.conn.backlogBytes?.() ?? 0) > LAG_LIMIT_BYTES) {
      this.end(sub, "lagged");
      return;
    }
    sub.sent = event.event_id;
    sub.conn.send({ SubEvent: { sub: sub.id, event: wireEvent(event) } });
  }

  /** Text of a session's generation ahead of its commit. */
  provisional(session: number, channel: number, text: string): void {
    for (const sub of this.subs.values()) {
      if (sub.session === session && sub.provisional && !sub.early)
        sub.conn.send({ SubProvisional: { sub: sub.id, channel, text } });
    }
  }

  private end(sub: Subscription, reason: string): void {
    if (!this.subs.delete(sub.id)) return;
    sub.conn.send({ SubEnded: { sub: sub.id, reason } });
  }

  unsubscribe(conn: SubscriberConnection, id: number): boolean {
    const sub = this.subs.get(id);
    if (!sub || sub.conn !== conn) return false;
    this.end(sub, "unsubscribed");
    return true;
  }

  /** A purged session's subscriptions end. */
  endSession(session: number, reason: string): void {
    for (const sub of [...this.subs.values()]) if (sub.session === session) this.end(sub, reason);
  }

  dropConnection(conn: SubscriberConnection): void {
    for (const [id, sub] of this.subs) if (sub.conn === conn) this.subs.delete(id);
  }

  closeAll(): void {
    for (const sub of [...this.subs.values()]) this.end(sub, "publisher closed");
    this.stopListening();
  }
}
