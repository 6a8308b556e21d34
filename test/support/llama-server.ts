// llama.cpp's own llama-server from ../shared/anchors, started beside a test
// to compare answers on the same fixture. Tests that use it skip cleanly
// when ../shared is absent (HAVE_LLAMA_SERVER).
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../scenarios/support.ts";

const LLAMA_DIR = join(import.meta.dir, "../../../shared/anchors/llama.cpp");
export const HAVE_LLAMA_SERVER = existsSync(join(LLAMA_DIR, "llama-server"));

export interface LlamaServer {
  url: string;
  stop(): Promise<void>;
}

/** Starts llama-server with `args` (its model and flags) on a free loopback port; resolves once /health answers 200. */
export async function startLlamaServer(args: string[]): Promise<LlamaServer> {
  const port = await freePort();
  const proc: ChildProcess = spawn(
    join(LLAMA_DIR, "llama-server"),
    [...args, "--host", "127.0.0.1", "--port", String(port)],
    {
      env: { ...process.env, LD_LIBRARY_PATH: LLAMA_DIR },
      stdio: "ignore",
    },
  );
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise((done) => proc.once("exit", done));
    proc.kill("SIGKILL");
    await gone;
  };
  // Ready once /health answers 200 (503 while loading); the count only stops a hung start.
  for (let i = 0; i < 600; i++) {
    const ok = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { url, stop };
    if (proc.exitCode !== null) throw new Error(`llama-server exited with ${proc.exitCode}`);
    await Bun.sleep(100);
  }
  await stop();
  throw new Error("llama-server did not become healthy");
}
