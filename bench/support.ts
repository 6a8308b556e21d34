// What the bench scripts share to read their flags and run servers: long
// options (`--name value` and bare flags) with usage on --help and on a bad
// argument, children started in their own process groups and stopped group
// and all (superfluid's worker shares its daemon's group), a free loopback
// port, and a scratch folder that goes, with every child still running, when
// the run ends. Each script keeps its own usage text and defaults.
import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

// ---------------------------------------------------------------- options

/** Prints `message` and ends the run with status 2 (a bad invocation). */
export function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

export interface Options {
  /** Each option given, by its name without the dashes; a bare flag's value is "". */
  opts: Map<string, string>;
  /** --name as an integer >= min, or `fallback` when not given; anything else ends the run. */
  int: (name: string, fallback: number, min: number) => number;
  /** --name as a finite number >= min, or `fallback` when not given; anything else ends the run. */
  num: (name: string, fallback: number, min: number) => number;
}

/**
 * The value after `--name` on the command line, else the fallback (for benches with a few loose flags; parseOptions
 * checks them all).
 */
export function flag(name: string, fallback?: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

/**
 * Reads the script's arguments: `valued` options take the next argument,
 * `flags` none. --help or -h anywhere prints `usage` and exits 0; an unknown
 * argument, or a valued option with nothing after it, prints it and exits 2.
 */
export function parseOptions(usage: string, valued: Iterable<string>, flags: Iterable<string> = []): Options {
  const argv = process.argv.slice(2);
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(usage);
    process.exit(0);
  }
  const takesValue = new Set(valued);
  const bare = new Set(flags);
  const opts = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const name = a.startsWith("--") ? a.slice(2) : "";
    if (bare.has(name)) opts.set(name, "");
    else if (takesValue.has(name) && i + 1 < argv.length) opts.set(name, argv[++i]!);
    else fail(`bad argument ${a}\n\n${usage}`);
  }
  const read = (name: string, fallback: number, min: number, whole: boolean): number => {
    const raw = opts.get(name);
    if (raw === undefined) return fallback;
    const v = Number(raw);
    if (!(whole ? Number.isInteger(v) : Number.isFinite(v)) || v < min)
      fail(`--${name} must be ${whole ? "an integer" : "a number"} >= ${min}, got ${raw}`);
    return v;
  };
  return {
    opts,
    int: (name, fallback, min) => read(name, fallback, min, true),
    num: (name, fallback, min) => read(name, fallback, min, false),
  };
}

/** The median of the values (the mean of the middle two for an even count; NaN for none). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

// ---------------------------------------------------------------- processes

/** The children this run started and has not stopped; each leads its own process group. */
export const children = new Set<ChildProcess>();

/** Starts a child as the leader of a new process group, so that stopping it stops whatever it started too. */
export function spawnGroup(cmd: string, args: string[], options: SpawnOptions): ChildProcess {
  const child = spawn(cmd, args, { ...options, detached: true });
  children.add(child);
  return child;
}

/** Signals a child's whole process group. */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {} // already gone
}

export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => child.once("exit", () => done()));
}

/** SIGTERM to the group, SIGKILL after `graceMs`, then waits (at most 5 s) for the child to go. */
export async function stopGroup(child: ChildProcess, graceMs = 10_000): Promise<void> {
  killGroup(child, "SIGTERM");
  await Promise.race([exited(child), Bun.sleep(graceMs)]);
  killGroup(child, "SIGKILL");
  await Promise.race([exited(child), Bun.sleep(5_000)]);
  children.delete(child);
}

/**
 * A temporary folder for the run. Whatever way the run ends (its last line,
 * process.exit, Ctrl-C, SIGTERM), every child still in `children` is killed,
 * group and all, and the folder removed.
 */
export function scratchFolder(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.on("exit", () => {
    for (const c of children) killGroup(c, "SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });
  process.on("SIGINT", () => process.exit(130));
  process.on("SIGTERM", () => process.exit(143));
  return dir;
}

/** A loopback port nothing listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((done, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => done(port));
    });
  });
}

/**
 * Starts `superfluid serve <args>` from this checkout in its own process
 * group (killed with the run), its output to `logPath`; `onSpawn` gets the
 * process at once (so a failed start can still be stopped). Resolves with
 * the server's URL once /health answers 200.
 */
export async function startSuperfluid(
  args: string[],
  logPath: string,
  onSpawn: (child: ChildProcess) => void,
): Promise<string> {
  const port = await freePort();
  const out = openSync(logPath, "w");
  const child = spawnGroup(
    process.execPath,
    [join(import.meta.dir, "../src/main.ts"), "serve", ...args, "--port", String(port)],
    {
      stdio: ["ignore", out, out],
      env: { ...process.env, SUPERFLUID_QUIET: "1" },
    },
  );
  closeSync(out);
  onSpawn(child);
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; i++) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`superfluid exited:\n${readFileSync(logPath, "utf8").slice(-2000)}`);
    if (
      await fetch(`${url}/health`).then(
        (r) => r.status === 200,
        () => false,
      )
    )
      return url;
    await Bun.sleep(100);
  }
  throw new Error("superfluid did not become healthy in 120 s");
}
