// superfluid and llama-server started side by side for a bench: the same
// model file, the same lanes, context per lane and threads, and with a CPU
// variant named, the same ggml kernels on both (llama-server from a copy of
// its folder that holds only that variant, bench/machine.ts). Both are
// stopped when the run ends (support.ts scratchFolder).
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";
import { pinnedLlamaDir, variantIn } from "./machine.ts";
import { freePort, spawnGroup, startSuperfluid } from "./support.ts";

export interface PairOptions {
  model: string;
  /** llama.cpp's folder (llama-server and its libraries); none: superfluid alone. */
  llamaDir?: string;
  lanes: number;
  contextPerLane: number;
  threads: number;
  /** Pin both to this ggml CPU variant. */
  cpuVariant?: string;
  /** superfluid opens this libllama (SUPERFLUID_LLAMA_LIB). */
  llamaLib?: string;
  scratch: string;
  /** More `superfluid serve` flags. */
  serveArgs?: string[];
}

export interface Pair {
  superfluid: string;
  llamaServer?: string;
  /** The CPU variant llama-server decodes on (null: its build has one CPU backend). */
  llamaVariant?: string | null;
}

export async function startPair(o: PairOptions): Promise<Pair> {
  if (o.cpuVariant) process.env.SUPERFLUID_CPU_VARIANT = o.cpuVariant;
  if (o.llamaLib) process.env.SUPERFLUID_LLAMA_LIB = o.llamaLib;
  const superfluid = await startSuperfluid(
    [
      o.model,
      "--max-batch",
      String(o.lanes),
      "--max-context",
      String(o.contextPerLane),
      "--threads",
      String(o.threads),
      ...(o.serveArgs ?? []),
    ],
    join(o.scratch, "superfluid.log"),
    () => undefined,
  );
  if (o.llamaDir === undefined) return { superfluid };
  const dir = o.cpuVariant ? pinnedLlamaDir(o.llamaDir, o.cpuVariant, o.scratch) : o.llamaDir;
  const port = await freePort();
  const args = [
    "-m",
    o.model,
    "-c",
    String(o.contextPerLane * o.lanes),
    "-np",
    String(o.lanes),
    "-t",
    String(o.threads),
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
  ];
  const log = openSync(join(o.scratch, "llama-server.log"), "w");
  spawnGroup(join(dir, "llama-server"), args, {
    stdio: ["ignore", log, log],
    env: { ...process.env, LD_LIBRARY_PATH: dir },
    cwd: o.scratch,
  });
  closeSync(log);
  return { superfluid, llamaServer: `http://127.0.0.1:${port}`, llamaVariant: variantIn(dir) };
}

/** Waits until `url` answers GET /v1/models with 200 (llama-server says 503 while it loads). */
export async function waitForModels(url: string, seconds = 120): Promise<void> {
  const until = Date.now() + seconds * 1000;
  for (;;) {
    const ok = await fetch(`${url}/v1/models`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    if (Date.now() > until) throw new Error(`${url} did not answer /v1/models within ${seconds} s`);
    await Bun.sleep(200);
  }
}
