// The Responses API's routes (docs/api/responses.md#endpoints): create, and
// the stored responses read, listed item by item, and deleted. Cancel is
// for background responses, which are not served. A stored response is seen
// only by the scope of the key that created it (docs/api/security.md#scoping):
// to any other its id is unknown.
import type { Elysia } from "elysia";
import { RequestError } from "../../../daemon/request-error.ts";
import { scopeOf } from "../../auth/principal.ts";
import type { ResponseStore, StoredResponse } from "../../../response-store/store.ts";
import type { ServerContext } from "../../server-context.ts";
import { createResponse } from "./create.ts";

const notFound = (id: string) => new RequestError(404, `Response with id '${id}' not found.`, null, "response_id");

function stored(store: ResponseStore, id: string, owner: string | undefined): StoredResponse {
  if (!store.get(id, owner)) throw notFound(id);
  return store.body(id);
}

/** input_items: `limit` 1-100 (20), `order` desc (default) or asc, `after` an item id. */
function inputItemsPage(record: StoredResponse, query: Record<string, string | undefined>) {
  const limit = query.limit === undefined ? 20 : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100)
    throw new RequestError(400, "limit: must be a whole number from 1 to 100", null, "limit");
  const order = query.order ?? "desc";
  if (order !== "asc" && order !== "desc") throw new RequestError(400, "order: must be asc or desc", null, "order");
  const items = order === "asc" ? record.input : [...record.input].reverse();
  let start = 0;
  if (query.after !== undefined) {
    const at = items.findIndex((item) => item.id === query.after);
    if (at < 0)
      throw new RequestError(400, `after: '${query.after}' is not an input item of this response`, null, "after");
    start = at + 1;
  }
  const data = items.slice(start, start + limit);
  return {
    object: "list",
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: start + limit < items.length,
  };
}

export function mountResponses(app: Elysia, ctx: ServerContext): void {
  const noParse = { parse: "none" as const };
  app
    .post("/v1/responses", ({ request }) => createResponse(ctx, request), noParse)
    .get("/v1/responses/:id", ({ params, request }) => stored(ctx.responses, params.id, scopeOf(request)).response)
    .delete("/v1/responses/:id", async ({ params, request }) => {
      if (!(await ctx.responses.delete(params.id, scopeOf(request)))) throw notFound(params.id);
      return { id: params.id, object: "response", deleted: true };
    })
    .get("/v1/responses/:id/input_items", ({ params, query, request }) =>
      inputItemsPage(stored(ctx.responses, params.id, scopeOf(request)), query as Record<string, string | undefined>),
    )
    .post(
      "/v1/responses/:id/cancel",
      () => {
        throw new RequestError(
          400,
          "Only responses created with background: true can be cancelled, and this server does not serve background mode.",
          "unsupported_parameter",
          "response_id",
        );
      },
      noParse,
    );
}
