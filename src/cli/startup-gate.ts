// The listener's handler while `superfluid serve` starts
// (docs/cli.md#startup-and-shutdown): the listener opens before any model
// loads, so /health answers from the first moment (503 `loading` from the
// app's own health route while no model is loaded), and every other request
// waits here until the startup is done, then runs as if it had arrived then.
//
// Waiting, not 503 model_loading: the startup load is short next to a
// client's request timeout, and clients that raced the start (a CI script, an
// agent launched beside the server) do not all retry a 503 — curl and most
// agents do not, and the OpenAI SDKs give up after two retries a couple of
// seconds apart — while every client waits for a slow reply.
import type { HttpHandler } from "../http/listener.ts";
import { RequestError } from "../daemon/request-error.ts";

/** How long a failed start waits for the replies to held requests to be written before the listener closes. */
const ANSWER_GRACE_MS = 200;

export class StartupGate {
  private settled = false;
  private failure?: Error;
  /** Requests waiting for the start, not yet answered. */
  private heldNow = 0;
  private allAnswered?: () => void;
  private release!: () => void;
  private readonly done = new Promise<void>((resolve) => (this.release = resolve));
  readonly handler: HttpHandler;

  constructor(app: HttpHandler) {
    this.handler = {
      fetch: (request) => {
        if (this.settled && !this.failure) return app.fetch(request);
        // The probes answer during the start (503 loading); nothing else runs before it is done.
        const path = new URL(request.url).pathname;
        if (path === "/health" || path === "/health/ready") return app.fetch(request);
        this.heldNow++;
        return this.done
          .then(() => {
            if (this.failure)
              throw new RequestError(503, `the server did not start: ${this.failure.message}`, "server_shutting_down");
            return app.fetch(request);
          })
          .finally(() => {
            if (--this.heldNow === 0) this.allAnswered?.();
          });
      },
      refuse: (method, target) => app.refuse(method, target),
      errorBody: (path, err) => app.errorBody(path, err),
    };
  }

  /** Requests waiting for the start now. */
  get held(): number {
    return this.heldNow;
  }

  /** The default model serves: held requests go on. */
  ready(): void {
    this.settled = true;
    this.release();
  }

  /**
   * The start failed (the process exits 1): held requests are answered 503
   * with the reason. Resolves once those answers exist and have had a moment
   * to be written, so the listener can close without cutting them off.
   */
  async failed(err: Error): Promise<void> {
    this.failure = err;
    this.settled = true;
    const answered =
      this.heldNow === 0 ? Promise.resolve() : new Promise<void>((resolve) => (this.allAnswered = resolve));
    this.release();
    await answered;
    await Bun.sleep(ANSWER_GRACE_MS);
  }
}
