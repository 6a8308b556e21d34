// Load progress on the terminal (stderr) for a model that takes more than a
// second to load. The worker loads the weights in its own process and says
// nothing until it is ready, so progress is read from outside: how much of
// the weights its process holds resident (Linux /proc), against the files'
// size. Elsewhere only the time is shown. On a terminal one line is
// rewritten in place; otherwise a line is logged every few seconds.
import { readdirSync, readFileSync } from "node:fs";
import { formatBytes } from "../runtime/byte-size.ts";

/** Nothing is shown for loads faster than this. */
const QUIET_MS = 1000;
const TTY_EVERY_MS = 500;
const LOG_EVERY_MS = 5000;

/** Child processes of this process (Linux), from every thread's children list. */
function childPids(): number[] {
  const pids: number[] = [];
  try {
    for (const tid of readdirSync("/proc/self/task")) {
      const list = readFileSync(`/proc/self/task/${tid}/children`, "utf8").trim();
      if (list) pids.push(...list.split(/\s+/).map(Number));
    }
  } catch {
    // not Linux, or /proc is not readable: time only
  }
  return pids;
}

/** Resident bytes of the worker process loading `modelPath`, when it can be found. */
function workerResidentBytes(modelPath: string): number | undefined {
  for (const pid of childPids()) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      if (!cmdline.includes("worker") || !cmdline.includes(modelPath)) continue;
      const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
      if (m) return Number(m[1]) * 1024;
    } catch {
      // the process went away between the two reads
    }
  }
  return undefined;
}

export interface LoadProgress {
  /** Stops the display and clears the terminal line it used. */
  done(): void;
}

/** Shows the progress of loading `id` from `path` (`weightBytes` of files) until done() is called. */
export function showLoadProgress(
  id: string,
  path: string,
  weightBytes: number,
  log: (line: string) => void,
  tty = process.stderr.isTTY === true,
): LoadProgress {
  const started = performance.now();
  let lastLog = 0;
  let drawn = false;
  const line = () => {
    const seconds = ((performance.now() - started) / 1000).toFixed(0);
    const resident = workerResidentBytes(path);
    const share =
      resident === undefined || weightBytes <= 0
        ? ""
        : ` ${Math.min(99, Math.floor((100 * resident) / weightBytes))}% of ${formatBytes(weightBytes)} resident,`;
    return `superfluid: loading ${id}:${share} ${seconds} s`;
  };
  const timer = setInterval(
    () => {
      const elapsed = performance.now() - started;
      if (elapsed < QUIET_MS) return;
      if (tty) {
        process.stderr.write(`\r\x1b[2K${line()}`);
        drawn = true;
      } else if (elapsed - lastLog >= LOG_EVERY_MS || lastLog === 0) {
        lastLog = elapsed;
        log(line());
      }
    },
    tty ? TTY_EVERY_MS : QUIET_MS,
  );
  timer.unref?.();
  return {
    done() {
      clearInterval(timer);
      if (drawn) process.stderr.write("\r\x1b[2K");
    },
  };
}
