// What an API family supplies to the app: its routes and its error envelope.
// The families served are listed in families.ts, the one table a new family
// is added to; everything else it needs lives in its own folder.
import type { Elysia } from "elysia";
import type { RequestError } from "../daemon/request-error.ts";
import type { ServerContext } from "./server-context.ts";

export interface ApiFamily {
  name: string;
  /** Path prefixes whose errors (404s and 405s included) carry this family's envelope. */
  prefixes: string[];
  /** The JSON body of an error reply, and of an error frame in its streams. */
  errorBody(err: RequestError): unknown;
  /** Adds the family's routes. */
  mount(app: Elysia, ctx: ServerContext): void;
}
