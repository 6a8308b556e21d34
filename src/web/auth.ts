// Who may use the `--web` listener (docs/api/sessions.md#authentication):
// a token minted at each start and written to <sessions>/web-token (0600),
// so only someone who can read that file (or the URL the server prints) can
// drive sessions.
// - /web/rpc and /web/stream want it twice, as a bearer and in
//   X-Superfluid-CSRF: a form or a simple cross-site request cannot set either.
// - /web/ws takes it as a bearer or as the subprotocol entry
//   `superfluid.token.<token>` (a browser cannot set headers on a WebSocket),
//   and needs an Origin on the allow-list, since browsers let any page open a
//   WebSocket anywhere.
// - An Origin that is not the listener's own or on --web-origin is refused
//   everywhere; a Host that is not a loopback name too (DNS rebinding).
// The listener sends no CORS headers, so other pages can read nothing from it.
import { randomBytes, timingSafeEqual } from "node:crypto";
import { join } from "node:path";
import { hostName } from "../http/host-names.ts";
import { isLoopbackName } from "../runtime/loopback.ts";
import { replacePrivateFile } from "../runtime/private-files.ts";

export const TOKEN_FILE = "web-token";
export const SUBPROTOCOL = "superfluid.v1";
export const TOKEN_SUBPROTOCOL_PREFIX = "superfluid.token.";
export const CSRF_HEADER = "x-superfluid-csrf";

/** Mints this start's token and writes it to <sessions>/web-token (0600, replaced whole). */
export function mintToken(sessionsDir: string): { token: string; path: string } {
  const token = randomBytes(32).toString("hex");
  const path = join(sessionsDir, TOKEN_FILE);
  replacePrivateFile(path, `${token}\n`);
  return { token, path };
}

function sameToken(given: string | undefined, token: string): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

function bearerOf(request: Request): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.get("authorization") ?? "");
  return m?.[1];
}

/** The subprotocol entries a WebSocket handshake offers. */
export function offeredProtocols(request: Request): string[] {
  return (request.headers.get("sec-websocket-protocol") ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "");
}

export interface Refusal {
  status: 401 | 403;
  message: string;
}

export class WebAuth {
  constructor(
    readonly token: string,
    /** --web-origin: page origins let in besides the listener's own. */
    private readonly origins: readonly string[],
    /** The listener's port, for its own origin. */
    private readonly port: () => number,
  ) {}

  private originAllowed(origin: string): boolean {
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false;
    }
    const own =
      (url.protocol === "http:" || url.protocol === "ws:") &&
      isLoopbackName(url.hostname) &&
      Number(url.port || 80) === this.port();
    return own || this.origins.includes(url.origin);
  }

  /** Origin and Host checks every route shares (/web/health included). */
  private foreign(request: Request): Refusal | undefined {
    const host = hostName(request.headers.get("host") ?? "localhost");
    if (host === undefined || !isLoopbackName(host))
      return {
        status: 403,
        message: `the Host '${request.headers.get("host")}' is refused: this listener answers only loopback names`,
      };
    const origin = request.headers.get("origin");
    if (origin !== null && !this.originAllowed(origin)) {
      return {
        status: 403,
        message: `requests from the page origin '${origin}' are refused: only this listener's own page and the origins --web-origin names may call it`,
      };
    }
    return undefined;
  }

  /** A route that needs no token (/web/health, the page): Origin and Host only. */
  open(request: Request): Refusal | undefined {
    return this.foreign(request);
  }

  /** /web/rpc and /web/stream: the token as bearer and as CSRF header. */
  rpc(request: Request): Refusal | undefined {
    const foreign = this.foreign(request);
    if (foreign) return foreign;
    if (!sameToken(bearerOf(request), this.token))
      return {
        status: 401,
        message: "a valid token is required: Authorization: Bearer <the token in <sessions>/web-token>",
      };
    if (!sameToken(request.headers.get(CSRF_HEADER) ?? undefined, this.token))
      return { status: 403, message: "the X-Superfluid-CSRF header must carry the token too" };
    return undefined;
  }

  /** /web/ws: an allowed Origin is required; the token as bearer or subprotocol entry. */
  socket(request: Request): Refusal | undefined {
    const foreign = this.foreign(request);
    if (foreign) return foreign;
    if (request.headers.get("origin") === null)
      return {
        status: 403,
        message: "a WebSocket needs an Origin on the allow-list (this listener's own page, or --web-origin)",
      };
    const offered = offeredProtocols(request);
    if (!offered.includes(SUBPROTOCOL))
      return { status: 403, message: `the WebSocket must offer the subprotocol ${SUBPROTOCOL}` };
    const inProtocol = offered
      .find((p) => p.startsWith(TOKEN_SUBPROTOCOL_PREFIX))
      ?.slice(TOKEN_SUBPROTOCOL_PREFIX.length);
    if (!sameToken(bearerOf(request), this.token) && !sameToken(inProtocol, this.token)) {
      return {
        status: 401,
        message: `a valid token is required: Authorization: Bearer <token>, or the subprotocol entry ${TOKEN_SUBPROTOCOL_PREFIX}<token>`,
      };
    }
    return undefined;
  }
}
