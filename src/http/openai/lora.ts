// The LoRA adapter routes (docs/api/lora.md): POST /v1/lora/load,
// POST /v1/lora/unload, GET /v1/lora, and llama-server's own
// GET/POST /lora-adapters in its shapes. Adapters are applied by llama.cpp
// in the model's worker (src/worker/lora.ts); load and unload read any file
// the server's user can read, so they are admin routes: until API keys exist,
// open to loopback peers only (403 `admin_required`), as the model-admin routes.
import { resolve } from "node:path";
import type { Elysia } from "elysia";
import * as v from "valibot";
import type { LoraAdapterInfo } from "../../engine/protocol.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import { readJsonBody } from "../body.ts";
import { RequestError } from "../../daemon/request-error.ts";
import { requireAdmin } from "../admin-guard.ts";
import { namedOrDefault } from "../models.ts";
import type { ServerContext } from "../server-context.ts";
import { int, opt, parseWith } from "../validate.ts";

const scaleField = v.pipe(v.number("must be a number"), v.finite("must be a finite number"));

const loadBody = v.looseObject({
  path: v.pipe(v.string("must be a string"), v.minLength(1, "must not be empty")),
  scale: opt(scaleField),
  model: opt(v.string("must be a string")),
});

const unloadBody = v.looseObject({
  id: int(0),
  model: opt(v.string("must be a string")),
});

/** llama-server's POST /lora-adapters body: the scale of each adapter named; every other one gets 0. */
const scalesBody = v.array(v.looseObject({ id: int(0), scale: opt(scaleField) }), "must be an array of {id, scale}");

function adapterList(model: ServedModel, adapters: LoraAdapterInfo[]) {
  return { object: "list", model: model.id, data: adapters.map(({ id, path, scale }) => ({ id, path, scale })) };
}

/** ?model= on a GET, else the default model. */
function queryModel(ctx: ServerContext, request: Request): ServedModel {
  return namedOrDefault(ctx.registry, new URL(request.url).searchParams.get("model"));
}

export function mountLora(app: Elysia, ctx: ServerContext): void {
  const noParse = { parse: "none" as const };
  app
    .get("/v1/lora", ({ request }) => {
      const model = queryModel(ctx, request);
      return adapterList(model, model.worker.loraAdapters);
    })
    .post(
      "/v1/lora/load",
      async ({ request }) => {
        requireAdmin(request, "loading and unloading LoRA adapters");
        const body = parseWith(loadBody, await readJsonBody(request));
        const model = namedOrDefault(ctx.registry, body.model);
        // Resolved against the server's folder, as the worker (started there) would; listed resolved.
        return adapterList(model, await model.worker.loadLora(resolve(body.path), body.scale ?? 1));
      },
      noParse,
    )
    .post(
      "/v1/lora/unload",
      async ({ request }) => {
        requireAdmin(request, "loading and unloading LoRA adapters");
        const body = parseWith(unloadBody, await readJsonBody(request));
        const model = namedOrDefault(ctx.registry, body.model);
        return adapterList(model, await model.worker.unloadLora(body.id));
      },
      noParse,
    )
    // llama-server's route: a bare array of {id, path, scale}.
    .get("/lora-adapters", ({ request }) =>
      queryModel(ctx, request).worker.loraAdapters.map(({ id, path, scale }) => ({ id, path, scale })),
    )
    .post(
      "/lora-adapters",
      async ({ request }) => {
        requireAdmin(request, "loading and unloading LoRA adapters");
        const named = parseWith(scalesBody, await readJsonBody(request));
        const model = queryModel(ctx, request);
        // As llama-server: adapters the body does not name are set to 0 (loaded, but not applied).
        const scales = new Map(model.worker.loraAdapters.map((a) => [a.id, 0]));
        for (const { id, scale } of named) {
          if (!scales.has(id)) throw new RequestError(400, `invalid adapter id ${id}`, "adapter_not_found", "id");
          scales.set(id, scale ?? 0);
        }
        await model.worker.scaleLora([...scales].map(([id, scale]) => ({ id, scale })));
        return { success: true };
      },
      noParse,
    );
}

/**
 * A per-request `lora` list (llama-server's field): adapters apply to a
 * whole decode, so one request cannot run under its own set; a non-empty
 * list is refused rather than ignored (docs/api/lora.md).
 */
export function refusePerRequestLora(body: unknown): void {
  const lora = (body as { lora?: unknown } | null)?.lora;
  if (Array.isArray(lora) ? lora.length === 0 : lora === undefined || lora === null) return;
  throw new RequestError(
    400,
    "a per-request lora list is not supported: set the adapters' scales for every request with POST /lora-adapters",
    "unsupported_parameter",
    "lora",
  );
}
