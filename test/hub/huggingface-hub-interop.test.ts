// What superfluid pulls, huggingface_hub finds: offline (HF_HUB_OFFLINE=1, no
// request), hf_hub_download answers the very snapshot file superfluid linked,
// and scan_cache_dir reads the repo without a warning. Needs Python with
// huggingface_hub: the system's, else a venv cached under
// ~/.cache/superfluid/hf-venv (pip-installed once); skipped, with the reason,
// where neither can be had (no Python, or no package index reachable).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { pull } from "../../src/hub/pull.ts";
import { hubSettings } from "../../src/hub/settings.ts";
import { fakeGguf, HubStandin } from "../support/hub-standin.ts";

function run(cmd: string[], env: Record<string, string> = {}, timeoutMs = 120_000) {
  try {
    const r = Bun.spawnSync(cmd, { env: { ...process.env, ...env }, timeout: timeoutMs });
    return { ok: r.exitCode === 0, out: r.stdout.toString(), err: r.stderr.toString() };
  } catch (err) {
    return { ok: false, out: "", err: (err as Error).message };
  }
}

/** A python that imports huggingface_hub, or why there is none. */
function findPython(): { python: string } | { skip: string } {
  const hasHub = (python: string) => run([python, "-c", "import huggingface_hub"]).ok;
  if (run(["python3", "--version"]).ok === false) return { skip: "no python3 on this machine" };
  if (hasHub("python3")) return { python: "python3" };
  const venv = join(homedir(), ".cache", "superfluid", "hf-venv");
  const python = join(venv, "bin", "python");
  if (existsSync(python) && hasHub(python)) return { python };
  const made = run(["python3", "-m", "venv", venv]);
  if (!made.ok) return { skip: `python3 -m venv failed: ${made.err.trim().split("\n").at(-1)}` };
  const pip = run([python, "-m", "pip", "install", "--quiet", "--retries", "0", "--timeout", "15", "huggingface_hub"]);
  if (!pip.ok || !hasHub(python))
    return { skip: `pip could not install huggingface_hub: ${pip.err.trim().split("\n").at(-1)}` };
  return { python };
}

const found = findPython();
if ("skip" in found) console.error(`skipping the huggingface_hub interop test: ${found.skip}`);

const hub = new HubStandin();
let cache = "";
beforeAll(async () => {
  await hub.start();
  cache = mkdtempSync(join(tmpdir(), "sf-hf-interop-"));
});
afterAll(async () => {
  await hub.stop();
  rmSync(cache, { recursive: true, force: true });
});

test.skipIf("skip" in found)(
  "huggingface_hub finds offline what superfluid pulled",
  async () => {
    const python = (found as { python: string }).python;
    hub.addRepo("org/interop-GGUF", { "m-Q4_K_M.gguf": fakeGguf(50_000), "sub/m-Q8_0.gguf": fakeGguf(20_000) });
    const settings = hubSettings({ HF_ENDPOINT: hub.hubUrl, HF_HUB_CACHE: cache });
    const a = await pull("org/interop-GGUF", { settings });
    const b = await pull("org/interop-GGUF:Q8_0", { settings });
    hub.resetCounters();
    const script = [
      "import sys",
      "from huggingface_hub import hf_hub_download, scan_cache_dir",
      "for f in ('m-Q4_K_M.gguf', 'sub/m-Q8_0.gguf'): print(hf_hub_download('org/interop-GGUF', f))",
      "info = scan_cache_dir()",
      "print(len(info.warnings), [r.repo_id for r in info.repos], [r.size_on_disk for r in info.repos])",
    ].join("\n");
    const r = run([python, "-c", script], { HF_HUB_OFFLINE: "1", HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl });
    expect(r.err.includes("Traceback")).toBe(false);
    const [p1, p2, summary] = r.out.trim().split("\n");
    expect(p1).toBe(a.model[0]!.local);
    expect(p2).toBe(b.model[0]!.local);
    expect(summary).toBe("0 ['org/interop-GGUF'] [70000]");
    expect(hub.requests).toEqual([]);
  },
  300_000,
);
