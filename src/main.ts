#!/usr/bin/env bun
// superfluid: one executable. `serve` runs the HTTP daemon; `worker` is the
// engine process the daemon starts for each model (the same executable).
import { runCheck } from "./cli/check.ts";
import { runServe } from "./cli/serve.ts";
import { runTop } from "./cli/top.ts";
import { runWorker } from "./worker/main.ts";

const USAGE = `usage: superfluid <command>

commands:
  serve [MODEL] [flags]  run the server (superfluid serve --help for flags)
  worker --model PATH [--max-batch N] [--max-context N] [--threads N]
                       engine process (started by the daemon, over IPC)
  check [--model PATH] can the engine run here? (opens libllama, reads a vocabulary)
  top [--api-key KEY] HOST:PORT...
                       live monitor of servers' /metrics (q quits)
  version              print the version`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "serve":
      return runServe(rest);
    case "worker": {
      const code = await runWorker(rest);
      // The IPC channel keeps the process alive: close it so the worker exits.
      if (process.connected) process.disconnect?.();
      return code;
    }
    case "check":
      return runCheck(rest);
    case "top":
      return runTop(rest);
    case "version":
    case "--version":
      console.log(`superfluid ${(await import("../package.json")).version}`);
      return 0;
    default:
      console.error(USAGE);
      return command === undefined || command === "help" || command === "--help" ? 0 : 2;
  }
}

process.exitCode = await main(process.argv.slice(2));
