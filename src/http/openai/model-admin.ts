// The model-admin routes (docs/api/openai.md#loading-and-unloading-models):
// POST /v1/models/load, POST /v1/models/unload, DELETE /v1/models/{id}.
// They load any file the server's user can read, so they are admin routes:
// until API keys exist they are open to loopback peers only (403
// `admin_required` from any other address).
import type { Elysia } from "elysia";
import * as v from "valibot";
import { readJsonBody } from "../body.ts";
import { RequestError } from "../../daemon/request-error.ts";
import { requireAdmin } from "../admin-guard.ts";
import type { ServerContext } from "../server-context.ts";
import { parseWith } from "../validate.ts";
import { entryObject, modelObject } from "./models.ts";

const idBody = v.looseObject({ id: v.pipe(v.string(), v.minLength(1)) });

/** A model id from the path; a malformed %-escape names no model. */
function decodeId(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new RequestError(404, `The model '${raw}' does not exist`, null, "model");
  }
}

async function unload(ctx: ServerContext, id: string) {
  const entry = await ctx.registry.unload(id);
  return entryObject(ctx.registry, entry);
}

export function mountModelAdmin(app: Elysia, ctx: ServerContext): void {
  const noParse = { parse: "none" as const };
  app
    .post(
      "/v1/models/load",
      async ({ request }) => {
        requireAdmin(request, "loading and unloading models");
        const { id } = parseWith(idBody, await readJsonBody(request));
        const model = await ctx.registry.loadAsDefault(id);
        return modelObject(ctx.registry, model);
      },
      noParse,
    )
    .post(
      "/v1/models/unload",
      async ({ request }) => {
        requireAdmin(request, "loading and unloading models");
        const { id } = parseWith(idBody, await readJsonBody(request));
        return unload(ctx, id);
      },
      noParse,
    )
    .delete(
      "/v1/models/*",
      async ({ request, params }) => {
        requireAdmin(request, "loading and unloading models");
        return unload(ctx, decodeId(params["*"]));
      },
      noParse,
    );
}
