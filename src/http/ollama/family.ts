// The Ollama family (docs/api/ollama.md): Ollama's API at the server root for
// the apps and clients that speak only it. Errors under /api/ are
// `{"error": message}` with the status; /api/pull fetches Hugging Face
// models, the other routes that manage a model store answer 501.
import type { ApiFamily } from "../family.ts";
import { readJsonBody } from "../body.ts";
import { chat, CHAT_ROUTE } from "./chat.ts";
import { listRunning, listTags, notServed, NOT_SERVED_ROUTES, ollamaVersion, showModel } from "./discovery.ts";
import { warmModelFacts } from "./model-facts.ts";
import { CURL_BODIES, ollamaErrorBody } from "./envelope.ts";
import { embed, EMBED_ROUTE, legacyEmbeddings, LEGACY_EMBED_ROUTE } from "./embed.ts";
import { generate, GENERATE_ROUTE } from "./generate.ts";
import { pullModel, PULL_ROUTE } from "./pull.ts";

export const ollamaFamily: ApiFamily = {
  name: "ollama",
  prefixes: ["/api/"],
  errorBody: ollamaErrorBody,
  mount(app, ctx) {
    // The facts discovery lists (file size, parameter count, model_info) are read from the GGUF header now, not on the
    // first request.
    warmModelFacts(ctx.registry.all());
    const noParse = { parse: "none" as const };
    app
      // Ollama clients and UIs probe the root to see whether a server is up.
      .get("/", () => new Response("superfluid is running"))
      .get("/api/version", () => ollamaVersion())
      .get("/api/tags", () => listTags(ctx.registry))
      .get("/api/ps", () => listRunning(ctx.registry))
      .post(
        "/api/show",
        async ({ request }) => showModel(ctx.registry, await readJsonBody(request, CURL_BODIES)),
        noParse,
      )
      .post(CHAT_ROUTE, ({ request }) => chat(ctx, request), noParse)
      .post(GENERATE_ROUTE, ({ request }) => generate(ctx, request), noParse)
      .post(EMBED_ROUTE, ({ request }) => embed(ctx, request), noParse)
      .post(LEGACY_EMBED_ROUTE, ({ request }) => legacyEmbeddings(ctx, request), noParse)
      .post(PULL_ROUTE, ({ request }) => pullModel(ctx, request), noParse);
    for (const { method, path } of NOT_SERVED_ROUTES) {
      app.route(method, path, () => {
        throw notServed(path);
      });
    }
  },
};
