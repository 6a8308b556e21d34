// /health, /props, /slots and /v1/tokenize (docs/api/openai.md#health).
import { basename } from "node:path";
import * as v from "valibot";
import type { PullStatus } from "../daemon/model-pull.ts";
import type { ModelRegistry } from "../daemon/registry.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import type { WorkerClient } from "../daemon/worker-client.ts";
import type { EngineSnapshot } from "../engine/jobs.ts";
import { effectiveDefaults, type OperatorSampling } from "../daemon/sampling-resolve.ts";
import { QOS_NAMES } from "../engine/scheduler.ts";
import { RequestError } from "../daemon/request-error.ts";
import { knownOr404, loadedOr404, namedOrDefault } from "./models.ts";
import { capabilitiesOf } from "./openai/models.ts";
import { opt, parseWith } from "./validate.ts";

/**
 * docs/api/openai.md#health: ok, 503 `loading` while the server starts (the
 * listener opens before the default model loads; no model is loaded until it
 * does), or 503 `degraded` with the reason while the session log cannot be
 * written (every generation then fails with session_log_failed until a write
 * succeeds). It asks no engine anything.
 */
export function health(registry: ModelRegistry, starting = false, pulling: PullStatus[] = []) {
  const models = registry.all();
  const counts = { models_loaded: models.length, models_known: registry.known().length };
  // Loading until the start is done: every model named loaded, not just the first. A model being pulled
  // from the Hub shows its files' bytes done and total.
  if (starting || !registry.default) {
    const pulls = pulling.map((p) => ({
      model: p.reference,
      file: p.file,
      state: p.state,
      done: p.done,
      total: p.total,
    }));
    return Response.json(
      { status: "loading", ...counts, ...(pulls.length > 0 ? { pulling: pulls } : {}) },
      { status: 503 },
    );
  }
  const failure = models.map((m) => m.worker.journalFailure).find((f) => f !== null);
  if (!failure) return { status: "ok", ...counts };
  return Response.json({ status: "degraded", reason: `session log: ${failure.message}`, ...counts }, { status: 503 });
}

/**
 * GET /health/ready: whether a router should send this replica traffic
 * (docs/api/openai.md#health). 503 `loading` until the start is done,
 * `draining` once a stop signal began the drain, `degraded` when a session
 * log cannot be written; 200 `ready` otherwise. `/health` stays liveness.
 */
export function readiness(registry: ModelRegistry, starting = false, draining = false) {
  if (draining) return Response.json({ status: "draining" }, { status: 503, headers: { "retry-after": "5" } });
  const live = health(registry, starting);
  if (live instanceof Response) return live;
  return { ...live, status: "ready" };
}

/** `?autoload=1` (or `true`): a query flag is on unless absent, empty, `0` or `false`. */
function flagOn(value: string | null | undefined): boolean {
  return value !== undefined && value !== null && value !== "" && value !== "0" && value.toLowerCase() !== "false";
}

/**
 * GET /props[?model=ID][&autoload=1]: the default model, or the one named.
 * A known model that is not loaded is 400 `model_not_loaded` (as
 * llama-server's router answers), unless `autoload` asks to load it first.
 */
export async function props(
  registry: ModelRegistry,
  operator: OperatorSampling,
  id: string | null,
  autoload?: string | null,
) {
  let model: ServedModel;
  if (!id) model = namedOrDefault(registry, null);
  else {
    const entry = knownOr404(registry, id);
    if (flagOn(autoload)) model = await loadedOr404(registry, id);
    else if (entry.state === "loaded") model = entry.served!;
    else
      throw new RequestError(
        400,
        `model '${entry.id}' is not loaded; GET /props?model=${encodeURIComponent(entry.id)}&autoload=1 loads it`,
        "model_not_loaded",
        "model",
      );
  }
  const d = effectiveDefaults(operator, model.info.sampling);
  const dialect = model.dialect();
  return {
    model_alias: model.id,
    // The file name only: a reply never maps this machine's folders.
    model_path: basename(model.path),
    default_generation_settings: {
      n_ctx: model.contextWindow,
      params: {
        temperature: d.temperature,
        top_k: d.topK,
        top_p: d.topP,
        min_p: d.minP,
        repeat_penalty: d.repeatPenalty,
        presence_penalty: 0,
        frequency_penalty: 0,
        n_predict: -1,
      },
    },
    total_slots: model.worker.info.lanes,
    max_context: model.contextWindow,
    chat_template: model.info.chatTemplate ?? "",
    bos_token: model.info.specialTokens.bos ?? null,
    eos_token: model.info.specialTokens.eos ?? null,
    kv_cache: kvCache(model),
    capabilities: capabilitiesOf(model),
    // As /v1/models says them (capabilities.dialect).
    tool_call_wire: dialect.tool_call_wire,
    reasoning_markers: dialect.reasoning_markers,
    build_info: `superfluid (${model.runtime.version})`,
    // Where the weights went and the devices there are (docs/api/openai.md#models: runtime).
    offload: model.runtime.offload,
    devices: model.runtime.devices,
  };
}

/** The KV pool as the worker built it: layout, cells, bytes, the window, and why (kv-sizing.ts). */
export function kvCache(model: ServedModel) {
  const { sequences, kv } = model.worker.info;
  return {
    type_k: kv.typeK,
    type_v: kv.typeV,
    layout: kv.layout,
    sequences,
    // The most one conversation may hold: its own buffer, or its window in the shared pool.
    cells_per_sequence: model.contextWindow,
    cells_total: kv.cells,
    bytes: kv.bytes,
    bytes_per_token: kv.bytesPerToken,
    sizing: kv.summary,
  };
}

/** Per-class counts keyed by class name (interactive, completion, agent, background). */
function perClass(counts: readonly number[]): Record<string, number> {
  return Object.fromEntries(QOS_NAMES.map((name, i) => [name, counts[i] ?? 0]));
}

function tickProfile(s: EngineSnapshot, daemon: WorkerClient["tickProfile"]) {
  const t = s.timing ?? { ticks: 0, tickMs: 0, decodeMs: 0, sampleMs: 0, betweenMs: 0 };
  return {
    worker: {
      ticks: t.ticks,
      tick_ms: t.tickMs,
      decode_ms: t.decodeMs,
      sample_ms: t.sampleMs,
      between_ticks_ms: t.betweenMs,
    },
    daemon: {
      ticks: daemon.ticks,
      on_tick_ms: daemon.onTickMs,
      durable_wait_ms: daemon.durableWaitMs,
      deliver_ms: daemon.deliverMs,
    },
  };
}

/** One aggregate entry in llama.cpp's slot shape, with the engine's live numbers. */
export async function slots(model: ServedModel) {
  const { snapshot: s } = await model.worker.stats();
  const schedule = model.worker.schedule;
  const caps = schedule.classLanes;
  return [
    {
      id: 0,
      id_task: -1,
      n_ctx: s.cellsPerSequence,
      speculative: false,
      is_processing: s.activeLanes > 0,
      lanes: {
        total: s.lanes,
        active: s.activeLanes,
        prefilling: s.prefilling,
        decoding: s.activeLanes - s.prefilling,
        queued: s.queued,
        per_class: perClass(s.classLanes),
        // --class-lanes caps; a class without one is capped only by the lane count.
        caps: Object.fromEntries(QOS_NAMES.map((name) => [name, caps[name] ?? s.lanes])),
      },
      queue: { depth: s.queued, per_class: perClass(s.queueDepths), paused: s.paused },
      kv_pool: {
        layout: s.layout,
        sequences: s.sequences,
        cells_per_sequence: s.cellsPerSequence,
        cells_total: s.poolCells,
        cells_used: s.cellsUsed,
        live_sequences: s.liveSequences,
      },
      tick_plan: {
        prefill_budget: s.prefillBudget,
        // --prefill-budget as configured: 0 = the adaptive controller.
        prefill_budget_mode: schedule.prefillBudget === 0 ? "adaptive" : "fixed",
        decode_grant: s.activeLanes - s.prefilling,
        ms_per_prompt_token: s.msPerPromptToken ?? null,
        starvation_ticks: schedule.starvationTicks ?? null,
      },
      totals: {
        ticks: s.ticks,
        decoded_tokens: s.decodedTokens,
        generated_tokens: s.generatedTokens,
        prefilled_tokens: s.prefilledTokens,
        reused_tokens: s.reusedTokens,
        prefix_copies: s.prefixCopies,
        coalesced_requests: s.coalesced,
        pressure_evictions: s.pressureEvictions,
        space_evictions: s.spaceEvictions,
        space_pauses: s.spacePauses,
        preemptions: s.preemptions,
        adapter_switches: s.adapterSwitches,
        resumes: s.resumes,
        starvation_grants: s.starvationGrants,
        expired: s.expired,
      },
      prefix_cache: {
        pool_entries: s.prefixCache.poolEntries,
        host_entries: s.prefixCache.hostEntries,
        host_bytes: s.prefixCache.hostBytes,
        host_budget_bytes: s.prefixCache.hostBudgetBytes,
        host_spills: s.prefixCache.spills,
        host_imports: s.prefixCache.imports,
        host_import_failures: s.prefixCache.importFailures,
        host_evictions: s.prefixCache.hostEvictions,
        // cache_control pins (docs/design.md#pinned-prefixes): live pins, the tokens they hold, their budget, and those
        // that yielded.
        pins: {
          count: s.pins.count,
          tokens: s.pins.tokens,
          budget_tokens: s.pins.budgetTokens,
          yielded: s.pins.yielded,
        },
      },
      rates: { decode_tokens_per_second: s.decodeRate, prefill_tokens_per_second: s.prefillRate },
      // Milliseconds summed since the worker started (docs/api/openai.md#slots): where a tick's time goes.
      tick_profile: tickProfile(s, model.worker.tickProfile),
      respawns: model.worker.respawns,
    },
  ];
}

const tokenizeSchema = v.looseObject({
  model: opt(v.string()),
  content: opt(v.string()),
  text: opt(v.string()),
  input: opt(v.string()),
  add_special: opt(v.boolean()),
  with_pieces: opt(v.boolean()),
});

/**
 * The most characters /v1/tokenize takes (128 Ki): the reply, up to one token
 * a character, is built and serialized on the event loop, so it stays within
 * some tens of milliseconds there; longer text is tokenized in pieces.
 */
export const TOKENIZE_MAX_CHARS = 128 * 1024;

/** Tokenized on the model's prompt thread, with control-token text parsed. */
export async function tokenize(registry: ModelRegistry, body: unknown) {
  const req = parseWith(tokenizeSchema, body);
  const model = namedOrDefault(registry, req.model);
  const text = req.content ?? req.text ?? req.input;
  if (text === undefined || text === null)
    throw new RequestError(400, "content is required: the text to tokenize", null, "content");
  if (text.length > TOKENIZE_MAX_CHARS) {
    const field = req.content != null ? "content" : req.text != null ? "text" : "input";
    throw new RequestError(
      400,
      `${field} is ${text.length} characters long; /v1/tokenize takes at most ${TOKENIZE_MAX_CHARS}`,
      "text_too_long",
      field,
    );
  }
  // Held on the worker, as embeddings are: an unload waits for it (the pieces read the vocabulary it frees).
  return model.worker.hold(async () => {
    const tokens = Array.from(
      await model.prompts.tokenize(text, { addSpecial: req.add_special ?? false, parseSpecial: true }),
    );
    if (!req.with_pieces) return { tokens };
    return {
      tokens: tokens.map((id) => ({ id, piece: Buffer.from(model.tokenizer.tokenBytes(id)).toString("utf8") })),
    };
  });
}
