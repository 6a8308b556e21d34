// A pull as people watch it (docs/cli.md#pulling-models): on a terminal one
// bar per file rewritten in place (bytes, rate, time left); elsewhere (a log,
// CI) a line when a file starts, at every 10 % or 10 s, and when it is done.
import { formatBytes } from "../runtime/byte-size.ts";
import type { PullEvent } from "../hub/pull.ts";

const TTY_EVERY_MS = 200;
const LOG_EVERY_MS = 10_000;
const BAR = 24;

export interface PullDisplay {
  event(e: PullEvent): void;
  /** Clears a bar left on the terminal. */
  done(): void;
}

interface FileState {
  total: number;
  started: number;
  /** Bytes at start (a resume), so the rate counts only this run's. */
  base: number;
  lastLog: number;
  lastTenth: number;
  lastDraw: number;
  reported: boolean;
}

function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) return `${Math.ceil(seconds)} s`;
  const m = Math.floor(seconds / 60);
  return m < 60 ? `${m} min ${Math.round(seconds % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** `label`: what the lines begin with (`superfluid: ` in serve's log, nothing for `superfluid pull`). */
export function pullDisplay(
  label: string,
  log: (line: string) => void,
  tty = process.stderr.isTTY === true,
  now: () => number = () => performance.now(),
): PullDisplay {
  const files = new Map<string, FileState>();
  let drawn = false;
  const clear = () => {
    if (drawn) process.stderr.write("\r\x1b[2K");
    drawn = false;
  };
  const stats = (s: FileState, done: number) => {
    const seconds = (now() - s.started) / 1000;
    const rate = seconds > 0 ? (done - s.base) / seconds : 0;
    const pct = s.total > 0 ? Math.floor((100 * done) / s.total) : 100;
    const left = rate > 0 ? duration((s.total - done) / rate) : "?";
    return { pct, rate, left };
  };
  return {
    event(e) {
      if (e.kind === "resolving") {
        log(`${label}resolving ${e.repo} ...`);
        return;
      }
      if (e.kind === "linking") return;
      let s = files.get(e.path);
      if (!s) {
        s = {
          total: e.total,
          started: now(),
          base: e.done,
          lastLog: now(),
          lastTenth: Math.floor((10 * e.done) / Math.max(1, e.total)),
          lastDraw: 0,
          reported: false,
        };
        files.set(e.path, s);
        if (e.state === "done") return;
        const resumed = e.done > 0 ? `, resuming at ${formatBytes(e.done)}` : "";
        log(`${label}pulling ${e.path} (${formatBytes(e.total)}${resumed})`);
      }
      const { pct, rate, left } = stats(s, e.done);
      if (e.state === "done") {
        if (s.reported) return;
        s.reported = true;
        clear();
        const seconds = (now() - s.started) / 1000;
        log(`${label}pulled ${e.path} (${formatBytes(e.total)}) in ${seconds.toFixed(1)} s`);
        return;
      }
      const what =
        e.state === "waiting"
          ? "waiting for another process pulling it"
          : e.state === "verifying"
            ? "checking sha256"
            : `${formatBytes(rate)}/s, ${left} left`;
      if (tty) {
        if (now() - s.lastDraw < TTY_EVERY_MS && e.state === "downloading") return;
        s.lastDraw = now();
        const filled = Math.round((BAR * pct) / 100);
        process.stderr.write(
          `\r\x1b[2K${e.path} [${"#".repeat(filled)}${".".repeat(BAR - filled)}] ${pct}% ` +
            `${formatBytes(e.done)}/${formatBytes(e.total)} ${what}`,
        );
        drawn = true;
        return;
      }
      const tenth = Math.floor((10 * e.done) / Math.max(1, e.total));
      if (tenth > s.lastTenth || now() - s.lastLog >= LOG_EVERY_MS || e.state === "verifying") {
        s.lastTenth = tenth;
        s.lastLog = now();
        log(`${label}pulling ${e.path}: ${pct}% of ${formatBytes(e.total)} (${what})`);
      }
    },
    done: clear,
  };
}
