// The batch service (src/batches/service.ts) with a scripted line executor
// and a real file store: the waiting line's limit (429 batch_queue_full),
// first-in-first-out runs, the completion window's end, a restart that
// resumes at the first unrecorded line (a torn last record trimmed), and
// output files that do not fit the file store.
import { afterAll, describe, expect, test } from "bun:test";
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Batch } from "../../src/batches/batch.ts";
import type { LineReply } from "../../src/batches/output.ts";
import { BatchService, type BatchServiceOptions } from "../../src/batches/service.ts";
import { FileStore } from "../../src/files/store.ts";
import { RequestError } from "../../src/pipeline/request-error.ts";

const CHAT = "/v1/chat/completions";
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "superfluid-batch-service-"));
  dirs.push(d);
  return d;
}

/**
 * A line executor the test drives: each call waits until released (or
 * aborted, answering as a cut-off reply would); `auto` answers at once.
 */
class Lines {
  readonly ran: string[] = [];
  readonly pending: { id: string; release: () => void }[] = [];
  auto = false;
  execute = (body: Record<string, unknown>, signal: AbortSignal): Promise<LineReply> => {
    const id = body.id as string;
    this.ran.push(id);
    const reply: LineReply = body.fail ? { status: 400, body: { error: { message: "bad line", type: "invalid_request_error", param: null, code: "bad" } } } : { status: 200, body: { object: "chat.completion", id, usage: { prompt_tokens: 3, completion_tokens: 2 } } };
    if (this.auto) return Promise.resolve(reply);
    return new Promise((resolve) => {
      const entry = { id, release: () => resolve(reply) };
      this.pending.push(entry);
      signal.addEventListener("abort", () => resolve({ status: 200, body: { cut: true } }), { once: true });
    });
  };
  /** Waits for the line `id` to be running, then lets it finish. */
  async release(id: string): Promise<void> {
    await until(() => this.pending.some((p) => p.id === id));
    this.pending.find((p) => p.id === id)!.release();
  }
}

/** Polls `cond`; the hang guard only stops a hung wait. */
async function until(cond: () => boolean, hangGuardMs = 30_000): Promise<void> {
  const started = performance.now();
  while (!cond()) {
    if (performance.now() - started > hangGuardMs) throw new Error("condition not reached before the hang guard");
    await Bun.sleep(2);
  }
}

interface Harness {
  files: FileStore;
  lines: Lines;
  service: BatchService;
  dir: string;
}

/** A service on `root` (a fresh folder by default): batches under batches/, its file store under files/. */
async function harness(opts: { root?: string; files?: FileStore; lines?: Lines } & Pick<BatchServiceOptions, "limits" | "windowSec"> = {}): Promise<Harness> {
  const { root, ...rest } = opts;
  const dir = root ?? tempDir();
  const files = opts.files ?? (await FileStore.open(join(dir, "files")));
  const lines = opts.lines ?? new Lines();
  const service = BatchService.open({ ...rest, dir: join(dir, "batches"), files, execute: lines.execute, modelId: "served-model", log: () => {} });
  service.start();
  return { files, lines, service, dir };
}

async function input(files: FileStore, ids: string[], extra: Record<string, unknown> = {}): Promise<string> {
  const text = ids.map((id) => JSON.stringify({ custom_id: id, method: "POST", url: CHAT, body: { id, ...extra } })).join("\n");
  return (await files.create({ filename: "in.jsonl", purpose: "batch", body: text })).id;
}

async function fileLines(files: FileStore, id: string | null): Promise<any[]> {
  if (id === null) return [];
  return readFileSync(files.contentPath(id), "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l));
}

const create = (h: Harness, fileId: string) => h.service.create({ input_file_id: fileId, endpoint: CHAT, completion_window: "24h" });
const ended = (b: Batch) => ["completed", "failed", "cancelled", "expired"].includes(b.status);

describe("batch service", () => {
  test("with its slots taken and its waiting line full, a new batch is a 429 batch_queue_full; a freed place takes one again", async () => {
    const h = await harness({ limits: { running: 1, waiting: 2 } });
    const file = await input(h.files, ["x"]);
    const a = await create(h, file);
    const b = await create(h, file);
    const c = await create(h, file);
    await until(() => h.lines.pending.length === 1); // a's line is in flight; b and c wait
    expect([a.status, b.status, c.status]).toEqual(["in_progress", "validating", "validating"]);
    const refused = await create(h, file).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(RequestError);
    expect((refused as RequestError).status).toBe(429);
    expect((refused as RequestError).code).toBe("batch_queue_full");
    // Cancelling a waiting batch ends it at once and frees its place.
    expect((await h.service.cancel(c.id)).status).toBe("cancelled");
    expect((await create(h, file)).status).toBe("validating");
    await h.service.stop();
    h.files.close();
  });

  test("batches run first in first out, one line at a time, and lines with errors are counted as failed", async () => {
    const h = await harness({ limits: { running: 1, waiting: 10 } });
    h.lines.auto = true;
    const first = await create(h, await input(h.files, ["a1", "a2", "a3"]));
    const second = await create(h, await input(h.files, ["b1", "b2"], { fail: true }));
    await until(() => ended(h.service.get(second.id)));
    expect(h.lines.ran).toEqual(["a1", "a2", "a3", "b1", "b2"]);
    const a = h.service.get(first.id);
    expect(a.status).toBe("completed");
    expect(a.request_counts).toEqual({ total: 3, completed: 3, failed: 0 });
    expect(a.usage.input_tokens).toBe(9);
    expect(a.usage.output_tokens).toBe(6);
    const b = h.service.get(second.id);
    expect(b.status).toBe("completed");
    expect(b.request_counts).toEqual({ total: 2, completed: 0, failed: 2 });
    expect(b.output_file_id).toBeNull();
    const errors = await fileLines(h.files, b.error_file_id);
    expect(errors.map((l) => [l.custom_id, l.response.status_code, l.error])).toEqual([
      ["b1", 400, { code: "bad", message: "bad line" }],
      ["b2", 400, { code: "bad", message: "bad line" }],
    ]);
    await h.service.stop();
    h.files.close();
  });

  test("the completion window's end: the line in flight is cut off and the lines that never ran go to the error file as batch_expired", async () => {
    const h = await harness({ windowSec: 1 });
    const ids = ["e1", "e2", "e3"];
    const created = await create(h, await input(h.files, ids));
    // e1 is let through (unless the window, whole seconds, ends first); e2 then waits for the end.
    await h.lines.release("e1");
    await until(() => ended(h.service.get(created.id)));
    const b = h.service.get(created.id);
    expect(b.status).toBe("expired");
    expect(b.expired_at).toBeGreaterThanOrEqual(b.created_at);
    const ran = b.request_counts.completed;
    expect(b.request_counts).toEqual({ total: 3, completed: ran, failed: 0 });
    expect((await fileLines(h.files, b.output_file_id)).map((l) => l.custom_id)).toEqual(ids.slice(0, ran));
    const errors = await fileLines(h.files, b.error_file_id);
    expect(errors.map((l) => [l.custom_id, l.response, l.error.code])).toEqual(ids.slice(ran).map((id) => [id, null, "batch_expired"]));
    // The line in flight at the end was started, cut off and not recorded.
    expect(h.lines.ran).toEqual(ids.slice(0, ran + 1));
    await h.service.stop();
    h.files.close();
  });

  test("a restart resumes at the first unrecorded line: the line cut off by the stop runs again, recorded lines never do, a torn record is trimmed", async () => {
    const first = await harness();
    const created = await create(first, await input(first.files, ["r1", "r2", "r3", "r4"]));
    await first.lines.release("r1");
    await first.lines.release("r2");
    await until(() => first.lines.ran.includes("r3"));
    await first.service.stop(); // r3 is in flight: aborted, not recorded
    expect(first.service.get(created.id).status).toBe("in_progress");
    first.files.close();
    // A crash mid-append would leave part of a record behind.
    appendFileSync(join(first.dir, "batches", `${created.id}.results.jsonl`), '{"i":2,"ok":true,"out":{"id":"batch_req_torn"');

    const lines = new Lines();
    lines.auto = true;
    const second = await harness({ root: first.dir, lines });
    await until(() => ended(second.service.get(created.id)));
    expect(lines.ran).toEqual(["r3", "r4"]);
    const b = second.service.get(created.id);
    expect(b.status).toBe("completed");
    expect(b.request_counts).toEqual({ total: 4, completed: 4, failed: 0 });
    const out = await fileLines(second.files, b.output_file_id);
    expect(out.map((l) => l.custom_id)).toEqual(["r1", "r2", "r3", "r4"]);
    expect(new Set(out.map((l) => l.id)).size).toBe(4);
    await second.service.stop();
    second.files.close();
  });

  test("a cancel that outlives its server: a batch left cancelling ends cancelled on the next start", async () => {
    const first = await harness();
    const created = await create(first, await input(first.files, ["c1", "c2"]));
    await first.lines.release("c1");
    await until(() => first.lines.ran.includes("c2"));
    // Stop first, so the cancel is recorded but the batch cannot finish it here.
    const stopping = first.service.stop();
    await first.service.cancel(created.id);
    await stopping;
    first.files.close();
    const second = await harness({ root: first.dir });
    await until(() => ended(second.service.get(created.id)));
    const b = second.service.get(created.id);
    expect(b.status).toBe("cancelled");
    expect(b.request_counts.completed).toBe(1);
    expect(second.lines.ran).toEqual([]);
    await second.service.stop();
    second.files.close();
  });

  test("output files that do not fit the file store: the batch fails with files_quota_exceeded", async () => {
    const dir = tempDir();
    const files = await FileStore.open(join(dir, "files"), { maxBytes: 400 });
    const h = await harness({ root: dir, files });
    h.lines.auto = true;
    const created = await create(h, await input(h.files, ["q1", "q2"]));
    await until(() => ended(h.service.get(created.id)));
    const b = h.service.get(created.id);
    expect(b.status).toBe("failed");
    expect(b.errors!.data[0]!.code).toBe("files_quota_exceeded");
    await h.service.stop();
    files.close();
  });
});
