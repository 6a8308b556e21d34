// OpenAI's audio routes (docs/api/openai.md#audio), refused: llama.cpp has
// no Whisper (speech to text) and no text-to-speech, so no model served here
// transcribes, translates or speaks. The refusal is still OpenAI's: a client
// that left out `file` or `model` is told that first, as OpenAI would, and
// otherwise gets 400 `unsupported_model` naming the model.
//
// Transcriptions and translations are multipart/form-data uploads, read as
// they arrive by @fastify/busboy (as the Files API reads its uploads,
// files.ts): the audio part is drained unread, never held, and the reading
// stops once `file` and `model` have both been seen (the listener drains the
// rest after the reply).
import Busboy, { type BusboyInstance } from "@fastify/busboy";
import type { Elysia } from "elysia";
import type { Readable } from "node:stream";
import { bodyReader, readBodyStep, readJsonBody } from "../body.ts";
import { RequestError, invalidRequest } from "../../daemon/request-error.ts";

/** OpenAI's cap on one audio upload (25 MB); the form may carry this much beside it. */
const MAX_AUDIO_BYTES = 25 * 1024 * 1024;
const FORM_OVERHEAD_BYTES = 1024 * 1024;

const missing = (field: string) => invalidRequest(`Missing required parameter: '${field}'.`, field);
const tooLarge = () =>
  new RequestError(
    413,
    `the audio file is larger than OpenAI's limit of ${MAX_AUDIO_BYTES} bytes (25 MiB)`,
    "payload_too_large",
    "file",
  );

/** What a form carried: whether a `file` part came, and `model`. */
interface AudioForm {
  file: boolean;
  model: string | undefined;
}

/** One multipart audio form being read until `file` and `model` are both seen, the body ends, or the first refusal. */
class FormReader {
  private readonly form: BusboyInstance;
  private readonly seen: AudioForm = { file: false, model: undefined };
  private failure: { err: unknown } | undefined;
  private settled!: () => void;
  /** Resolves once reading may stop: a refusal, or both fields seen. */
  private readonly enough = new Promise<void>((resolve) => (this.settled = resolve));

  constructor(contentType: string) {
    this.form = new Busboy({
      headers: { "content-type": contentType },
      // The small fields (model, prompt, language, ...) are held to a few KiB each.
      limits: { fieldSize: 64 * 1024, fields: 32, parts: 64, headerPairs: 64 },
    });
    this.form.on("file", (field: string, part: Readable) => {
      // Never read: the route refuses whatever the audio holds.
      part.resume();
      if (field === "file") this.seen.file = true;
      this.check();
    });
    this.form.on("field", (field: string, value: string) => {
      if (field === "file")
        return this.fail(
          invalidRequest("'file' must be a file part (a part with a filename), not a plain field", "file"),
        );
      if (field === "model") this.seen.model = value;
      this.check();
    });
    for (const event of ["partsLimit", "fieldsLimit", "filesLimit"])
      this.form.on(event, () => this.fail(invalidRequest("the form has too many parts", "file")));
    this.form.on("error", (err: unknown) =>
      this.fail(invalidRequest(`the multipart body is malformed: ${(err as Error).message}`, "file")),
    );
  }

  private check(): void {
    if (this.seen.file && this.seen.model !== undefined) this.settled();
  }

  private fail(err: unknown): void {
    this.failure ??= { err };
    this.settled();
  }

  /** Feeds the body to the parser until reading may stop, then says what the form carried (or throws its refusal). */
  async read(body: ReadableStream<Uint8Array>): Promise<AudioForm> {
    const reader = bodyReader(body);
    let total = 0;
    const stop = this.enough.then(() => "stop" as const);
    for (;;) {
      // The JSON routes' idle deadline (a 408), and a 400 for a body cut short.
      const step = await Promise.race([readBodyStep(reader), stop]).catch((err: unknown) => {
        this.fail(err);
        return "stop" as const;
      });
      if (step === "stop") break;
      if (step.done) {
        const finished = new Promise<void>((resolve) => this.form.once("finish", () => resolve()));
        this.form.end();
        await Promise.race([finished, stop]);
        break;
      }
      total += step.value.byteLength;
      if (total > MAX_AUDIO_BYTES + FORM_OVERHEAD_BYTES) {
        this.fail(tooLarge());
        break;
      }
      if (!this.form.write(step.value))
        await Promise.race([new Promise((resolve) => this.form.once("drain", resolve)), stop]);
    }
    reader.cancel().catch(() => {});
    if (this.failure) throw this.failure.err;
    return this.seen;
  }
}

/** The form's `file` and `model`, checked in that order; refused when not multipart. */
async function readAudioForm(request: Request): Promise<AudioForm & { model: string }> {
  const contentType = request.headers.get("content-type") ?? "";
  const essence = contentType.split(";", 1)[0]!.trim().toLowerCase();
  if (essence !== "multipart/form-data" || !/;\s*boundary=/i.test(contentType)) {
    throw invalidRequest(
      `the request must be multipart/form-data with the fields 'file' and 'model', not '${essence || "no content type"}'`,
      "file",
    );
  }
  if (Number(request.headers.get("content-length") ?? NaN) > MAX_AUDIO_BYTES + FORM_OVERHEAD_BYTES) throw tooLarge();
  if (!request.body) throw missing("file");
  const form = await new FormReader(contentType).read(request.body);
  if (!form.file) throw missing("file");
  if (form.model === undefined || form.model === "") throw missing("model");
  return { ...form, model: form.model };
}

/** POST /v1/audio/transcriptions and /translations: the form checked, then refused. */
async function speechToText(request: Request, what: "transcribe" | "translate"): Promise<never> {
  const { model } = await readAudioForm(request);
  throw new RequestError(
    400,
    `the model '${model}' cannot ${what} audio: this server runs models on llama.cpp, which has no Whisper (speech to text)`,
    "unsupported_model",
    "model",
  );
}

/** POST /v1/audio/speech: the JSON body's `model` and `input` checked, then refused. */
async function speech(request: Request): Promise<never> {
  const body = await readJsonBody(request);
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidRequest("request body must be a JSON object");
  const { model, input } = body as { model?: unknown; input?: unknown };
  if (model === undefined || model === null) throw missing("model");
  if (input === undefined || input === null) throw missing("input");
  throw new RequestError(
    400,
    `the model '${String(model)}' cannot speak: this server runs models on llama.cpp, which has no text-to-speech`,
    "unsupported_model",
    "model",
  );
}

/** Adds the audio routes to the OpenAI family's app. */
export function mountAudio(app: Elysia): void {
  const noParse = { parse: "none" as const };
  app
    .post("/v1/audio/transcriptions", ({ request }) => speechToText(request, "transcribe"), noParse)
    .post("/v1/audio/translations", ({ request }) => speechToText(request, "translate"), noParse)
    .post("/v1/audio/speech", ({ request }) => speech(request), noParse);
}
