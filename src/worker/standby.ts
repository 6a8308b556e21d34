// `superfluid worker --standby` (src/daemon/standby-worker.ts): libllama
// opened at once, then the command line the daemon sends when it needs a
// worker. A library that fails to open here fails again, with its reason, when
// the model loads.
import { deviceFacts, listDevices } from "../../ffi/devices.ts";
import { loadLlama } from "../../ffi/llama.ts";
import type { DaemonToWorker, WorkerToDaemon } from "../engine/protocol.ts";

/** The worker's command line, or undefined when the daemon went away first. `gpu: false`: `--standby --no-gpu`. */
export async function awaitStart(opts: { gpu?: boolean } = {}): Promise<string[] | undefined> {
  let devices: ReturnType<typeof deviceFacts>[] | null = null;
  try {
    devices = listDevices(loadLlama(process.env, { gpu: opts.gpu !== false })).map(deviceFacts);
  } catch {
    // Reported by the model's load, after `start`.
  }
  try {
    process.send?.({ type: "devices", devices } satisfies WorkerToDaemon);
  } catch {
    // The daemon went away: the wait below ends at once.
  }
  return new Promise((resolve) => {
    const onMessage = (message: DaemonToWorker) => {
      if (message.type !== "start") return;
      done();
      resolve(message.argv);
    };
    const onDisconnect = () => {
      done();
      resolve(undefined);
    };
    const done = () => {
      process.off("message", onMessage);
      process.off("disconnect", onDisconnect);
    };
    process.on("message", onMessage);
    process.on("disconnect", onDisconnect);
  });
}
