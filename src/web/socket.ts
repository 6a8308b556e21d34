// /web/ws (docs/api/sessions.md#web-routes): one request per text frame, one
// reply per frame, requests of a connection run one at a time in order. A
// Generate streams its Delta frames and its summary before the next request
// starts; a Subscribe's events keep coming between later replies. A
// connection that closes cancels its generation and ends its subscriptions.
import type { ServerWebSocket, WebSocketHandler } from "bun";
import type { SessionConnection, SessionService } from "../session-api/service.ts";
import type { RunningGeneration } from "../session-api/generate.ts";
import type { Reply } from "../session-api/wire.ts";

export interface SocketData {
  /** The request running now and those waiting behind it. */
  queue: Promise<void>;
  /** The generation this connection's Generate runs, while it runs. */
  running: Set<RunningGeneration>;
  conn?: SessionConnection & { closed: boolean };
}

let connections = 0;

export function socketHandlers(service: SessionService): WebSocketHandler<SocketData> {
  const send = (ws: ServerWebSocket<SocketData>, reply: Reply) => {
    if (ws.readyState === 1) ws.send(JSON.stringify(reply));
  };
  return {
    open(ws) {
      const conn = {
        // Complete is metered per connection on /web/ws.
        completionKey: `web-ws-${++connections}`,
        closed: false,
        send: (reply: Reply) => send(ws, reply),
        backlogBytes: () => ws.getBufferedAmount(),
        generationStarted: (running: RunningGeneration) => {
          // A connection that closed while the generation was starting has no reader for it.
          if (conn.closed) return running.cancel();
          ws.data.running.add(running);
          void running.done.finally(() => ws.data.running.delete(running)).catch(() => {});
        },
      };
      ws.data.conn = conn;
    },
    message(ws, message) {
      const conn = ws.data.conn!;
      if (typeof message !== "string") {
        send(ws, { Err: { message: "send requests as text frames of JSON" } });
        return;
      }
      let value: unknown;
      try {
        value = JSON.parse(message);
      } catch {
        send(ws, { Err: { message: "a frame must hold one request in the session API's JSON form" } });
        return;
      }
      ws.data.queue = ws.data.queue.then(async () => {
        // Requests queued behind a connection that closed are dropped: nobody reads their replies.
        if (conn.closed) return;
        const reply = await service.handle(value, conn, { streaming: true });
        if (reply !== null) send(ws, reply);
      });
    },
    close(ws) {
      if (ws.data.conn) {
        ws.data.conn.closed = true;
        service.disconnected(ws.data.conn);
      }
      for (const running of ws.data.running) running.cancel();
    },
  };
}
