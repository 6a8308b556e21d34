// The Responses API's SSE framing (docs/api/responses.md#streaming): named
// events (`event: <type>`), no [DONE], `: keep-alive` comments while idle.
// The route sends its own `error` and `response.failed` events with their
// sequence numbers; this framing's error frame only covers a failure the
// route could not catch.
import { sseFraming } from "../../stream.ts";

export const RESPONSES_SSE = sseFraming({
  done: false,
  error: (err) => ({ event: "error", data: { type: "error", code: err.code, message: err.message, param: err.field } }),
});
