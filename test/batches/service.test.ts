// The batch service (src/batches/service.ts) with a scripted line executor
// and a real file store: the waiting line's limit (429 batch_queue_full),
// first-in-first-out runs, the completion window's end, a restart that
// resumes at the first unrecorded line (a torn last record trimmed), the
// batch's own copy of its input (it outlives the upload), a first save that
// fails, output files that do not fit the file store, and memory that does
// not grow with the input file while a batch runs.
import { afterAll, describe, expect, spyOn, test } from "bun:test";
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Batch } from "../../src/batches/batch.ts";
import type { LineReply } from "../../src/batches/output.ts";
import { BatchService, type BatchServiceOptions } from "../../src/batches/service.ts";
import { BatchState } from "../../src/batches/state.ts";
import { FileStore } from "../../src/files/store.ts";
import { RequestError } from "../../src/daemon/request-error.ts";

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
    const reply: LineReply = body.fail
      ? {
          status: 400,
          body: { error: { message: "bad line", type: "invalid_request_error", param: null, code: "bad" } },
        }
      : { status: 200, body: { object: "chat.completion", id, usage: { prompt_tokens: 3, completion_tokens: 2 } } };
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
async function harness(
  opts: { root?: string; files?: FileStore; lines?: Lines } & Pick<BatchServiceOptions, "limits" | "windowSec"> = {},
): Promise<Harness> {
  const { root, ...rest } = opts;
  const dir = root ?? tempDir();
  const files = opts.files ?? (await FileStore.open(join(dir, "files")));
  const lines = opts.lines ?? new Lines();
  const service = BatchService.open({
    ...rest,
    dir: join(dir, "batches"),
    files,
    execute: lines.execute,
    modelId: "served-model",
    log: () => {},
  });
  service.start();
  return { files, lines, service, dir };
}

/** One input line for the scripted executor: its body names the line (`fail` makes it answer 400). */
const line = (id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ custom_id: id, method: "POST", url: CHAT, body: { id, ...extra } });

async function input(files: FileStore, ids: string[], extra: Record<string, unknown> = {}): Promise<string> {
  const text = ids.map((id) => line(id, extra)).join("\n");
  return (await files.create({ filename: "in.jsonl", purpose: "batch", body: text })).id;
}

async function fileLines(files: FileStore, id: string | null): Promise<any[]> {
  if (id === null) return [];
  return readFileSync(files.contentPath(id), "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l));
}

/** The batch's own copy of its input file. */
const inputCopy = (h: Harness, batchId: string) => join(h.dir, "batches", `${batchId}.input.jsonl`);
/** Copies of input files under batches/, staged ones included. */
const inputCopies = (h: Harness) => readdirSync(join(h.dir, "batches")).filter((n) => n.includes(".input."));
/** Waits for an ended batch's copy to go (removed just after its last status is saved). */
const copiesRemoved = (h: Harness) => until(() => inputCopies(h).length === 0);

const create = (h: Harness, fileId: string) =>
  h.service.create({ input_file_id: fileId, endpoint: CHAT, completion_window: "24h" });
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
    // e1 is let through (unless the window, whole seconds, ends before it even
    // starts, as on a slow machine); e2 then waits for the end.
    await until(() => h.lines.pending.some((p) => p.id === "e1") || ended(h.service.get(created.id)));
    h.lines.pending.find((p) => p.id === "e1")?.release();
    await until(() => ended(h.service.get(created.id)));
    const b = h.service.get(created.id);
    expect(b.status).toBe("expired");
    expect(b.expired_at).toBeGreaterThanOrEqual(b.created_at);
    const ran = b.request_counts.completed;
    expect(b.request_counts).toEqual({ total: 3, completed: ran, failed: 0 });
    expect((await fileLines(h.files, b.output_file_id)).map((l) => l.custom_id)).toEqual(ids.slice(0, ran));
    const errors = await fileLines(h.files, b.error_file_id);
    expect(errors.map((l) => [l.custom_id, l.response, l.error.code])).toEqual(
      ids.slice(ran).map((id) => [id, null, "batch_expired"]),
    );
    // The line in flight at the end (none when the window ended before the
    // first one started) was started, cut off and not recorded.
    expect(h.lines.ran).toEqual(ids.slice(0, h.lines.ran.length));
    expect(h.lines.ran.length - ran).toBeGreaterThanOrEqual(0);
    expect(h.lines.ran.length - ran).toBeLessThanOrEqual(1);
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
    appendFileSync(
      join(first.dir, "batches", `${created.id}.results.jsonl`),
      '{"i":2,"ok":true,"out":{"id":"batch_req_torn"',
    );

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
    // The batch has ended: its copy of the input is gone.
    await copiesRemoved(second);
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

  test("a batch runs from its own copy of the input: the upload deleted mid-batch, then a restart, and the batch still completes with every result", async () => {
    const first = await harness();
    const fileId = await input(first.files, ["d1", "d2", "d3", "d4"]);
    const created = await create(first, fileId);
    // A hard link to the upload's bytes (same filesystem): no copy was made.
    expect(statSync(inputCopy(first, created.id)).ino).toBe(statSync(first.files.contentPath(fileId)).ino);
    await first.lines.release("d1");
    await until(() => first.lines.ran.includes("d2"));
    expect(await first.files.delete(fileId)).toBe(true);
    await first.lines.release("d2");
    await until(() => first.lines.ran.includes("d3"));
    await first.service.stop(); // d3 is in flight: aborted, not recorded
    first.files.close();

    const lines = new Lines();
    lines.auto = true;
    const second = await harness({ root: first.dir, lines });
    await until(() => ended(second.service.get(created.id)));
    expect(lines.ran).toEqual(["d3", "d4"]);
    const b = second.service.get(created.id);
    expect(b.status).toBe("completed");
    expect(b.request_counts).toEqual({ total: 4, completed: 4, failed: 0 });
    expect((await fileLines(second.files, b.output_file_id)).map((l) => l.custom_id)).toEqual(["d1", "d2", "d3", "d4"]);
    await copiesRemoved(second);
    await second.service.stop();
    second.files.close();
  });

  test("an upload deleted while its batch waits for a slot: the batch runs from its copy; an expired one lists its unrun lines from it", async () => {
    const h = await harness({ limits: { running: 1, waiting: 10 } });
    const blocker = await create(h, await input(h.files, ["w0"]));
    const fileId = await input(h.files, ["w1", "w2"]);
    const waiting = await create(h, fileId);
    expect(waiting.status).toBe("validating");
    await h.files.delete(fileId);
    h.lines.auto = true;
    await h.lines.release("w0");
    await until(() => ended(h.service.get(waiting.id)));
    expect(h.service.get(blocker.id).status).toBe("completed");
    expect(h.service.get(waiting.id).status).toBe("completed");
    expect(h.lines.ran).toEqual(["w0", "w1", "w2"]);
    await copiesRemoved(h);
    await h.service.stop();
    h.files.close();

    const x = await harness({ windowSec: 1, limits: { running: 1, waiting: 10 } });
    const holder = await create(x, await input(x.files, ["x0"]));
    const expiring = await x.files.create({
      filename: "in.jsonl",
      purpose: "batch",
      body: [line("x1"), line("x2")].join("\n"),
    });
    const late = await create(x, expiring.id);
    await x.files.delete(expiring.id);
    await until(() => ended(x.service.get(late.id)) && ended(x.service.get(holder.id)));
    const b = x.service.get(late.id);
    expect(b.status).toBe("expired");
    const errors = await fileLines(x.files, b.error_file_id);
    expect(errors.map((l) => [l.custom_id, l.error.code])).toEqual([
      ["x1", "batch_expired"],
      ["x2", "batch_expired"],
    ]);
    await copiesRemoved(x);
    await x.service.stop();
    x.files.close();
  });

  test("a batch whose first save fails is not created: a 500, nothing listed, nothing run, no copy of the input left", async () => {
    const h = await harness();
    h.lines.auto = true;
    const good = await input(h.files, ["s1"]);
    const bad = (await h.files.create({ filename: "in.jsonl", purpose: "batch", body: "not json\n" })).id;
    const save = spyOn(BatchState.prototype, "save").mockImplementation(() => {
      throw new Error("ENOSPC: no space left on device");
    });
    try {
      for (const fileId of [good, bad]) {
        const refused = await create(h, fileId).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(refused).toBeInstanceOf(RequestError);
        expect((refused as RequestError).status).toBe(500);
        expect((refused as RequestError).code).toBe("batch_not_saved");
        expect((refused as RequestError).message).not.toContain(h.dir);
      }
    } finally {
      save.mockRestore();
    }
    expect(h.service.list({}).data).toEqual([]);
    expect(inputCopies(h)).toEqual([]); // create() removed them before it answered
    // Saving works again: the same file makes a batch that runs.
    const b = await create(h, good);
    await until(() => ended(h.service.get(b.id)));
    expect(h.service.get(b.id).status).toBe("completed");
    expect(h.lines.ran).toEqual(["s1"]);
    await h.service.stop();
    h.files.close();
  });

  test("an output file that fits the quota beside an error file that does not: the batch fails and leaves neither file behind", async () => {
    const text = [line("ok1"), line("bad1", { fail: true })].join("\n");
    // The same batch on an unbounded store gives both files' sizes (the scripted replies and the ids' lengths are
    // fixed).
    const free = await harness();
    free.lines.auto = true;
    const sized = await create(
      free,
      (await free.files.create({ filename: "in.jsonl", purpose: "batch", body: text })).id,
    );
    await until(() => ended(free.service.get(sized.id)));
    const done = free.service.get(sized.id);
    expect(done.request_counts).toEqual({ total: 2, completed: 1, failed: 1 });
    const outputBytes = free.files.get(done.output_file_id!)!.bytes;
    const errorBytes = free.files.get(done.error_file_id!)!.bytes;
    await free.service.stop();
    free.files.close();

    const dir = tempDir();
    const files = await FileStore.open(join(dir, "files"), {
      maxBytes: Buffer.byteLength(text) + outputBytes + errorBytes - 1,
    });
    const h = await harness({ root: dir, files });
    h.lines.auto = true;
    const inputFile = await files.create({ filename: "in.jsonl", purpose: "batch", body: text });
    const created = await create(h, inputFile.id);
    await until(() => ended(h.service.get(created.id)));
    const b = h.service.get(created.id);
    expect(b.status).toBe("failed");
    expect(b.errors!.data[0]!.code).toBe("files_quota_exceeded");
    expect([b.output_file_id, b.error_file_id]).toEqual([null, null]);
    expect(files.list().data.map((f) => f.id)).toEqual([inputFile.id]);
    expect(readdirSync(join(dir, "files")).filter((n) => n !== "tmp")).toHaveLength(2); // the input's .data and .json
    await h.service.stop();
    files.close();
  });

  test("memory while a batch runs does not grow with its input file: only the line running is held", async () => {
    const LINE_COUNT = 200;
    const PAD = 200_000; // 40 MB of input
    const h = await harness();
    // Built and uploaded in its own scope, so the test holds none of the text afterwards.
    const fileId = await (async () => {
      const lines = Array.from({ length: LINE_COUNT }, (_, i) =>
        JSON.stringify({
          custom_id: `m${i}`,
          method: "POST",
          url: CHAT,
          body: { id: `m${i}`, pad: String(i % 10).repeat(PAD) },
        }),
      );
      return (await h.files.create({ filename: "in.jsonl", purpose: "batch", body: lines.join("\n") })).id;
    })();
    const inputBytes = h.files.get(fileId)!.bytes;
    expect(inputBytes).toBeGreaterThan(LINE_COUNT * PAD);
    Bun.gc(true);
    const before = process.memoryUsage().heapUsed;
    const created = await create(h, fileId);
    await h.lines.release("m0");
    await until(() => h.lines.pending.some((p) => p.id === "m1"));
    // m0 has run; m1 is in flight, its body held by the executor.
    Bun.gc(true);
    const grown = process.memoryUsage().heapUsed - before;
    expect(grown).toBeLessThan(inputBytes / 8);
    await h.service.cancel(created.id);
    await until(() => ended(h.service.get(created.id)));
    await h.service.stop();
    h.files.close();
  });
});
