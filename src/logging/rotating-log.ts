// `--log-dir DIR` files (docs/cli.md#logging): JSON lines appended to
// `superfluid.<n>.jsonl`, a new file (n + 1) once the current one would pass
// its size cap, only the newest few kept. Files are 0600 and the folder 0700
// whatever the umask (an existing folder with wider bits is tightened): the
// log names models, routes and clients' timings.
// Writes are synchronous: a line is a few hundred bytes into the page cache,
// and a line written before a crash or an exit is never lost in a queue.
import { closeSync, fchmodSync, fstatSync, openSync, readdirSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { makePrivateDir, PRIVATE_FILE_MODE } from "../runtime/private-files.ts";

export const LOG_FILE_BYTES = 64 * 1024 * 1024;
export const LOG_FILES_KEPT = 8;

const NAME = /^superfluid\.(\d+)\.jsonl$/;

export interface RotationLimits {
  /** A file is closed once the next line would take it past this many bytes. */
  maxBytes: number;
  /** Files kept, the current one included; older ones are deleted. */
  keep: number;
}

export function logFileName(n: number): string {
  return `superfluid.${n}.jsonl`;
}

/** The numbers of the log files in `dir`, oldest first. */
export function logFileNumbers(dir: string): number[] {
  return readdirSync(dir)
    .map((name) => NAME.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

export class RotatingLog {
  private fd: number;
  private n: number;
  private size: number;
  private closed = false;
  /** Lines that could not be written (disk full, folder removed). */
  failed = 0;

  constructor(
    readonly dir: string,
    private readonly limits: RotationLimits = { maxBytes: LOG_FILE_BYTES, keep: LOG_FILES_KEPT },
  ) {
    makePrivateDir(dir);
    // A restart continues the newest file, so a restart loop does not push out the history.
    const newest = logFileNumbers(dir).at(-1);
    this.n = newest ?? 0;
    this.fd = this.open();
    this.size = fstatSync(this.fd).size;
    this.prune();
  }

  /** Appends one line (its newline added). */
  write(line: string): void {
    // After close the descriptor's number may belong to another file.
    if (this.closed) return;
    const bytes = Buffer.from(`${line}\n`);
    try {
      if (this.size > 0 && this.size + bytes.length > this.limits.maxBytes) this.rotate();
      writeSync(this.fd, bytes);
      this.size += bytes.length;
    } catch {
      this.failed++;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      closeSync(this.fd);
    } catch {
      // already closed
    }
  }

  private open(): number {
    const fd = openSync(join(this.dir, logFileName(this.n)), "a", PRIVATE_FILE_MODE);
    // The mode above applies only to a file created now; one left by an older run is tightened too.
    fchmodSync(fd, PRIVATE_FILE_MODE);
    return fd;
  }

  private rotate(): void {
    closeSync(this.fd);
    this.n++;
    this.fd = this.open();
    this.size = fstatSync(this.fd).size;
    this.prune();
  }

  private prune(): void {
    const numbers = logFileNumbers(this.dir);
    for (const n of numbers.slice(0, Math.max(0, numbers.length - this.limits.keep))) {
      rmSync(join(this.dir, logFileName(n)), { force: true });
    }
  }
}
