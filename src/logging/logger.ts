// Where the server's log lines go (docs/cli.md#logging). Two kinds of line:
// messages (startup, status, warnings) and access records (one per
// generation). Plain lines go to stderr, or to --log-file in its place (the
// spec's "redirect stderr", appended, 0600). With --log-dir every line is
// also a JSON object in the rotating files, and access records go there
// only, off the terminal. --quiet drops access lines from the plain stream.
// Nothing here sees a prompt or a reply: callers hand over counts and names.
import { closeSync, fchmodSync, openSync, writeSync } from "node:fs";
import { format } from "node:util";
import { RotatingLog, type RotationLimits } from "./rotating-log.ts";

export interface LoggerOptions {
  /** --log-dir: JSON lines in rotating files. */
  logDir?: string;
  /** --log-file: plain lines appended here instead of stderr. */
  logFile?: string;
  /** --quiet: no access lines in the plain stream. */
  quiet?: boolean;
  /** The --log-dir files' size cap and count (64 MiB, 8 by default). */
  rotation?: RotationLimits;
  /** Where plain lines go without --log-file (stderr); a test seam. */
  stderr?: (line: string) => void;
  /**
   * `serve --tui`: the screen's scrolling log. It takes the plain lines in
   * stderr's place, and the access lines too (still JSON in --log-dir):
   * the operator watching the monitor sees every request.
   */
  screen?: (line: string) => void;
}

export type Level = "info" | "warn";

const toStderr = (line: string) => void process.stderr.write(`${line}\n`);

export class Logger {
  private readonly json: RotatingLog | undefined;
  private fileFd: number | undefined;
  private readonly quiet: boolean;
  private readonly stderr: (line: string) => void;
  private readonly screen: ((line: string) => void) | undefined;

  constructor(o: LoggerOptions = {}) {
    this.quiet = o.quiet === true;
    this.stderr = o.stderr ?? toStderr;
    this.screen = o.screen;
    if (o.logFile !== undefined) {
      const fd = openSync(o.logFile, "a", 0o600);
      // The mode above applies only to a file created now; an existing one is tightened too.
      fchmodSync(fd, 0o600);
      this.fileFd = fd;
    }
    try {
      this.json = o.logDir === undefined ? undefined : new RotatingLog(o.logDir, o.rotation);
    } catch (err) {
      this.close();
      throw err;
    }
  }

  /** A startup or status line; one that says WARNING is logged as a warning. */
  line(text: string): void {
    this.message(/\bWARNING\b/.test(text) ? "warn" : "info", text);
  }

  message(level: Level, text: string): void {
    this.plain(text);
    this.json?.write(JSON.stringify({ time: new Date().toISOString(), level, type: "message", message: text }));
  }

  /** One access record: `line` is its plain form, `fields` its JSON form (counts, times, names; never content). */
  access(line: string, fields: object): void {
    if (this.json)
      this.json.write(JSON.stringify({ time: new Date().toISOString(), level: "info", type: "access", ...fields }));
    if (this.quiet) return;
    if (this.screen) this.screen(line);
    else if (!this.json) this.plain(line);
  }

  close(): void {
    this.json?.close();
    if (this.fileFd !== undefined) {
      // Forgotten first: after close the descriptor's number may belong to another file.
      const fd = this.fileFd;
      this.fileFd = undefined;
      closeSync(fd);
    }
  }

  private plain(text: string): void {
    if (this.screen) {
      this.screen(text);
      if (this.fileFd === undefined) return;
    }
    // After close (and without --log-file) stderr takes the line: a late warning is not lost.
    if (this.fileFd === undefined) return this.stderr(text);
    try {
      writeSync(this.fileFd, `${text}\n`);
    } catch {
      // A log file that cannot take a line (disk full) must not fail the request that wrote it.
    }
  }
}

/**
 * console.error and console.warn through `logger` as warnings, for the
 * server's own process under --log-file or --log-dir (the modules that
 * report a failure with console.error then land in the files too). Returns
 * the undo.
 */
export function routeConsole(logger: Logger): () => void {
  const { error, warn } = console;
  console.error = (...args: unknown[]) => logger.message("warn", format(...args));
  console.warn = console.error;
  return () => {
    console.error = error;
    console.warn = warn;
  };
}
