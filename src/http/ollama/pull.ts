// POST /api/pull (docs/api/ollama.md#pull): Ollama's way to fetch a model,
// for the Hugging Face names Ollama users write (`hf.co/{org}/{repo}:{quant}`,
// `huggingface.co/...`), through the same pull as `superfluid serve REF`. The
// model is then known under the name it was pulled by (/api/tags lists it,
// /api/chat loads it). An admin route, as the other model-admin routes.
//
// NDJSON in Ollama's statuses: `pulling manifest`, `pulling <12 hex>` with
// `digest`, `total`, `completed` (at most every PROGRESS_MS per file),
// `verifying sha256 digest`, `writing manifest`, `success`. A failure before
// any file is fetched (unknown repo, no file for the tag, disk space) is an
// HTTP status with `{"error"}`; one during the download, a last `{"error"}`
// line. `stream: false` answers the last object alone.
//
// No memory fit check here, unlike a pull for a load (`serve REF`,
// /v1/models/load): pulling is not loading. Ollama's pull fetches for later
// (another window, after another model is unloaded, for another machine
// sharing the cache), and /api/chat's load of the pulled model runs the fit
// check then; the server's pull policy for this route carries none.
import { HubError } from "../../hub/errors.ts";
import type { PullEvent, Pulled } from "../../hub/pull.ts";
import { formatReference, hubReferenceOfOllamaName, type HubReference } from "../../hub/reference.ts";
import { pullReference, pullRequestError } from "../../daemon/model-pull.ts";
import { sourceOf } from "../../daemon/model-source.ts";
import { invalidRequest, RequestError } from "../../daemon/request-error.ts";
import { requireAdmin } from "../admin-guard.ts";
import { readJsonBody } from "../body.ts";
import type { ServerContext } from "../server-context.ts";
import { CURL_BODIES, ollamaErrorBody } from "./envelope.ts";

export const PULL_ROUTE = "/api/pull";
const PROGRESS_MS = 100;

/** The Hub reference an Ollama name means, or the 400 that says only Hugging Face names are pulled. */
function referenceOf(name: string): HubReference {
  let ref: HubReference | undefined;
  try {
    ref = hubReferenceOfOllamaName(name);
  } catch (err) {
    if (err instanceof HubError) throw invalidRequest(err.message, "model", "invalid_reference");
    throw err;
  }
  if (!ref) {
    throw invalidRequest(
      `'${name}' is not a Hugging Face model: superfluid pulls only from the Hugging Face Hub, named as ` +
        "hf.co/{org}/{repo}:{quant} (e.g. hf.co/unsloth/Qwen3-0.6B-GGUF:Q4_K_M); Ollama's own library is not pulled",
      "model",
      "invalid_reference",
    );
  }
  return ref;
}

/** One progress event as Ollama's status lines (none for a state Ollama has no line for). */
function statusLines(event: PullEvent, last: Map<string, number>, verified: Set<string>): object[] {
  if (event.kind === "linking") return [{ status: "writing manifest" }];
  if (event.kind !== "file") return [];
  const digest = `sha256:${event.blob}`;
  const line = {
    status: `pulling ${event.blob.slice(0, 12)}`,
    digest,
    total: event.total,
    completed: event.done,
  };
  if (event.state === "verifying") {
    if (verified.has(event.blob)) return [];
    verified.add(event.blob);
    return [{ ...line, completed: event.total }, { status: "verifying sha256 digest" }];
  }
  if (event.state === "done") return last.has(event.blob) ? [] : [{ ...line, completed: event.total }];
  const now = performance.now();
  if (now - (last.get(event.blob) ?? -Infinity) < PROGRESS_MS) return [];
  last.set(event.blob, now);
  return [line];
}

/** Makes the pulled model known under the name it was pulled by, so /api/tags lists it and /api/chat loads it. */
async function register(ctx: ServerContext, name: string, pulled: Pulled): Promise<void> {
  if (ctx.registry.entry(name)) return;
  ctx.registry.know(await sourceOf({ path: pulled.model[0]!.local, id: name }));
}

export async function pullModel(ctx: ServerContext, request: Request): Promise<Response> {
  requireAdmin(request, "pulling models");
  const body = await readJsonBody(request, CURL_BODIES);
  if (body === null || typeof body !== "object" || Array.isArray(body))
    throw invalidRequest("the request body must be a JSON object");
  const fields = body as Record<string, unknown>;
  const name = fields.model || fields.name;
  if (typeof name !== "string" || name === "") throw invalidRequest("model is required", "model");
  const ref = referenceOf(name);
  const policy = ctx.pullPolicy?.(formatReference(ref));
  if (!policy) throw new RequestError(501, "this server does not pull models", "not_implemented");

  const lines: object[] = [];
  let wake: (() => void) | undefined;
  const push = (items: object[]) => {
    if (items.length === 0) return;
    lines.push(...items);
    wake?.();
  };
  const last = new Map<string, number>();
  const verified = new Set<string>();
  // The first file event means the repo, its file list and the disk check all passed: from there a failure is a line.
  let started!: () => void;
  const fetching = new Promise<void>((resolve) => (started = resolve));
  const pulling = pullReference(formatReference(ref), {
    ...policy,
    progress: (event) => {
      policy.progress?.(event);
      if (event.kind !== "resolving") started();
      push(statusLines(event, last, verified));
    },
  }).then(async (pulled) => {
    await register(ctx, name, pulled);
    return pulled;
  });
  const failure = (err: unknown): RequestError =>
    err instanceof HubError ? pullRequestError(err, policy.env) : (err as RequestError);
  if (fields.stream === false) {
    try {
      await pulling;
    } catch (err) {
      throw failure(err);
    }
    return Response.json({ status: "success" });
  }
  // Before the first byte: a refusal is the HTTP status.
  try {
    await Promise.race([fetching, pulling]);
  } catch (err) {
    throw failure(err);
  }
  const encoder = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      const send = (obj: object) => controller.enqueue(encoder.encode(`${JSON.stringify(obj)}\n`));
      send({ status: "pulling manifest" });
      let done = false;
      let error: unknown;
      pulling.then(
        () => {
          done = true;
          wake?.();
        },
        (err) => {
          done = true;
          error = err;
          wake?.();
        },
      );
      for (;;) {
        while (lines.length > 0) send(lines.shift()!);
        if (done) break;
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
      while (lines.length > 0) send(lines.shift()!);
      if (error !== undefined) send(ollamaErrorBody(failure(error)));
      else send({ status: "success" });
      controller.close();
    },
  });
  return new Response(stream, { headers: { "content-type": "application/x-ndjson" } });
}
