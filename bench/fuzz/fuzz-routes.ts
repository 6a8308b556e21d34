// Fuzz generators for the OpenAI family's other routes and the server's own:
// embeddings and rerank (docs/api/embeddings.md), audio (refused, after its
// form is checked), the models list and the model-admin routes, LoRA
// adapters (docs/api/lora.md), /props, /slots, /metrics, /health.
// Unloading the embedding or rerank model is part of the mix: the next
// request naming it loads it again (503 model_loading meanwhile).
import {
  MODEL,
  RELOADING,
  SERVED,
  STR,
  between,
  chance,
  get,
  intRange,
  json,
  multipart,
  pick,
  short,
  words,
  wrongField,
  type Rng,
  type Spec,
} from "./fuzz-kit.ts";

/** The adapter file the LoRA routes load (set by fuzz.ts once the fixture exists; a fixed name for --show). */
export const LORA = { path: "tiny-chat-lora.gguf" };

export function embeddings(r: Rng): Spec {
  const model = chance(r, 0.8) ? SERVED.embed : pick(r, [MODEL, SERVED.rerank]);
  const form = pick(r, ["string", "strings", "ids", "id-arrays", "mixed", "many"]);
  const input =
    form === "string"
      ? words(r, between(r, 1, 20))
      : form === "strings"
        ? Array.from({ length: between(r, 1, 8) }, () => words(r, 4))
        : form === "ids"
          ? Array.from({ length: between(r, 1, 10) }, () => between(r, 5, 2000))
          : form === "id-arrays"
            ? [
                [5, 6, 7],
                [8, 9],
              ]
            : form === "mixed"
              ? ["a b c", [5, 6]]
              : Array.from({ length: between(r, 64, 300) }, (_, i) => `input ${i}`);
  const body: Record<string, unknown> = { model, input };
  if (chance(r, 0.3)) body.encoding_format = pick(r, ["float", "base64"]);
  if (chance(r, 0.2)) body.dimensions = between(r, 1, 64);
  if (chance(r, 0.1)) body.user = "fuzz";
  const ok = model === SERVED.embed;
  return json("/v1/embeddings", body, {
    category: "embeddings",
    variant: `embeddings.${ok ? "embed" : "other-model"}.${form}`,
    expect: ok ? [200, ...RELOADING] : [400, ...RELOADING],
  });
}

const EMBED_WRONG: Record<string, unknown[]> = {
  model: [...STR, "nope"],
  input: [
    5,
    true,
    { a: 1 },
    [],
    "",
    [""],
    [[]],
    [null],
    [-1],
    [99_999_999],
    [1.5],
    Array.from({ length: 2049 }, () => "x"),
    "lorem ipsum ".repeat(30_000),
  ],
  encoding_format: [...STR, "base32", ""],
  dimensions: [...intRange(1, 64), 0],
};

export function embeddingsBad(r: Rng): Spec {
  const { body, field, value } = wrongField(r, EMBED_WRONG, { model: SERVED.embed, input: "x" });
  const expect = field === "model" && value === "nope" ? [404] : [400, ...RELOADING];
  return json("/v1/embeddings", body, {
    category: "embeddings-bad",
    variant: `embeddings.${field}=${short(value)}`,
    expect,
  });
}

export function rerank(r: Rng): Spec {
  const path = pick(r, ["/v1/rerank", "/v1/rerank", "/rerank"]);
  const onRerank = chance(r, 0.6);
  const model = onRerank ? SERVED.rerank : pick(r, [SERVED.embed, MODEL]);
  const documents = Array.from({ length: between(r, 1, 12) }, () =>
    chance(r, 0.7) ? words(r, between(r, 1, 10)) : { text: words(r, 5) },
  );
  const body: Record<string, unknown> = { model, query: words(r, between(r, 1, 6)), documents };
  if (chance(r, 0.3)) body.top_n = between(r, 1, 15);
  if (chance(r, 0.3)) body.return_documents = chance(r, 0.5);
  // Rerank on a chat model is refused; on any embedding model it is served (cosine on tiny-embed).
  const ok = model !== MODEL;
  return json(path, body, {
    category: "rerank",
    variant: `rerank.${model}`,
    expect: ok ? [200, ...RELOADING] : [400, ...RELOADING],
  });
}

const RERANK_WRONG: Record<string, unknown[]> = {
  model: [5, "nope"],
  query: [5, null, [], { a: 1 }],
  documents: ["x", [], [5], [{}], [{ text: 5 }], [null], Array.from({ length: 3 }, () => "lorem ipsum ".repeat(1000))],
  top_n: [...intRange(1), 0],
  return_documents: ["yes", 1],
};

export function rerankBad(r: Rng): Spec {
  const { body, field, value } = wrongField(r, RERANK_WRONG, {
    model: SERVED.rerank,
    query: "water",
    documents: ["sea", "rock"],
  });
  const expect = field === "model" && value === "nope" ? [404] : [400, ...RELOADING];
  return json("/v1/rerank", body, { category: "rerank-bad", variant: `rerank.${field}=${short(value)}`, expect });
}

export function audio(r: Rng): Spec {
  const cat = { category: "audio" };
  const b = "----fuzzaudio";
  const file = {
    name: "file",
    filename: "a.wav",
    type: "audio/wav",
    data: new Uint8Array(Array.from({ length: between(r, 0, 4096) }, () => between(r, 0, 255))),
  };
  const model = { name: "model", data: pick(r, ["whisper-1", MODEL, ""]) };
  const path = pick(r, ["/v1/audio/transcriptions", "/v1/audio/translations"]);
  const form = (variant: string, body: Uint8Array, ctype = `multipart/form-data; boundary=${b}`): Spec => ({
    ...cat,
    variant,
    expect: [400],
    method: "POST",
    path,
    headers: { "content-type": ctype },
    body,
  });
  const cases: (() => Spec)[] = [
    () => form("form", multipart(b, chance(r, 0.5) ? [file, model] : [model, file, { name: "language", data: "en" }])),
    () => form("no-file", multipart(b, [model])),
    () => form("no-model", multipart(b, [file])),
    () => form("file-as-field", multipart(b, [{ name: "file", data: "x" }, model])),
    () => form("cut", multipart(b, [model, file], true).subarray(0, between(r, 1, 200))),
    () => form("json", Buffer.from('{"model":"whisper-1"}'), "application/json"),
    () => form("no-boundary", multipart(b, [file, model]), "multipart/form-data"),
    () =>
      form(
        "many-parts",
        multipart(
          b,
          Array.from({ length: 80 }, (_, i) => ({ name: `p${i}`, data: "v" })),
        ),
      ),
    () =>
      json(
        "/v1/audio/speech",
        pick(r, [
          { model: "tts-1", input: "hello", voice: "alloy" },
          { input: "x" },
          { model: "tts-1" },
          [],
          { model: null, input: null },
        ]),
        { ...cat, variant: "speech", expect: [400] },
      ),
    () => get(path, { ...cat, variant: `GET ${path}`, expect: [405] }),
  ];
  return pick(r, cases)();
}

export function models(r: Rng): Spec {
  const cat = { category: "models" };
  const cases: (() => Spec)[] = [
    () => get("/v1/models", { ...cat, variant: "list", expect: [200] }),
    () =>
      get(`/v1/models/${pick(r, [MODEL, SERVED.embed, SERVED.rerank, "claude-sonnet-4-5"])}`, {
        ...cat,
        variant: "get",
        expect: [200],
      }),
    () =>
      get(`/v1/models/${pick(r, ["nope", "%ZZ", "a/b/c", "..%2F..", "x".repeat(2000)])}`, {
        ...cat,
        variant: "get.unknown",
        expect: [404],
      }),
    () =>
      get(`/props?model=${pick(r, [SERVED.embed, SERVED.rerank, MODEL])}${chance(r, 0.5) ? "&autoload=1" : ""}`, {
        ...cat,
        variant: "props.model",
        expect: [200, ...RELOADING],
      }),
    () =>
      get(`/props?${pick(r, ["model=nope", "autoload=maybe", "model=", "model=%ZZ"])}`, {
        ...cat,
        variant: "props.bad-query",
        expect: [200, 400, 404],
      }),
    () =>
      get(
        pick(r, ["/slots", "/slots?model=x", "/health", "/health?x=1", "/metrics", "/v1/metrics", "/metrics?name[]=x"]),
        { ...cat, variant: "server-routes", expect: [200] },
      ),
    () => ({
      ...get(pick(r, ["/metrics", "/v1/metrics", "/slots", "/props"]), {
        ...cat,
        variant: "server-routes.POST",
        expect: [405],
      }),
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    }),
  ];
  return pick(r, cases)();
}

/**
 * The admin routes: loading what is loaded, unloading the embedding and rerank models, bad ids and bodies. Never the
 * chat model.
 */
export function modelAdmin(r: Rng): Spec {
  const cat = { category: "model-admin", admin: true };
  const other = pick(r, [SERVED.embed, SERVED.rerank]);
  const cases: (() => Spec)[] = [
    // Loading a loaded model makes it the default: only the chat model is loaded this way, so the default stays.
    () => json("/v1/models/load", { id: MODEL }, { ...cat, variant: "load.chat", expect: [200] }),
    // Not loaded (already unloaded): 400 model_not_loaded.
    () =>
      json("/v1/models/unload", { id: other }, { ...cat, variant: "unload.other", expect: [200, 400, ...RELOADING] }),
    () => ({
      ...get(`/v1/models/${other}`, { ...cat, variant: "delete.other", expect: [200, 400, ...RELOADING] }),
      method: "DELETE",
    }),
    () =>
      json(
        "/v1/models/load",
        { id: pick(r, ["/nonexistent/model.gguf", "nope", "org/repo-GGUF:Q4_K_M"]) },
        { ...cat, variant: "load.missing", expect: [404] },
      ),
    () =>
      json(
        "/v1/models/load",
        { id: pick(r, ["/etc/hostname", "/proc/self/status", "/dev/null", "/"]) },
        { ...cat, variant: "load.not-gguf", expect: [400, 404] },
      ),
    () =>
      json(pick(r, ["/v1/models/load", "/v1/models/unload"]), pick(r, [{}, { id: 5 }, { id: "" }, [], { model: 5 }]), {
        ...cat,
        variant: "bad-body",
        expect: [400],
      }),
    () => json("/v1/models/unload", { id: "nope" }, { ...cat, variant: "unload.unknown", expect: [404] }),
    () => ({
      ...get(`/v1/models/${pick(r, ["nope", "%ZZ"])}`, { ...cat, variant: "delete.unknown", expect: [404] }),
      method: "DELETE",
    }),
  ];
  return pick(r, cases)();
}

export function lora(r: Rng): Spec {
  const cat = { category: "lora" };
  const admin = { ...cat, admin: true };
  const cases: (() => Spec)[] = [
    () =>
      get(pick(r, ["/v1/lora", `/v1/lora?model=${MODEL}`, "/lora-adapters"]), {
        ...cat,
        variant: "list",
        expect: [200],
      }),
    () =>
      get(`/v1/lora?model=${pick(r, ["nope", SERVED.embed])}`, {
        ...cat,
        variant: "list.other-model",
        expect: [200, 400, 404, ...RELOADING],
      }),
    // Scale 0 and below 0.5 leave the built-in model's replies as they are (docs/api/lora.md#the-test-adapter).
    () =>
      json(
        "/v1/lora/load",
        { path: LORA.path, scale: pick(r, [0, 0.2, 0.4]), ...(chance(r, 0.3) ? { model: MODEL } : {}) },
        { ...admin, variant: "load", expect: [200] },
      ),
    () =>
      json(
        "/v1/lora/load",
        { path: pick(r, ["/nonexistent.gguf", "/etc/hostname", "/dev/null", "/"]) },
        { ...admin, variant: "load.bad-file", expect: [400, 404] },
      ),
    () =>
      json(
        "/v1/lora/load",
        { path: LORA.path, model: SERVED.embed },
        { ...admin, variant: "load.embed-model", expect: [400, ...RELOADING] },
      ),
    () => json("/v1/lora/unload", { id: between(r, 0, 30) }, { ...admin, variant: "unload", expect: [200, 404] }),
    () =>
      json(
        pick(r, ["/v1/lora/load", "/v1/lora/unload"]),
        wrongField(
          r,
          { path: [5, "", null], scale: ["x", Number.POSITIVE_INFINITY, null], id: ["x", -1, 1.5], model: [5, "nope"] },
          {},
        ).body,
        { ...admin, variant: "bad-body", expect: [400, 404] },
      ),
    () =>
      json(
        "/lora-adapters",
        Array.from({ length: between(r, 0, 3) }, () => ({ id: between(r, 0, 30), scale: pick(r, [0, 0.3]) })),
        { ...admin, variant: "scales", expect: [200, 400] },
      ),
    () =>
      json("/lora-adapters", pick(r, [{}, [5], [{ id: "x" }], "x"]), {
        ...admin,
        variant: "scales.bad",
        expect: [400],
      }),
    () =>
      json(
        CHAT_PATH,
        { model: MODEL, messages: [{ role: "user", content: "x" }], max_tokens: 4, lora: [{ id: 0, scale: 1 }] },
        { ...cat, variant: "chat.per-request-lora", expect: [400] },
      ),
  ];
  return pick(r, cases)();
}
const CHAT_PATH = "/v1/chat/completions";
