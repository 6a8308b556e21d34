#!/usr/bin/env bun
// superfluid: one executable. `serve` runs the HTTP daemon; `worker` is the
// engine process the daemon starts for each model (the same executable).
// Each command's modules load only when it runs: a worker (started once per
// model) then loads the engine and not the HTTP server, and `serve` starts
// answering /health sooner.

const USAGE = `usage: superfluid <command>

commands:
  serve [MODEL] [flags]  run the server (superfluid serve --help for flags)
  worker --model PATH [--max-batch N] [--max-context N] [--threads N]
                       engine process (started by the daemon, over IPC)
  pull [--no-mmproj] [--offline] REF...
                       fetch org/repo[:TAG] into the Hugging Face cache (no serving)
  list [--json]        the models the Hugging Face cache holds
  check [--model PATH] [--devices] [--rpc HOST:PORT,...]
                       can the engine run here? (opens libllama, reads a vocabulary)
  rpc-worker [--listen HOST:PORT] [--threads N] [--device NAMES] [--cache DIR]
                       offer this machine's devices to a serve --rpc elsewhere
  top [--api-key KEY] HOST:PORT...
                       live monitor of servers' /metrics (q quits)
  wait [--timeout SEC] [--pid PID] [--api-key KEY] [HOST:PORT]
                       exit 0 once the server's /health answers 200 (for scripts)
  version              print the version`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "serve": {
      // The worker process and libllama start loading now, while the server's own modules load;
      // one still unclaimed when serve returns (a usage error, a failed start) is stopped, or it
      // would keep this process alive.
      const standby = await import("./daemon/standby-worker.ts");
      // Not with --rpc: the model's worker joins the RPC workers before it lists devices, which a standby has done.
      if (
        !rest.some((a) => a === "--help" || a === "--help-all" || a === "-h" || a === "--rpc" || a.startsWith("--rpc="))
      )
        standby.startStandbyWorker({ gpu: !standby.cpuOnlyAsked(rest) });
      try {
        return await (await import("./cli/serve.ts")).runServe(rest);
      } finally {
        standby.dropStandbyWorker();
      }
    }
    case "worker": {
      const code = await (await import("./worker/main.ts")).runWorker(rest);
      // The IPC channel keeps the process alive: close it so the worker exits.
      if (process.connected) process.disconnect?.();
      return code;
    }
    case "pull":
      return (await import("./cli/pull.ts")).runPull(rest);
    case "list":
      return (await import("./cli/pull.ts")).runList(rest);
    case "check":
      return (await import("./cli/check.ts")).runCheck(rest);
    case "top":
      return (await import("./cli/top.ts")).runTop(rest);
    case "wait":
      return (await import("./cli/wait.ts")).runWait(rest);
    case "rpc-worker":
      return (await import("./cli/rpc-worker.ts")).runRpcWorker(rest);
    case "version":
    case "--version":
      console.log(await (await import("./version.ts")).versionLine());
      return 0;
    default:
      console.error(USAGE);
      return command === undefined || command === "help" || command === "--help" ? 0 : 2;
  }
}

process.exitCode = await main(process.argv.slice(2));

// A module (top-level await needs one), though it imports nothing statically.
export {};
