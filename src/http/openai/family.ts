// The OpenAI family: its routes (docs/api/openai.md) and its envelope.
import type { ApiFamily } from "../family.ts";
import { peerAddress } from "../listener.ts";
import { knownOr404 } from "../models.ts";
import { RequestError } from "../../daemon/request-error.ts";
import { chatCompletions } from "./chat.ts";
import { completions } from "./completions.ts";
import { embeddings } from "./embeddings.ts";
import { rerank } from "./rerank.ts";
import { mountAudio } from "./audio.ts";
import { mountBatches } from "./batches.ts";
import { mountFiles } from "./files.ts";
import { openaiErrorBody } from "./envelope.ts";
import { mountLora } from "./lora.ts";
import { mountModelAdmin } from "./model-admin.ts";
import { entryObject, listModels } from "./models.ts";
import { mountResponses } from "./responses/routes.ts";

/** A model id from the path; a malformed %-escape names no model. */
function decodeModelId(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new RequestError(404, `The model '${raw}' does not exist`, null, "model");
  }
}

export const openaiFamily: ApiFamily = {
  name: "openai",
  prefixes: ["/v1/"],
  errorBody: openaiErrorBody,
  mount(app, ctx) {
    const noParse = { parse: "none" as const };
    app
      .get("/v1/models", () => listModels(ctx.registry))
      .get("/v1/models/*", ({ params }) =>
        entryObject(ctx.registry, knownOr404(ctx.registry, decodeModelId(params["*"]))),
      )
      .post("/v1/chat/completions", ({ request }) => chatCompletions(ctx, request), noParse)
      // The FIM bucket is keyed by the TCP peer's address (X-Forwarded-For is not read).
      .post("/v1/completions", ({ request }) => completions(ctx, request, peerAddress(request)), noParse)
      .post("/v1/embeddings", ({ request }) => embeddings(ctx, request), noParse)
      // llama-server's and Jina's path, and the bare alias llama-server also answers.
      .post("/v1/rerank", ({ request }) => rerank(ctx, request), noParse)
      .post("/rerank", ({ request }) => rerank(ctx, request), noParse);
    mountModelAdmin(app, ctx);
    mountLora(app, ctx);
    mountResponses(app, ctx);
    mountFiles(app, ctx);
    mountBatches(app, ctx);
    mountAudio(app);
  },
};
