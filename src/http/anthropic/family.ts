// The Anthropic family (docs/api/anthropic.md): the Messages API on the same
// listener, for clients whose base URL is the server root. Its routes answer
// errors in Anthropic's envelope, 404s and 405s under /v1/messages included.
import type { ApiFamily } from "../family.ts";
import { countTokens } from "./count-tokens.ts";
import { anthropicErrorBody } from "./envelope.ts";
import { createMessage, MESSAGES_ROUTE } from "./messages.ts";

export const anthropicFamily: ApiFamily = {
  name: "anthropic",
  prefixes: [MESSAGES_ROUTE],
  errorBody: anthropicErrorBody,
  mount(app, ctx) {
    const noParse = { parse: "none" as const };
    app
      .post(MESSAGES_ROUTE, ({ request }) => createMessage(ctx, request), noParse)
      .post(`${MESSAGES_ROUTE}/count_tokens`, ({ request }) => countTokens(ctx, request), noParse);
  },
};
