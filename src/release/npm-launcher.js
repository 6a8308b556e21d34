#!/usr/bin/env node
// The `superfluid` command of the npm package (how esbuild and Biome ship a
// native binary): the binary itself lives in the platform package
// `superfluid-<os>-<arch>` that npm installed from this package's
// optionalDependencies (its `os`/`cpu` fields make npm pick only the matching
// one). This file finds it and runs it as if it had been run directly.
// Plain Node (>= 18), no dependencies: it runs wherever `npx` does.
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
// The release platform names (src/release/platforms.ts) are Node's, but `windows`.
const os = process.platform === "win32" ? "windows" : process.platform;
const platform = `${os}-${process.arch}`;
const pkg = `superfluid-${platform}`;
const exe = process.platform === "win32" ? "superfluid.exe" : "superfluid";

function findBinary() {
  // An escape hatch for what npm cannot install (a musl Linux, an offline
  // mirror without the platform package): any superfluid binary of this version.
  if (process.env.SUPERFLUID_BINARY) return process.env.SUPERFLUID_BINARY;
  try {
    return join(dirname(require.resolve(`${pkg}/package.json`)), "bin", exe);
  } catch {
    const known = Object.keys(require("../package.json").optionalDependencies ?? {});
    const why = known.includes(pkg)
      ? [
          "npm leaves it out when optional dependencies are omitted (--omit=optional, --no-optional), when it",
          "cannot fetch it (offline, a registry mirror without it), or when package-lock.json was written on",
          "another platform by an npm that recorded only that platform's package.",
          `Reinstall with optional dependencies (a fresh lockfile), or add "${pkg}" as a dependency.`,
        ]
      : [
          `There is no superfluid binary for ${platform}; there are: ${known.map((p) => p.slice("superfluid-".length)).join(", ")}.`,
        ];
    const lines = [
      `superfluid: the package "${pkg}", which holds the binary for this platform (${platform}), is not installed.`,
      ...why,
    ];
    lines.push("Or set SUPERFLUID_BINARY to the path of a superfluid binary.");
    process.stderr.write(`${lines.join("\n")}\n`);
    process.exit(1);
  }
}

const binary = findBinary();
/** The binary's process, once spawned. */
let child;

// A signal sent to this process (`kill $PID` in a CI script) must reach the
// server, or it would outlive its launcher. Ctrl-C on a terminal already
// reaches both (one process group), so SIGINT is passed on as SIGTERM: the
// server stops the same way on either, and one of each is never a second
// SIGINT (which ends it mid-shutdown with status 130 rather than 0).
const forwarded = { SIGINT: "SIGTERM", SIGTERM: "SIGTERM", SIGHUP: "SIGHUP", SIGQUIT: "SIGQUIT" };
const handlers = new Map();
// On Windows, Ctrl-C and Ctrl-Break reach every process on the console and
// nothing else can be caught (a kill there is TerminateProcess), so the
// launcher only waits for the binary to stop instead of ending first.
const windows = process.platform === "win32";
for (const [signal, as] of Object.entries(forwarded)) {
  if (windows && signal !== "SIGINT") continue;
  const handler = () => {
    // Before the spawn: nothing to pass it to, so end as the signal would have ended us.
    if (child === undefined) process.exit(128 + (constants.signals[signal] ?? 15));
    if (!windows && child.exitCode === null && child.signalCode === null) child.kill(as);
  };
  handlers.set(signal, handler);
  process.on(signal, handler);
}

// Spawned only once the handlers are in place: a signal that arrives the
// moment the binary starts must reach it, not end this process and orphan it.
child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });

child.on("error", (err) => {
  process.stderr.write(`superfluid: cannot run ${binary}: ${err.message}\n`);
  process.exit(1);
});

child.on("exit", (code, signal) => {
  if (signal === null) process.exit(code ?? 1);
  // Die of the same signal, so whoever started us sees what the binary did.
  for (const [sig, handler] of handlers) process.off(sig, handler);
  process.kill(process.pid, signal);
  // A signal Node ignores (SIGPIPE) leaves us running: exit as a shell reports it.
  setTimeout(() => process.exit(128 + (constants.signals[signal] ?? 0)), 100);
});
