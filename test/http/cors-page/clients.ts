// The browser side of test/http/cors-browser.test.ts: a page's code calling the
// server through the official clients with their browser flags, bundled for the
// browser by Bun.build when the test starts. Each call answers what the page
// could see: the reply's text and the headers it could read, or the error.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

export interface Target {
  baseURL: string;
  /** The key, or a placeholder on a server without keys (both clients insist on one). */
  apiKey: string;
  model: string;
}

export type Outcome =
  | { ok: true; text: string; chunks: number; warm: string | null; replica: string | null }
  | { ok: false; error: string; status: number | null };

/** The error classes both clients have, by the names a test compares (a bundle renames the classes themselves). */
type Sdk = {
  AuthenticationError: abstract new (...a: never[]) => Error;
  APIConnectionError: abstract new (...a: never[]) => Error;
};

/** A failed call as the page sees it: which error the client raised, and the HTTP status when the reply was readable. */
function failure(err: unknown, sdk: Sdk): Outcome {
  const status = (err as { status?: unknown }).status;
  const error =
    err instanceof sdk.AuthenticationError
      ? "AuthenticationError"
      : err instanceof sdk.APIConnectionError
        ? "APIConnectionError"
        : `unexpected: ${String(err)}`;
  return { ok: false, error, status: typeof status === "number" ? status : null };
}

/** A chat completion streamed through `openai`, counting the chunks that carried text. */
async function openaiStream(t: Target): Promise<Outcome> {
  const client = new OpenAI({
    baseURL: `${t.baseURL}/v1`,
    apiKey: t.apiKey,
    dangerouslyAllowBrowser: true,
    maxRetries: 0,
  });
  try {
    const { data: stream, response } = await client.chat.completions
      .create({ model: t.model, messages: [{ role: "user", content: "Three facts about Oslo." }], stream: true })
      .withResponse();
    let text = "";
    let chunks = 0;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content ?? "";
      if (delta !== "") chunks++;
      text += delta;
    }
    const headers = response.headers;
    return {
      ok: true,
      text,
      chunks,
      warm: headers.get("x-superfluid-warm"),
      replica: headers.get("x-superfluid-replica"),
    };
  } catch (err) {
    return failure(err, OpenAI);
  }
}

/** A Messages call through `@anthropic-ai/sdk`. */
async function anthropicMessage(t: Target): Promise<Outcome> {
  const client = new Anthropic({ baseURL: t.baseURL, apiKey: t.apiKey, dangerouslyAllowBrowser: true, maxRetries: 0 });
  try {
    const { data: message, response } = await client.messages
      .create({ model: t.model, max_tokens: 64, messages: [{ role: "user", content: "Three facts about Oslo." }] })
      .withResponse();
    const text = message.content.map((b) => (b.type === "text" ? b.text : "")).join("");
    const headers = response.headers;
    return {
      ok: true,
      text,
      chunks: 1,
      warm: headers.get("x-superfluid-warm"),
      replica: headers.get("x-superfluid-replica"),
    };
  } catch (err) {
    return failure(err, Anthropic);
  }
}

(globalThis as Record<string, unknown>).corsClients = { openaiStream, anthropicMessage };
