// Batch state on disk, under <sessions>/batches/ (docs/api/batches.md#durability):
// for each batch `<id>.json`, its object (replaced whole, through a
// temporary file, fsync and rename), and `<id>.results.jsonl`, one line per
// request that ran, appended and fsynced before the next request starts. A
// restart reads both: the requests with a result are done, the first one
// without is where the batch resumes, so none runs twice and none is lost. A
// result cut off by a crash mid-write never counted (its line had not
// returned) and is trimmed away before anything is appended after it.
// `<id>.input.jsonl` is the batch's own copy of its input file, taken at
// create (a hard link, or a copy across filesystems) and run from, so a
// batch outlives the upload's deletion or expiry; it goes once the batch
// has ended.
import { randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  fsyncSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  truncateSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { copyFile, link, open, rename, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { makePrivateDir, openPrivate, PRIVATE_FILE_MODE } from "../runtime/private-files.ts";
import { fsyncDir } from "../runtime/private-files.ts";
import type { Batch } from "./batch.ts";

/** One output line (OpenAI's batch output and error files). */
export interface OutputLine {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: unknown } | null;
  error: { code: string; message: string } | null;
}

/**
 * A request's recorded result: its index in the input, and whether it goes to the output file (else the error file).
 */
export interface LineResult {
  i: number;
  ok: boolean;
  out: OutputLine;
}

/** A batch as it was left on disk. */
export interface StoredBatch {
  /** Creation order across restarts. */
  seq: number;
  batch: Batch;
  /** The scope of the request that created it (docs/api/security.md#scoping); absent when it had none. */
  owner?: string;
}

const RECORD = ".json";
const RESULTS = ".results.jsonl";
const INPUT = ".input.jsonl";
/** A copy being taken at create, before the batch has an id on disk (`<hex>.input.tmp`). */
const STAGED_INPUT = ".input.tmp";

/** Batch ids are ours (`batch_<hex>`); anything else never names a file. */
const SAFE_ID = /^batch_[0-9a-f]+$/;

export class BatchState {
  private constructor(readonly dir: string) {}

  static open(dir: string): BatchState {
    makePrivateDir(dir);
    return new BatchState(dir);
  }

  private recordPath(id: string): string {
    if (!SAFE_ID.test(id)) throw new Error(`not a batch id: ${id}`);
    return join(this.dir, id + RECORD);
  }

  resultsPath(id: string): string {
    if (!SAFE_ID.test(id)) throw new Error(`not a batch id: ${id}`);
    return join(this.dir, id + RESULTS);
  }

  /** The batch's own copy of its input file. */
  inputPath(id: string): string {
    if (!SAFE_ID.test(id)) throw new Error(`not a batch id: ${id}`);
    return join(this.dir, id + INPUT);
  }

  /**
   * Takes a copy of an input file under a temporary name (commitInput() names
   * it for its batch): a hard link when the file is on this filesystem, which
   * costs nothing and keeps the bytes when the upload is deleted, else a copy,
   * synced. Throws ENOENT when the file is gone.
   */
  async stageInput(source: string): Promise<string> {
    const tmp = join(this.dir, randomBytes(12).toString("hex") + STAGED_INPUT);
    try {
      await link(source, tmp);
      return tmp;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") throw err;
      // Another filesystem (EXDEV) or one without hard links.
    }
    try {
      await copyFile(source, tmp, constants.COPYFILE_EXCL);
      const fh = await open(tmp, "r+");
      try {
        await fh.chmod(PRIVATE_FILE_MODE).catch(() => {});
        await fh.sync();
      } finally {
        await fh.close();
      }
    } catch (err) {
      await this.discardInput(tmp);
      throw err;
    }
    return tmp;
  }

  /** Names a staged copy for its batch; the batch record saved next syncs the folder for both. */
  async commitInput(staged: string, id: string): Promise<void> {
    await rename(staged, this.inputPath(id));
  }

  /** Drops a staged copy. */
  async discardInput(staged: string): Promise<void> {
    await unlink(staged).catch(() => {});
  }

  /** Drops a batch's copy of its input (it has ended). */
  async removeInput(id: string): Promise<void> {
    await unlink(this.inputPath(id)).catch(() => {});
  }

  /**
   * At open: drops the copies of input files nothing will run, those staged
   * by a create that never finished and those of batches that ended (or have
   * no record) when the server stopped before removing them.
   */
  sweepInputs(keep: (id: string) => boolean): void {
    for (const name of readdirSync(this.dir)) {
      const id = name.endsWith(INPUT) ? name.slice(0, -INPUT.length) : undefined;
      const stale = name.endsWith(STAGED_INPUT) || (id !== undefined && SAFE_ID.test(id) && !keep(id));
      if (!stale) continue;
      try {
        unlinkSync(join(this.dir, name));
      } catch {
        // gone already
      }
    }
  }

  /** Every batch on disk in creation order; a record that does not parse is reported through `warn` and skipped. */
  loadAll(warn: (line: string) => void): StoredBatch[] {
    const out: StoredBatch[] = [];
    for (const name of readdirSync(this.dir)) {
      if (!name.endsWith(RECORD) || !SAFE_ID.test(name.slice(0, -RECORD.length))) continue;
      try {
        const stored = JSON.parse(readFileSync(join(this.dir, name), "utf8")) as StoredBatch;
        if (typeof stored.seq !== "number" || stored.batch?.object !== "batch") throw new Error("not a batch record");
        if (stored.owner !== undefined && typeof stored.owner !== "string")
          throw new Error("its owner is not a string");
        out.push(stored);
      } catch (err) {
        warn(`superfluid: batches: ${name} is unreadable and was skipped (${(err as Error).message})`);
      }
    }
    return out.sort((a, b) => a.seq - b.seq);
  }

  /**
   * Replaces a batch's record: the new one is whole on disk before the old one goes (a crash leaves one or the other).
   */
  save(stored: StoredBatch): void {
    const path = this.recordPath(stored.batch.id);
    const tmp = `${path}.tmp`;
    const fd = openPrivate(tmp, "w");
    try {
      const data = Buffer.from(JSON.stringify(stored));
      for (let off = 0; off < data.length; ) off += writeSync(fd, data, off, data.length - off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
    fsyncDir(this.dir);
  }

  /**
   * Calls `each` with every result recorded for a batch, in the order they
   * were recorded, reading the file in chunks. A last line with no newline,
   * or one that does not parse (a crash mid-write), is cut off the file.
   */
  scanResults(id: string, each: (r: LineResult) => void): void {
    const path = this.resultsPath(id);
    if (!existsSync(path)) return;
    const fd = openSync(path, "r");
    let good = 0;
    let size = 0;
    try {
      size = fstatSync(fd).size;
      const chunk = Buffer.alloc(1 << 20);
      let pending = Buffer.alloc(0);
      let offset = 0;
      scan: while (offset < size) {
        const n = readSync(fd, chunk, 0, chunk.length, offset);
        if (n <= 0) break;
        offset += n;
        pending =
          pending.length === 0 ? Buffer.from(chunk.subarray(0, n)) : Buffer.concat([pending, chunk.subarray(0, n)]);
        let start = 0;
        for (let nl = pending.indexOf(0x0a); nl >= 0; nl = pending.indexOf(0x0a, start)) {
          let r: LineResult;
          try {
            r = JSON.parse(pending.subarray(start, nl).toString("utf8")) as LineResult;
          } catch {
            break scan;
          }
          each(r);
          good += nl + 1 - start;
          start = nl + 1;
        }
        pending = pending.subarray(start);
      }
    } finally {
      closeSync(fd);
    }
    if (good < size) truncateSync(path, good);
  }

  /** The recorded results' lines as written, one JSON text each (the output files are built from them). */
  async *resultLines(id: string): AsyncGenerator<string> {
    const path = this.resultsPath(id);
    if (!existsSync(path)) return;
    const decoder = new TextDecoder();
    let pending = "";
    for await (const chunk of Bun.file(path).stream()) {
      pending += decoder.decode(chunk, { stream: true });
      const lines = pending.split("\n");
      pending = lines.pop()!;
      yield* lines;
    }
  }

  /** The results file opened for appending (created 0600 when new). */
  async openResults(id: string): Promise<ResultLog> {
    const path = this.resultsPath(id);
    const created = !existsSync(path);
    const handle = await open(path, "a", PRIVATE_FILE_MODE);
    await handle.chmod(PRIVATE_FILE_MODE).catch(() => {});
    if (created) fsyncDir(this.dir);
    return new ResultLog(handle);
  }
}

/** A batch's results file, open for appends. */
export class ResultLog {
  constructor(private readonly handle: FileHandle) {}

  /** Appends one result and returns once it is on disk (fdatasync). */
  async append(r: LineResult): Promise<void> {
    await this.handle.appendFile(`${JSON.stringify(r)}\n`);
    await this.handle.datasync();
  }

  close(): Promise<void> {
    return this.handle.close();
  }
}
