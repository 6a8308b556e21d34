// What the Batches API tests share: input files written as JSONL and uploaded
// with the official client, and waiting on a batch (the hang guard is only
// that: no bound on how long a batch may take).
import type OpenAI from "openai";
import { toFile } from "openai";
import type { Batch } from "openai/resources/batches";

export const CHAT = "/v1/chat/completions";

/** One input line: a chat request under `custom_id`. */
export function chatLine(customId: string, body: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    custom_id: customId,
    method: "POST",
    url: CHAT,
    body: { model: "any-model", messages: [{ role: "user", content: `say hello (${customId})` }], ...body },
  };
}

/** Uploads lines (objects become JSON, strings go as they are) as a batch input file; returns its id. */
export async function uploadLines(client: OpenAI, lines: (Record<string, unknown> | string)[]): Promise<string> {
  const text = `${lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n")}\n`;
  const file = await client.files.create({ file: await toFile(Buffer.from(text), "input.jsonl"), purpose: "batch" });
  return file.id;
}

export const ENDED = ["completed", "failed", "cancelled", "expired"];

/** Polls a batch until `done` holds for it; the hang guard throws with the last state seen. */
export async function waitBatch(
  client: OpenAI,
  id: string,
  done: (b: Batch) => boolean,
  hangGuardMs = 300_000,
): Promise<Batch> {
  const started = performance.now();
  for (;;) {
    const b = await client.batches.retrieve(id);
    if (done(b)) return b;
    if (performance.now() - started > hangGuardMs)
      throw new Error(`batch ${id} still ${b.status} (${JSON.stringify(b.request_counts)}) after the hang guard`);
    await Bun.sleep(50);
  }
}

export const ended = (b: Batch) => ENDED.includes(b.status);

/** A file's JSONL content, parsed line by line. */
export async function fileLines(client: OpenAI, id: string): Promise<any[]> {
  const text = await (await client.files.content(id)).text();
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));
}
