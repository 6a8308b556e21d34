// A batch's results as OpenAI shows them (docs/api/batches.md#output-files):
// each request that ran becomes an output line, `{id, custom_id, response:
// {status_code, request_id, body}, error}`; those that answered 2xx go to the
// output file, the others (and, for an expired batch, those that never ran)
// to the error file. Both files are /v1/files entries with purpose
// `batch_output`, streamed from the results file, never held whole.
import { newLineId, newRequestId } from "./batch.ts";
import type { BatchLine } from "./input.ts";
import type { BatchState, LineResult, OutputLine } from "./state.ts";

/** An upload written aside and synced, not yet a file (the Files store's StagedUpload). */
export interface StagedFile {
  readonly bytes: number;
}

/** What the batches need of the Files store (src/files/store.ts); `owner` is a scope, as there. */
export interface BatchFiles {
  get(id: string, owner?: string): { id: string; purpose: string } | undefined;
  contentPath(id: string): string;
  stage(body: AsyncIterable<Uint8Array>): Promise<StagedFile>;
  commit(staged: StagedFile, info: { filename: string; purpose: string; owner?: string }): Promise<{ id: string }>;
  discard(staged: StagedFile): Promise<void>;
  delete(id: string, owner?: string): Promise<boolean>;
}

/** What running a line gave: the status and JSON body the route would have answered. */
export interface LineReply {
  status: number;
  body: unknown;
}

/**
 * A reply as its recorded result; a non-2xx one also carries its error's code and message, as the error file shows it.
 */
export function resultOf(i: number, customId: string, reply: LineReply): LineResult {
  const ok = reply.status >= 200 && reply.status < 300;
  const response = { status_code: reply.status, request_id: newRequestId(), body: reply.body };
  let error: OutputLine["error"] = null;
  if (!ok) {
    const e = (reply.body as { error?: { code?: unknown; type?: unknown; message?: unknown } } | null)?.error;
    const code = typeof e?.code === "string" ? e.code : typeof e?.type === "string" ? e.type : "server_error";
    error = {
      code,
      message: typeof e?.message === "string" ? e.message : `the request failed with status ${reply.status}`,
    };
  }
  return { i, ok, out: { id: newLineId(), custom_id: customId, response, error } };
}

/** The error line of a request an expired batch never ran. */
export function expiredLine(line: BatchLine): OutputLine {
  return {
    id: newLineId(),
    custom_id: line.customId,
    response: null,
    error: {
      code: "batch_expired",
      message: "This request could not be executed before the completion window expired.",
    },
  };
}

/** Lines an expired batch never ran, for its error file: how many, and (streamed from its input) which. */
export interface UnrunLines {
  count: number;
  lines: () => AsyncIterable<OutputLine>;
}

const NO_UNRUN: UnrunLines = { count: 0, lines: async function* () {} };

/** Bytes handed to the store at a time: whole lines, about this many. */
const WRITE_BYTES = 64 * 1024;

/** JSONL bytes, a few lines per chunk. */
async function* jsonl(lines: AsyncIterable<string>): AsyncGenerator<Uint8Array> {
  let pending: string[] = [];
  let size = 0;
  for await (const line of lines) {
    pending.push(line, "\n");
    size += line.length + 1;
    if (size >= WRITE_BYTES) {
      yield Buffer.from(pending.join(""));
      pending = [];
      size = 0;
    }
  }
  if (pending.length > 0) yield Buffer.from(pending.join(""));
}

async function* outputLines(state: BatchState, id: string, ok: boolean, extra: UnrunLines): AsyncGenerator<string> {
  for await (const text of state.resultLines(id)) {
    if (text === "") continue;
    const r = JSON.parse(text) as LineResult;
    if (r.ok === ok) yield JSON.stringify(r.out);
  }
  if (extra.count > 0) for await (const line of extra.lines()) yield JSON.stringify(line);
}

/**
 * Writes the output file (when any request succeeded) and the error file
 * (when any failed, or `unrun` lines are to be reported), both owned by the
 * batch's owner, and returns their ids. Both are staged before either is
 * committed, so a file store that cannot take both (its quota) is left with
 * neither.
 */
export async function writeOutputFiles(
  files: BatchFiles,
  state: BatchState,
  batch: { id: string; owner: string | undefined },
  counts: { completed: number; failed: number },
  unrun: UnrunLines = NO_UNRUN,
): Promise<{ output: string | null; error: string | null }> {
  const batchId = batch.id;
  const owner = batch.owner === undefined ? {} : { owner: batch.owner };
  const output =
    counts.completed > 0 ? await files.stage(jsonl(outputLines(state, batchId, true, NO_UNRUN))) : undefined;
  let error: StagedFile | undefined;
  try {
    error =
      counts.failed + unrun.count > 0 ? await files.stage(jsonl(outputLines(state, batchId, false, unrun))) : undefined;
  } catch (err) {
    if (output) await files.discard(output);
    throw err;
  }
  let outputId: string | null = null;
  try {
    if (output)
      outputId = (
        await files.commit(output, { filename: `${batchId}_output.jsonl`, purpose: "batch_output", ...owner })
      ).id;
    const errorId = error
      ? (await files.commit(error, { filename: `${batchId}_error.jsonl`, purpose: "batch_output", ...owner })).id
      : null;
    return { output: outputId, error: errorId };
  } catch (err) {
    // A commit failed (the disk, not the quota): neither file is left behind.
    if (error) await files.discard(error);
    if (outputId !== null) await files.delete(outputId, batch.owner).catch(() => {});
    throw err;
  }
}
