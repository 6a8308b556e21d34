// A batch's results as OpenAI shows them (docs/api/batches.md#output-files):
// each request that ran becomes an output line, `{id, custom_id, response:
// {status_code, request_id, body}, error}`; those that answered 2xx go to the
// output file, the others (and, for an expired batch, those that never ran)
// to the error file. Both files are /v1/files entries with purpose
// `batch_output`, streamed from the results file, never held whole.
import { newLineId, newRequestId } from "./batch.ts";
import type { BatchLine } from "./input.ts";
import type { BatchState, LineResult, OutputLine } from "./state.ts";

/** What the batches need of the Files store (src/files/store.ts). */
export interface BatchFiles {
  get(id: string): { id: string; purpose: string } | undefined;
  contentPath(id: string): string;
  create(input: { filename: string; purpose: string; body: ReadableStream<Uint8Array> | Uint8Array | string }): Promise<{ id: string }>;
}

/** What running a line gave: the status and JSON body the route would have answered. */
export interface LineReply {
  status: number;
  body: unknown;
}

/** A reply as its recorded result; a non-2xx one also carries its error's code and message, as the error file shows it. */
export function resultOf(i: number, customId: string, reply: LineReply): LineResult {
  const ok = reply.status >= 200 && reply.status < 300;
  const response = { status_code: reply.status, request_id: newRequestId(), body: reply.body };
  let error: OutputLine["error"] = null;
  if (!ok) {
    const e = (reply.body as { error?: { code?: unknown; type?: unknown; message?: unknown } } | null)?.error;
    const code = typeof e?.code === "string" ? e.code : typeof e?.type === "string" ? e.type : "server_error";
    error = { code, message: typeof e?.message === "string" ? e.message : `the request failed with status ${reply.status}` };
  }
  return { i, ok, out: { id: newLineId(), custom_id: customId, response, error } };
}

/** The error line of a request an expired batch never ran. */
export function expiredLine(line: BatchLine): OutputLine {
  return {
    id: newLineId(),
    custom_id: line.customId,
    response: null,
    error: { code: "batch_expired", message: "This request could not be executed before the completion window expired." },
  };
}

/** Lines as a JSONL byte stream, one pull per line. */
function jsonlStream(lines: AsyncGenerator<string>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const step = await lines.next();
      if (step.done) controller.close();
      else controller.enqueue(encoder.encode(step.value + "\n"));
    },
    async cancel() {
      await lines.return(undefined);
    },
  });
}

async function* outputLines(state: BatchState, id: string, ok: boolean, extra: OutputLine[]): AsyncGenerator<string> {
  for await (const text of state.resultLines(id)) {
    if (text === "") continue;
    const r = JSON.parse(text) as LineResult;
    if (r.ok === ok) yield JSON.stringify(r.out);
  }
  for (const line of extra) yield JSON.stringify(line);
}

/**
 * Writes the output file (when any request succeeded) and the error file
 * (when any failed, or `unrun` lines are to be reported) and returns their ids.
 */
export async function writeOutputFiles(
  files: BatchFiles,
  state: BatchState,
  batchId: string,
  counts: { completed: number; failed: number },
  unrun: OutputLine[] = [],
): Promise<{ output: string | null; error: string | null }> {
  const output =
    counts.completed > 0
      ? (await files.create({ filename: `${batchId}_output.jsonl`, purpose: "batch_output", body: jsonlStream(outputLines(state, batchId, true, [])) })).id
      : null;
  const error =
    counts.failed + unrun.length > 0
      ? (await files.create({ filename: `${batchId}_error.jsonl`, purpose: "batch_output", body: jsonlStream(outputLines(state, batchId, false, unrun)) })).id
      : null;
  return { output, error };
}
