// Fuzz generators for the routes that keep objects (docs/api/files.md,
// docs/api/batches.md, docs/api/responses.md): uploads good and broken
// (hand-built multipart: no boundary, cut bodies, too many parts, a file as a
// plain field), lists with bad query parameters, reads, deletes and cancels of
// objects made earlier in the run (`@@kind@@` placeholders, fuzz-pool.ts),
// unknown ids, and Responses creates with items, tools, formats and
// continuations. `makeObjects` makes the objects a run starts with.
import {
  BOOL,
  MODEL,
  STR,
  between,
  bytes,
  chance,
  get,
  intRange,
  json,
  multipart,
  numRange,
  pick,
  short,
  words,
  wrongField,
  type Part,
  type PoolKind,
  type Rng,
  type Spec,
} from "./fuzz-kit.ts";

const FILE_PURPOSES = ["assistants", "batch", "fine-tune", "vision", "user_data", "evals"];
const NO_FILE = "file-000000000000000000000000";

/** Chat lines of a batch input file, each a small generation. */
export function batchLines(n: number, tag: string): string {
  return `${Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      custom_id: `${tag}-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: MODEL, messages: [{ role: "user", content: `line ${i}` }], max_tokens: 4 },
    }),
  ).join("\n")}\n`;
}

const upload = (
  variant: string,
  body: Uint8Array,
  expect: number[],
  boundary: string | null,
  extra: Partial<Spec> = {},
): Spec => ({
  category: expect.includes(200) ? "files" : "files-bad",
  variant: `upload.${variant}`,
  expect,
  method: "POST",
  path: "/v1/files",
  headers: { "content-type": boundary === null ? "multipart/form-data" : `multipart/form-data; boundary=${boundary}` },
  body,
  ...extra,
});

function fileContent(r: Rng): { data: string | Uint8Array; batchable: boolean } {
  const kind = pick(r, ["words", "jsonl", "bad-jsonl", "binary", "big"]);
  if (kind === "jsonl") return { data: batchLines(between(r, 1, 3), `u${between(r, 0, 1e6)}`), batchable: true };
  if (kind === "bad-jsonl")
    return {
      data: pick(r, [
        '{"custom_id":"a"}\n{"custom_id":"a"}\n',
        "not json\n",
        "\n\n",
        '{"custom_id":"a","method":"GET","url":"/v1/x","body":5}\n',
      ]),
      batchable: true,
    };
  if (kind === "binary")
    return {
      data: new Uint8Array(Array.from({ length: between(r, 1, 4096) }, () => between(r, 0, 255))),
      batchable: false,
    };
  if (kind === "big")
    return { data: "lorem ipsum dolor sit amet\n".repeat(between(r, 40_000, 300_000)), batchable: false };
  return { data: words(r, between(r, 0, 200)), batchable: false };
}

export function filesUpload(r: Rng): Spec {
  const b = `----fuzz${between(r, 0, 1e9)}`;
  const { data } = fileContent(r);
  const purpose = chance(r, 0.4) ? "batch" : pick(r, FILE_PURPOSES);
  const filename = pick(r, ["input.jsonl", "données.txt", "../../etc/passwd", 'a"b.txt', "", "x".repeat(300), "notes"]);
  const file: Part = {
    name: "file",
    filename,
    type: pick(r, ["application/octet-stream", "application/jsonl", "text/plain"]),
    data,
  };
  const fields: Part[] = [{ name: "purpose", data: purpose }];
  if (chance(r, 0.2))
    fields.push(
      { name: "expires_after[anchor]", data: "created_at" },
      { name: "expires_after[seconds]", data: String(between(r, 3600, 2_592_000)) },
    );
  if (chance(r, 0.1)) fields.push({ name: "unknown_field", data: "ignored" });
  const parts = chance(r, 0.5) ? [file, ...fields] : [...fields, file];
  // An empty filename reads as a plain field unless typed application/octet-stream (busboy's rule): then it is
  // `upload`.
  const expect = filename === "" && file.type !== "application/octet-stream" ? [200, 400] : [200];
  return upload(`purpose=${purpose}`, multipart(b, parts), expect, b, { capture: "file" });
}

export function filesUploadBad(r: Rng): Spec {
  const b = "----fuzzbad";
  const file: Part = {
    name: "file",
    filename: "x.jsonl",
    type: "application/octet-stream",
    data: batchLines(1, "bad"),
  };
  const purpose: Part = { name: "purpose", data: "batch" };
  const cases: [string, () => Spec][] = [
    [
      "json-body",
      () =>
        json(
          "/v1/files",
          { file: "x", purpose: "batch" },
          { category: "files-bad", variant: "upload.json-body", expect: [400] },
        ),
    ],
    ["no-content-type", () => ({ ...upload("no-content-type", multipart(b, [file, purpose]), [400], b), headers: {} })],
    ["no-boundary", () => upload("no-boundary", multipart(b, [file, purpose]), [400], null)],
    ["wrong-boundary", () => upload("wrong-boundary", multipart("other", [file, purpose]), [400], b)],
    [
      "cut",
      () => {
        const whole = multipart(b, [purpose, file], true);
        return upload("cut", whole.subarray(0, between(r, 1, whole.length)), [400], b);
      },
    ],
    ["no-close", () => upload("no-close", multipart(b, [purpose, file], true), [400], b)],
    ["no-file", () => upload("no-file", multipart(b, [purpose]), [400], b)],
    ["no-purpose", () => upload("no-purpose", multipart(b, [file]), [400], b)],
    [
      "bad-purpose",
      () =>
        upload(
          "bad-purpose",
          multipart(b, [file, { name: "purpose", data: pick(r, ["batch_output", "", "BATCH", "x".repeat(100)]) }]),
          [400],
          b,
        ),
    ],
    ["file-as-field", () => upload("file-as-field", multipart(b, [{ name: "file", data: "x" }, purpose]), [400], b)],
    ["two-files", () => upload("two-files", multipart(b, [file, file, purpose]), [400], b)],
    [
      "expires-anchor",
      () =>
        upload(
          "expires-anchor",
          multipart(b, [
            file,
            purpose,
            { name: "expires_after[anchor]", data: "now" },
            { name: "expires_after[seconds]", data: "3600" },
          ]),
          [400],
          b,
        ),
    ],
    [
      "expires-seconds",
      () =>
        upload(
          "expires-seconds",
          multipart(b, [
            file,
            purpose,
            { name: "expires_after[anchor]", data: "created_at" },
            { name: "expires_after[seconds]", data: pick(r, ["1", "x", "", "2592001", "3600.5", "1e4"]) },
          ]),
          [400],
          b,
        ),
    ],
    [
      "too-many-fields",
      () =>
        upload(
          "too-many-fields",
          multipart(b, [file, purpose, ...Array.from({ length: 20 }, (_, i) => ({ name: `f${i}`, data: "v" }))]),
          [400],
          b,
        ),
    ],
    [
      "too-many-parts",
      () =>
        upload(
          "too-many-parts",
          multipart(b, [
            purpose,
            ...Array.from({ length: 40 }, (_, i) => ({ name: `p${i}`, filename: `p${i}`, data: "v" })),
            file,
          ]),
          [400],
          b,
        ),
    ],
    [
      "long-field",
      () => upload("long-field", multipart(b, [file, { name: "purpose", data: "b".repeat(70 * 1024) }]), [400], b),
    ],
    [
      "garbage",
      () =>
        upload(
          "garbage",
          new Uint8Array(Array.from({ length: between(r, 1, 2000) }, () => between(r, 0, 255))),
          [400],
          b,
        ),
    ],
    [
      "bad-part-header",
      () =>
        upload(
          "bad-part-header",
          bytes(
            `--${b}\r\nContent-Disposition: form-data; name="file"; filename="x"\r\nX-Broken\r\n\r\nabc\r\n--${b}--\r\n`,
          ),
          [400],
          b,
        ),
    ],
    [
      "declared-too-large",
      () => ({
        ...upload("declared-too-large", multipart(b, [file, purpose]), [413], b),
        raw: bytes(
          `POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=${b}\r\nContent-Length: ${600 * 2 ** 20}\r\nConnection: close\r\n\r\n`,
          [...multipart(b, [purpose])],
        ),
        halfClose: true,
      }),
    ],
  ];
  return pick(r, cases)[1]();
}

export function filesRead(r: Rng): Spec {
  const cat = { category: "files" };
  const cases: (() => Spec)[] = [
    () => {
      const q: string[] = [];
      if (chance(r, 0.3)) q.push(`purpose=${pick(r, [...FILE_PURPOSES, "batch_output", "nothing"])}`);
      if (chance(r, 0.3)) q.push(`order=${pick(r, ["asc", "desc"])}`);
      if (chance(r, 0.3)) q.push(`limit=${between(r, 1, 10_000)}`);
      const after = chance(r, 0.3) ? pick(r, ["@@file@@", "@@batchfile@@"]) : undefined;
      if (after) q.push(`after=${after}`);
      // A cursor another key made is an unknown id to this one: 400 as any never-seen id.
      return get(`/v1/files${q.length ? `?${q.join("&")}` : ""}`, {
        ...cat,
        variant: "list",
        expect: [200],
        expectHidden: [400],
      });
    },
    () => get(`/v1/files/${pick(r, ["@@file@@", "@@batchfile@@"])}`, { ...cat, variant: "get", expect: [200] }),
    () =>
      get(`/v1/files/${pick(r, ["@@file@@", "@@batchfile@@"])}/content`, { ...cat, variant: "content", expect: [200] }),
    () => get(`/v1/files/@@file~@@`, { ...cat, variant: "get.made-in-run", expect: [200, 404] }),
    () => get(`/v1/files/@@file~@@/content`, { ...cat, variant: "content.made-in-run", expect: [200, 404] }),
    () => ({
      ...get(`/v1/files/@@file~@@`, { ...cat, variant: "delete.made-in-run", expect: [200, 404] }),
      method: "DELETE",
    }),
  ];
  return pick(r, cases)();
}

export function filesBad(r: Rng): Spec {
  const cat = { category: "files-bad" };
  const id = pick(r, [NO_FILE, "file-x", "..%2F..%2Fetc%2Fpasswd", "%ZZ", `file-${"a".repeat(500)}`, "batch_123"]);
  const cases: (() => Spec)[] = [
    () =>
      get(
        `/v1/files?${pick(r, ["order=sideways", "limit=0", "limit=x", "limit=10001", "limit=", "limit=1.5", `after=${NO_FILE}`, "limit=-1"])}`,
        { ...cat, variant: "list.bad-query", expect: [400] },
      ),
    () => get(`/v1/files/${id}`, { ...cat, variant: "get.unknown", expect: [404] }),
    () => get(`/v1/files/${id}/content`, { ...cat, variant: "content.unknown", expect: [404] }),
    () => ({ ...get(`/v1/files/${id}`, { ...cat, variant: "delete.unknown", expect: [404] }), method: "DELETE" }),
    () => ({
      ...get("/v1/files/@@file@@", { ...cat, variant: "PUT file", expect: [405], expectHidden: [404, 405] }),
      method: "PUT",
    }),
    () => ({ ...get("/v1/files", { ...cat, variant: "DELETE /v1/files", expect: [405] }), method: "DELETE" }),
    () => ({
      ...get("/v1/files/@@file@@/content", { ...cat, variant: "POST content", expect: [405] }),
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
      expectHidden: [404, 405],
    }),
  ];
  return pick(r, cases)();
}

// ---------------------------------------------------------------- batches

export function batchesCreate(r: Rng): Spec {
  const body: Record<string, unknown> = { input_file_id: "@@batchfile@@" };
  if (chance(r, 0.6)) body.endpoint = "/v1/chat/completions";
  if (chance(r, 0.6)) body.completion_window = "24h";
  if (chance(r, 0.3)) body.metadata = { job: words(r, 1), n: String(between(r, 0, 99)) };
  if (chance(r, 0.1)) body.output_expires_after = { anchor: "created_at", seconds: 3600 };
  if (chance(r, 0.15)) {
    // A file made during the run: any purpose, any content (a failed validation is still a 200 batch).
    body.input_file_id = "@@file~@@";
    return json("/v1/batches", body, {
      category: "batches",
      variant: "create.made-in-run-file",
      expect: [200, 400, 404],
      capture: "batch",
    });
  }
  if (chance(r, 0.1)) {
    body.endpoint = "/v1/embeddings";
    return json("/v1/batches", body, {
      category: "batches",
      variant: "create.embeddings-endpoint-chat-lines",
      expect: [200],
      capture: "batch",
    });
  }
  return json("/v1/batches", body, { category: "batches", variant: "create", expect: [200], capture: "batch" });
}

const BATCH_WRONG: Record<string, unknown[]> = {
  input_file_id: [...STR, null, NO_FILE, "@@file@@"],
  endpoint: ["/v1/completions", "/v1/responses", "", 5, "/V1/CHAT/COMPLETIONS"],
  completion_window: ["1h", "", 24, "48h"],
  metadata: [
    "x",
    [1],
    { a: 5 },
    Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])),
    { ["k".repeat(65)]: "v" },
    { a: "v".repeat(513) },
  ],
};

export function batchesBad(r: Rng): Spec {
  const cat = { category: "batches-bad" };
  if (chance(r, 0.55)) {
    const { body, field, value } = wrongField(r, BATCH_WRONG, { input_file_id: "@@batchfile@@" });
    const expect = value === NO_FILE ? [404] : [400];
    // The fields are checked before the file is looked up: another key's file still gets the field's 400.
    return json("/v1/batches", body, {
      ...cat,
      variant: `create.${field}=${short(value)}`,
      expect,
      expectHidden: field === "input_file_id" ? [404] : [400, 404],
    });
  }
  const cases: (() => Spec)[] = [
    () =>
      json("/v1/batches", pick(r, [{}, [], { endpoint: "/v1/chat/completions" }]), {
        ...cat,
        variant: "create.no-file",
        expect: [400],
      }),
    () =>
      get(`/v1/batches?${pick(r, ["limit=0", "limit=101", "limit=x", "limit=2.5", "after=batch_nope"])}`, {
        ...cat,
        variant: "list.bad-query",
        expect: [400, 404],
      }),
    () =>
      get(`/v1/batches/${pick(r, ["batch_nope", "%ZZ", "x".repeat(400)])}`, {
        ...cat,
        variant: "get.unknown",
        expect: [404],
      }),
    () =>
      json(
        `/v1/batches/${pick(r, ["batch_nope", "%E0%A4%A"])}/cancel`,
        {},
        { ...cat, variant: "cancel.unknown", expect: [404] },
      ),
    () => ({
      ...get("/v1/batches/@@batch@@", { ...cat, variant: "DELETE batch", expect: [405] }),
      method: "DELETE",
      expectHidden: [404, 405],
    }),
    () =>
      get("/v1/batches/@@batch@@/cancel", { ...cat, variant: "GET cancel", expect: [405], expectHidden: [404, 405] }),
  ];
  return pick(r, cases)();
}

export function batchesRead(r: Rng): Spec {
  const cat = { category: "batches" };
  const cases: (() => Spec)[] = [
    () =>
      get(
        `/v1/batches${chance(r, 0.5) ? `?limit=${between(r, 1, 100)}${chance(r, 0.4) ? "&after=@@batch@@" : ""}` : ""}`,
        { ...cat, variant: "list", expect: [200] },
      ),
    () => get("/v1/batches/@@batch@@", { ...cat, variant: "get", expect: [200] }),
    () => get("/v1/batches/@@batch~@@", { ...cat, variant: "get.made-in-run", expect: [200, 404] }),
    // A batch that already ended cannot be cancelled (409); a running or waiting one answers cancelling/cancelled.
    () => json("/v1/batches/@@batch~@@/cancel", {}, { ...cat, variant: "cancel.made-in-run", expect: [200, 404, 409] }),
  ];
  return pick(r, cases)();
}

// ---------------------------------------------------------------- responses

const RESPONSE_TOOLS = [
  {
    type: "function",
    name: "get_weather",
    description: "weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
  {
    type: "namespace",
    name: "fs",
    description: "files",
    tools: [
      { type: "function", name: "read", parameters: { type: "object", properties: { path: { type: "string" } } } },
    ],
  },
  { type: "web_search" },
];

function responseInput(r: Rng): unknown {
  if (chance(r, 0.4)) return words(r, between(r, 1, 12));
  const items: unknown[] = [];
  if (chance(r, 0.3)) items.push({ type: "message", role: "developer", content: words(r, 4) });
  items.push({ role: "user", content: chance(r, 0.5) ? words(r, 5) : [{ type: "input_text", text: words(r, 5) }] });
  if (chance(r, 0.3)) {
    items.push(
      { type: "reasoning", summary: [{ type: "summary_text", text: "thinking" }] },
      { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' },
      { type: "function_call_output", call_id: "call_1", output: "12 degrees" },
    );
  }
  return items;
}

export function responsesCreate(r: Rng): Spec {
  const stream = chance(r, 0.35);
  const body: Record<string, unknown> = { model: MODEL, input: responseInput(r), max_output_tokens: between(r, 1, 24) };
  if (stream) body.stream = true;
  if (chance(r, 0.3)) body.instructions = words(r, 6);
  if (chance(r, 0.2)) body.store = false;
  if (chance(r, 0.2)) body.temperature = pick(r, [0, 0.7]);
  if (chance(r, 0.1)) body.metadata = { run: "fuzz" };
  if (chance(r, 0.15)) body.reasoning = { effort: pick(r, ["none", "minimal", "low", "high"]) };
  if (chance(r, 0.1))
    Object.assign(body, {
      include: ["reasoning.encrypted_content"],
      user: "u",
      prompt_cache_key: "k",
      truncation: "disabled",
    });
  if (chance(r, 0.25)) {
    body.tools = RESPONSE_TOOLS.slice(0, between(r, 1, 3));
    if (chance(r, 0.5))
      body.tool_choice = pick(r, ["auto", "none", "required", { type: "function", name: "get_weather" }]);
    if (chance(r, 0.2)) body.parallel_tool_calls = false;
  } else if (chance(r, 0.15)) {
    body.text = {
      format: pick(r, [
        { type: "json_object" },
        {
          type: "json_schema",
          name: "out",
          strict: true,
          schema: {
            type: "object",
            properties: { a: { type: "integer" } },
            required: ["a"],
            additionalProperties: false,
          },
        },
        { type: "text" },
      ]),
    };
  }
  let variant = stream ? "create.stream" : "create";
  let expect = [200];
  let expectHidden: number[] | undefined;
  if (chance(r, 0.3)) {
    const made = chance(r, 0.4);
    body.previous_response_id = made ? "@@response~@@" : "@@response@@";
    if (chance(r, 0.3)) delete body.model;
    variant += made ? ".continue-made-in-run" : ".continue";
    // Deleted meanwhile, or another key's: previous_response_not_found.
    expect = made ? [200, 400] : [200];
    expectHidden = [400];
  }
  const capture = body.store !== false && !stream ? ("response" as const) : undefined;
  return json("/v1/responses", body, {
    category: "responses",
    variant,
    expect,
    stream,
    ...(expectHidden ? { expectHidden } : {}),
    ...(capture ? { capture } : {}),
  });
}

export function responsesAborted(r: Rng): Spec {
  const body = { model: MODEL, input: words(r, 6), stream: true, max_output_tokens: between(r, 64, 512) };
  const abortAfter = chance(r, 0.6) ? { events: between(r, 1, 8) } : { ms: between(r, 0, 200) };
  return json("/v1/responses", body, {
    category: "responses-aborted",
    variant: "create.aborted",
    expect: [200],
    stream: true,
    abortAfter,
  });
}

const RESPONSES_WRONG: Record<string, unknown[]> = {
  model: [...STR, "nope"],
  input: [
    5,
    { a: 1 },
    [5],
    [{ type: "wizard" }],
    [{ role: "wizard", content: "x" }],
    [{ type: "item_reference", id: "x" }],
    [{ role: "user", content: [{ type: "input_image", image_url: "data:image/png;base64,AAAA" }] }],
    [{ role: "user", content: [{ type: "input_image", image_url: "https://example.com/a.png" }] }],
    [{ role: "user", content: [{ type: "input_file", file_id: "file-1" }] }],
    [{ role: "user", content: [{ type: "input_audio", input_audio: { data: "AAAA", format: "wav" } }] }],
    [{ type: "function_call_output", output: "x" }],
    [{ role: "user", content: [{ type: "input_text" }] }],
  ],
  background: [true],
  conversation: ["conv_1", { id: "conv_1" }],
  prompt: [{ id: "pmpt_1" }],
  previous_response_id: [5, "resp_nope", ""],
  store: [...BOOL.filter((v) => typeof v !== "boolean")],
  stream: [...BOOL.filter((v) => typeof v !== "boolean")],
  max_output_tokens: [...intRange(1), 0],
  temperature: numRange(0, 2),
  top_p: numRange(0, 1),
  tools: [
    "x",
    [5],
    [{ type: "wizard" }],
    [{ type: "function" }],
    [
      { type: "function", name: "f" },
      { type: "function", name: "f" },
    ],
    [{ type: "function", name: "f", parameters: "x" }],
  ],
  tool_choice: [
    5,
    "sometimes",
    { type: "allowed_tools", tools: [] },
    { type: "web_search" },
    { type: "function" },
    { type: "function", name: "undeclared" },
    { type: "mcp" },
  ],
  text: [
    "x",
    { format: "x" },
    { format: { type: "xml" } },
    { format: { type: "json_schema" } },
    { format: { type: "json_schema", name: "x", strict: true, schema: { type: "string", pattern: "(a+)+" } } },
  ],
  reasoning: ["x", { effort: "extreme" }],
  metadata: ["x", { a: 5 }],
};

export function responsesBad(r: Rng): Spec {
  const base = { model: MODEL, input: "x", max_output_tokens: 4 };
  const { body, field, value } = wrongField(r, RESPONSES_WRONG, base);
  if (field === "tool_choice" && chance(r, 0.6)) body.tools = [RESPONSE_TOOLS[0], RESPONSE_TOOLS[2]];
  // An empty previous_response_id reads as none; an unknown reasoning effort is passed to the template, which may
  // ignore it.
  const lenient =
    (field === "previous_response_id" && value === "") || (field === "reasoning" && typeof value === "object");
  const expect = field === "model" && typeof value === "string" && value !== "" ? [404] : lenient ? [200, 400] : [400];
  return json("/v1/responses", body, { category: "responses-bad", variant: `create.${field}=${short(value)}`, expect });
}

export function responsesRead(r: Rng): Spec {
  const cat = { category: "responses" };
  const cases: (() => Spec)[] = [
    () => get("/v1/responses/@@response@@", { ...cat, variant: "get", expect: [200] }),
    () => get("/v1/responses/@@response~@@", { ...cat, variant: "get.made-in-run", expect: [200, 404] }),
    () => {
      const q: string[] = [];
      if (chance(r, 0.4)) q.push(`limit=${between(r, 1, 100)}`);
      if (chance(r, 0.4)) q.push(`order=${pick(r, ["asc", "desc"])}`);
      if (chance(r, 0.3)) q.push("after=msg_fuzz_a");
      return get(`/v1/responses/@@response@@/input_items${q.length ? `?${q.join("&")}` : ""}`, {
        ...cat,
        variant: "input_items",
        expect: [200],
      });
    },
    () => ({
      ...get("/v1/responses/@@response~@@", { ...cat, variant: "delete.made-in-run", expect: [200, 404] }),
      method: "DELETE",
    }),
    () =>
      json(
        "/v1/responses/@@response@@/cancel",
        {},
        { ...cat, variant: "cancel", expect: [400], expectHidden: [400, 404] },
      ),
  ];
  return pick(r, cases)();
}

export function responsesReadBad(r: Rng): Spec {
  const cat = { category: "responses-bad" };
  const id = pick(r, ["resp_nope", "%ZZ", "..%2F..%2Fetc", `resp_${"0".repeat(300)}`]);
  const cases: (() => Spec)[] = [
    () => get(`/v1/responses/${id}`, { ...cat, variant: "get.unknown", expect: [404] }),
    () => ({ ...get(`/v1/responses/${id}`, { ...cat, variant: "delete.unknown", expect: [404] }), method: "DELETE" }),
    () => get(`/v1/responses/${id}/input_items`, { ...cat, variant: "input_items.unknown", expect: [404] }),
    () =>
      get(
        `/v1/responses/@@response@@/input_items?${pick(r, ["limit=0", "limit=101", "limit=x", "order=up", "after=msg_nope", "limit="])}`,
        { ...cat, variant: "input_items.bad-query", expect: [400] },
      ),
    () => ({
      ...get("/v1/responses/@@response@@", { ...cat, variant: "PUT response", expect: [405] }),
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: "{}",
      expectHidden: [404, 405],
    }),
    () => get("/v1/responses", { ...cat, variant: "GET /v1/responses", expect: [404, 405] }),
  ];
  return pick(r, cases)();
}

// ---------------------------------------------------------------- setup

/**
 * Makes one of each kept object with `headers` (a key's, under --auth): a user_data file, a batch input file, a batch,
 * a stored response.
 */
export async function makeObjects(base: string, headers: Record<string, string>): Promise<Record<PoolKind, string>> {
  const send = async (path: string, init: RequestInit): Promise<{ id: string }> => {
    const res = await fetch(base + path, {
      ...init,
      headers: { ...headers, ...(init.headers as Record<string, string>) },
    });
    const text = await res.text();
    if (res.status !== 200)
      throw new Error(`fuzz setup: ${init.method ?? "GET"} ${path} answered ${res.status}: ${text.slice(0, 300)}`);
    return JSON.parse(text) as { id: string };
  };
  const b = "----fuzzsetup";
  const form = (purpose: string, data: string) => ({
    method: "POST",
    headers: { "content-type": `multipart/form-data; boundary=${b}` },
    body: multipart(b, [
      { name: "purpose", data: purpose },
      { name: "file", filename: `${purpose}.jsonl`, type: "application/jsonl", data },
    ]),
  });
  const file = (await send("/v1/files", form("user_data", "kept file\n"))).id;
  const batchfile = (await send("/v1/files", form("batch", batchLines(2, "setup")))).id;
  const batch = (
    await send("/v1/batches", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input_file_id: batchfile, endpoint: "/v1/chat/completions", completion_window: "24h" }),
    })
  ).id;
  const input = [
    { type: "message", id: "msg_fuzz_a", role: "user", content: "hello" },
    { type: "message", id: "msg_fuzz_b", role: "user", content: "there" },
  ];
  const response = (
    await send("/v1/responses", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, input, max_output_tokens: 8 }),
    })
  ).id;
  return { file, batchfile, batch, response };
}
