// Media on a text-only runtime (docs/api/openai.md#routes-not-served,
// #audio): every route that takes chat input refuses image and audio parts
// with a 400 naming the part (OpenAI's routes with `unsupported_input`), and
// OpenAI's audio routes read their form (the audio drained, never held) and
// answer 400 `unsupported_model`, after naming a missing `file` or `model`.
import { describe, expect, test } from "bun:test";
import { toFile } from "openai";
import { apiError, postJson, useServer } from "../support.ts";

const s = useServer({ fixture: "tiny-chat", maxContext: 1024 });

const PNG = "data:image/png;base64,iVBORw0KGgo=";
const PNG_BASE64 = "iVBORw0KGgo=";
const WAV_BASE64 = "UklGRg==";

/** An OpenAI envelope's 400 with `unsupported_input` naming `param`. */
async function openaiRefusal(path: string, body: unknown, param: string): Promise<void> {
  const r = await postJson(s, path, body);
  expect(r.status).toBe(400);
  expect(r.json.error).toMatchObject({ type: "invalid_request_error", code: "unsupported_input", param });
}

/** Anthropic's and Ollama's envelopes carry no code: the 400 and the message say it. */
async function plainRefusal(path: string, body: unknown, kind: "images" | "audio"): Promise<string> {
  const r = await postJson(s, path, body);
  expect(r.status).toBe(400);
  const message: string = typeof r.json.error === "string" ? r.json.error : r.json.error.message;
  expect(message).toContain(`does not accept ${kind}`);
  return message;
}

describe("image and audio parts on every chat route", () => {
  test("chat completions: image_url (a data: URL or a remote one) and input_audio, whole or streamed", async () => {
    for (const stream of [false, true]) {
      for (const part of [
        { type: "image_url", image_url: { url: PNG } },
        { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
        { type: "input_audio", input_audio: { data: WAV_BASE64, format: "wav" } },
      ]) {
        const body = {
          model: s.model,
          stream,
          messages: [{ role: "user", content: [{ type: "text", text: "what is this?" }, part] }],
        };
        await openaiRefusal("/v1/chat/completions", body, "messages[0].content[1]");
      }
    }
    // In an earlier turn too.
    const earlier = {
      model: s.model,
      messages: [
        { role: "user", content: [{ type: "image_url", image_url: { url: PNG } }] },
        { role: "assistant", content: "a cat" },
        { role: "user", content: "and now?" },
      ],
    };
    await openaiRefusal("/v1/chat/completions", earlier, "messages[0].content[0]");
  });

  test("Responses: input_image and input_audio parts", async () => {
    for (const part of [
      { type: "input_image", image_url: PNG },
      { type: "input_audio", input_audio: { data: WAV_BASE64, format: "wav" } },
    ]) {
      const body = {
        model: s.model,
        input: [{ role: "user", content: [{ type: "input_text", text: "what is this?" }, part] }],
      };
      await openaiRefusal("/v1/responses", body, "input[0].content[1]");
    }
  });

  test("Anthropic Messages and count_tokens: image blocks in a user turn, a tool result and an assistant turn (the system prompt takes text blocks only)", async () => {
    const image = { type: "image", source: { type: "base64", media_type: "image/png", data: PNG_BASE64 } };
    const cases = [
      { messages: [{ role: "user", content: [{ type: "text", text: "what is this?" }, image] }] },
      {
        messages: [
          { role: "user", content: "look" },
          { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "look", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: [image] }] },
        ],
      },
      {
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: [image] },
          { role: "user", content: "hi" },
        ],
      },
    ];
    for (const c of cases) {
      await plainRefusal("/v1/messages", { model: s.model, max_tokens: 16, ...c }, "images");
      await plainRefusal("/v1/messages/count_tokens", { model: s.model, ...c }, "images");
    }
  });

  test("Ollama: images on a chat message and on generate", async () => {
    await plainRefusal(
      "/api/chat",
      { model: s.model, stream: false, messages: [{ role: "user", content: "what is this?", images: [PNG_BASE64] }] },
      "images",
    );
    await plainRefusal(
      "/api/chat",
      { model: s.model, stream: true, messages: [{ role: "user", content: "what is this?", images: [PNG_BASE64] }] },
      "images",
    );
    await plainRefusal(
      "/api/generate",
      { model: s.model, stream: false, prompt: "what is this?", images: [PNG_BASE64] },
      "images",
    );
  });
});

/** A multipart form posted as it is built (fields and parts in the order given). */
function form(parts: [string, string | Blob, string?][]): FormData {
  const f = new FormData();
  for (const [name, value, filename] of parts) {
    if (typeof value === "string") f.append(name, value);
    else f.append(name, value, filename);
  }
  return f;
}

async function postForm(
  path: string,
  body: FormData | string,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any }> {
  const res = await fetch(`${s.url}${path}`, { method: "POST", body, headers });
  return { status: res.status, json: await res.json() };
}

const audio = (bytes: number) => new Blob([new Uint8Array(bytes)], { type: "audio/wav" });

describe("OpenAI's audio routes", () => {
  test("transcriptions and translations through the openai client: 400 unsupported_model naming the model", async () => {
    const file = () => toFile(Buffer.from("RIFF....WAVEfmt "), "speech.wav");
    const transcription = await apiError(
      s.client.audio.transcriptions.create({ file: await file(), model: "whisper-1" }),
    );
    const translation = await apiError(s.client.audio.translations.create({ file: await file(), model: "whisper-1" }));
    for (const e of [transcription, translation]) {
      expect(e.status).toBe(400);
      expect(e.code).toBe("unsupported_model");
      expect(e.param).toBe("model");
      expect(e.message).toContain("Whisper");
      expect(e.message).toContain("whisper-1");
    }
  });

  test("speech through the openai client: 400 unsupported_model", async () => {
    const e = await apiError(s.client.audio.speech.create({ model: "tts-1", input: "hello", voice: "alloy" }));
    expect(e.status).toBe(400);
    expect(e.code).toBe("unsupported_model");
    expect(e.param).toBe("model");
    const noInput = await postJson(s, "/v1/audio/speech", { model: "tts-1", voice: "alloy" });
    expect([noInput.status, noInput.json.error.param]).toEqual([400, "input"]);
  });

  test("a missing file is named before a missing model, and either before the refusal", async () => {
    for (const path of ["/v1/audio/transcriptions", "/v1/audio/translations"]) {
      const neither = await postForm(path, form([["language", "en"]]));
      expect([neither.status, neither.json.error.param, neither.json.error.code]).toEqual([400, "file", null]);
      const noFile = await postForm(path, form([["model", "whisper-1"]]));
      expect([noFile.status, noFile.json.error.param]).toEqual([400, "file"]);
      const noModel = await postForm(path, form([["file", audio(64), "a.wav"]]));
      expect([noModel.status, noModel.json.error.param]).toEqual([400, "model"]);
      // `file` as a plain field is not a file.
      const plain = await postForm(
        path,
        form([
          ["file", "not audio"],
          ["model", "whisper-1"],
        ]),
      );
      expect([plain.status, plain.json.error.param]).toEqual([400, "file"]);
      const json = await postForm(path, JSON.stringify({ file: "x", model: "whisper-1" }), {
        "content-type": "application/json",
      });
      expect([json.status, json.json.error.param]).toEqual([400, "file"]);
    }
  });

  test("a few MB of audio is drained, the model before it or after it; the server answers the next request", async () => {
    for (const order of ["model first", "file first"]) {
      const parts: [string, string | Blob, string?][] = [
        ["model", "whisper-1"],
        ["file", audio(4 * 1024 * 1024), "long.wav"],
        ["language", "en"],
      ];
      if (order === "file first") parts.reverse();
      const r = await postForm("/v1/audio/transcriptions", form(parts));
      expect([r.status, r.json.error.code, r.json.error.param]).toEqual([400, "unsupported_model", "model"]);
      const next = await postJson(s, "/v1/chat/completions", {
        model: s.model,
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 4,
      });
      expect(next.status).toBe(200);
    }
  });

  test("a form over OpenAI's 25 MB audio limit is a 413", async () => {
    const r = await postForm(
      "/v1/audio/transcriptions",
      form([
        ["file", audio(27 * 1024 * 1024), "huge.wav"],
        ["model", "whisper-1"],
      ]),
    );
    expect([r.status, r.json.error.code, r.json.error.param]).toEqual([413, "payload_too_large", "file"]);
  });
});
