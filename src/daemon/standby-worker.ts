// One worker process started when `superfluid serve` starts, before the
// daemon knows what it will load: its process start and libllama's load (the
// library opened, the C shim compiled, the ggml backends loaded) overlap the
// daemon's own start instead of following it. The first worker the daemon
// needs takes it over (`start` carries the worker's command line); an
// unclaimed one exits when the daemon's IPC channel closes.
import type { Subprocess } from "bun";
import type { DeviceFacts } from "../../ffi/devices.ts";
import type { DaemonToWorker, WorkerToDaemon } from "../engine/protocol.ts";
import { selfCommand } from "./self-command.ts";

export type WorkerProcess = Subprocess<"ignore", "inherit", "inherit">;

interface Standby {
  proc: WorkerProcess;
  /** Where the process's messages go: nowhere until it is claimed. */
  route: (message: WorkerToDaemon) => void;
}

let standby: Standby | undefined;
/** The devices the standby worker found (undefined: it died or was claimed first, or there is none). */
let standbyDevices: Promise<DeviceFacts[] | undefined> | undefined;

/**
 * Whether serve's command line keeps every layer on the CPU with no device named (--no-gpu, --gpu-layers 0), read
 * before the flags are parsed: the worker is then given no GPU backend, as src/worker/main.ts gives a worker whose
 * --gpu-layers is 0.
 */
export function cpuOnlyAsked(argv: readonly string[]): boolean {
  if (argv.some((a) => a === "--device" || a.startsWith("--device="))) return false;
  return argv.some(
    (a, i) =>
      a === "--no-gpu" ||
      ((a === "--gpu-layers" || a === "--n-gpu-layers") && argv[i + 1] === "0") ||
      a === "--gpu-layers=0" ||
      a === "--n-gpu-layers=0",
  );
}

/**
 * Starts the standby worker (once; later calls do nothing while one waits). `gpu: false` (--no-gpu): it loads no
 * GPU backend (ffi/gpu-presence.ts), so a GPU driver's start is not paid for a server that will not use it.
 */
export function startStandbyWorker(opts: { gpu?: boolean } = {}): void {
  if (standby) return;
  let found!: (devices: DeviceFacts[] | undefined) => void;
  standbyDevices = new Promise((resolve) => (found = resolve));
  const waiting: Standby = {
    route: (message) => {
      if (message.type === "devices") found(message.devices ?? undefined);
    },
    proc: Bun.spawn(selfCommand("worker", "--standby", ...(opts.gpu === false ? ["--no-gpu"] : [])), {
      stdio: ["ignore", "inherit", "inherit"],
      serialization: "json",
      ipc: (message: WorkerToDaemon) => waiting.route(message),
    }),
  };
  standby = waiting;
  void waiting.proc.exited.then(() => found(undefined));
}

/**
 * The devices the standby worker's backends registered, once it has loaded them; undefined when no standby
 * worker was started, or it went away or was claimed before saying. Lets the daemon's fit check see the
 * GPUs without loading every backend (Vulkan's instance among them) on its own main thread.
 */
export function devicesOfStandby(): Promise<DeviceFacts[] | undefined> | undefined {
  return standbyDevices;
}

/**
 * The standby worker, now running `superfluid worker <argv>` with its
 * messages going to `onMessage`; undefined when there is none or it has
 * died (the caller spawns a worker of its own).
 */
export function claimStandbyWorker(
  argv: string[],
  onMessage: (message: WorkerToDaemon) => void,
): WorkerProcess | undefined {
  const claimed = standby;
  standby = undefined;
  const route = claimed?.route;
  // Claimed before it said: the fit check does not wait for a message that now goes to the new owner.
  if (route) route({ type: "devices", devices: null });
  // A later load asks the devices afresh: their free memory has moved since.
  standbyDevices = undefined;
  if (!claimed || !alive(claimed.proc)) return undefined;
  const start: DaemonToWorker = { type: "start", argv };
  try {
    claimed.proc.send(start);
  } catch {
    // Died since alive() looked: the caller spawns a worker of its own.
    claimed.proc.kill();
    return undefined;
  }
  claimed.route = onMessage;
  return claimed.proc;
}

/** Stops an unclaimed standby worker (the server stops, or its start failed). */
export function dropStandbyWorker(): void {
  const dropped = standby;
  standby = undefined;
  if (dropped && alive(dropped.proc)) dropped.proc.kill();
}

function alive(proc: WorkerProcess): boolean {
  return !proc.killed && proc.exitCode === null && proc.signalCode === null;
}
