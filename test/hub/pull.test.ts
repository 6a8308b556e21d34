// Pulling a reference from a Hub stand-in on loopback (test/support/hub-standin.ts):
// the cache layout huggingface_hub writes, no request for a cached or offline
// reference, verification, resume within a process and across processes,
// parallel parts, the token kept from the CDN, proxies, the lock, disk space
// and disk full, and the refusals a person reads.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RepoCache } from "../../src/hub/cache.ts";
import type { FileOps } from "../../src/hub/download.ts";
import { HubError } from "../../src/hub/errors.ts";
import { pull, type PullEvent, type PullOptions } from "../../src/hub/pull.ts";
import { type HubSettings, hubSettings } from "../../src/hub/settings.ts";
import { fakeGguf, ForwardProxy, HubStandin } from "../support/hub-standin.ts";

const hub = new HubStandin();
let cacheDir = "";
const dirs: string[] = [];

beforeAll(async () => {
  await hub.start();
});
afterAll(async () => {
  await hub.stop();
});
afterEach(() => {
  hub.resetCounters();
  hub.faults.cut = undefined;
  hub.faults.stall = undefined;
  hub.faults.barrier = undefined;
  hub.faults.corrupt.clear();
  hub.faults.rate = 0;
  hub.pageSize = 1000;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  cacheDir = "";
});

function freshCache(): string {
  cacheDir = mkdtempSync(join(tmpdir(), "sf-hub-"));
  dirs.push(cacheDir);
  return cacheDir;
}

function settings(extra: Record<string, string> = {}): HubSettings {
  return hubSettings({ HF_ENDPOINT: hub.hubUrl, HF_HUB_CACHE: cacheDir || freshCache(), ...extra });
}

/** Small parts and fast retries, so a test file of a few hundred KiB exercises everything. */
const FAST = { retryBaseMs: 5, minPartBytes: 64 * 1024, connections: 4 };

async function pullOk(ref: string, options: Partial<PullOptions> = {}) {
  return pull(ref, { settings: settings(), tuning: FAST, lockPollMs: 20, ...options });
}

async function refusal(promise: Promise<unknown>): Promise<HubError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof HubError) return err;
    throw err;
  }
  throw new Error("expected the pull to be refused");
}

/** Every file under a folder, relative, recursively (links not followed). */
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, prefix: string) => {
    for (const name of readdirSync(d).sort()) {
      const full = join(d, name);
      if (lstatSync(full).isDirectory()) walk(full, `${prefix}${name}/`);
      else out.push(`${prefix}${name}`);
    }
  };
  if (existsSync(dir)) walk(dir, "");
  return out;
}

const MODEL = fakeGguf(300 * 1024);
const MMPROJ = fakeGguf(40 * 1024);
const SMALL_Q8 = fakeGguf(20 * 1024);
const README = new TextEncoder().encode("# a model card\n");
hub.addRepo("org/model-GGUF", {
  "README.md": README,
  "model-Q4_K_M.gguf": MODEL,
  "model-Q8_0.gguf": SMALL_Q8,
  "mmproj-model-F16.gguf": MMPROJ,
  "sub/model-IQ2_XXS.gguf": fakeGguf(10 * 1024),
  "config.json": { bytes: new TextEncoder().encode("{}"), lfs: false },
});
hub.addRepo("org/split-GGUF", {
  "big-Q4_0-00001-of-00003.gguf": fakeGguf(70 * 1024),
  "big-Q4_0-00002-of-00003.gguf": fakeGguf(70 * 1024),
  "big-Q4_0-00003-of-00003.gguf": fakeGguf(30 * 1024),
  "big-Q8_0.gguf": fakeGguf(1024),
});
const PLAIN = fakeGguf(3000);
hub.addRepo("org/plain-GGUF", { "plain-Q4_0.gguf": { bytes: PLAIN, lfs: false } });
hub.addRepo("org/gated-GGUF", { "g-Q4_K_M.gguf": fakeGguf(100 * 1024) }, { gated: true });

describe("the cache layout", () => {
  test("blobs by sha256, snapshots as relative symlinks, refs/main, the projector beside", async () => {
    const pulled = await pullOk("org/model-GGUF");
    const commit = hub.commitOf("org/model-GGUF");
    const sha = hub.sha("org/model-GGUF", "model-Q4_K_M.gguf");
    const repoDir = join(cacheDir, "models--org--model-GGUF");
    expect(pulled.commit).toBe(commit);
    expect(pulled.model.map((f) => f.path)).toEqual(["model-Q4_K_M.gguf"]);
    expect(pulled.mmproj?.path).toBe("mmproj-model-F16.gguf");
    expect(pulled.cached).toBe(false);
    expect(readFileSync(join(repoDir, "refs", "main"), "utf8")).toBe(commit);
    const link = join(repoDir, "snapshots", commit, "model-Q4_K_M.gguf");
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe(`../../blobs/${sha}`);
    expect(pulled.model[0]!.local).toBe(link);
    expect(new Uint8Array(readFileSync(link))).toEqual(MODEL);
    expect(tree(repoDir).sort()).toEqual(
      [
        `blobs/${sha}`,
        `blobs/${hub.sha("org/model-GGUF", "mmproj-model-F16.gguf")}`,
        "refs/main",
        `snapshots/${commit}/mmproj-model-F16.gguf`,
        `snapshots/${commit}/model-Q4_K_M.gguf`,
      ].sort(),
    );
    // No lock is left behind.
    expect(tree(join(cacheDir, ".locks"))).toEqual([]);
  });

  test("a file in a folder links one level further up; --no-mmproj leaves the projector", async () => {
    const pulled = await pullOk("org/model-GGUF:IQ2_XXS", { mmproj: false });
    expect(pulled.mmproj).toBeUndefined();
    const link = pulled.model[0]!.local;
    expect(link.endsWith("/sub/model-IQ2_XXS.gguf")).toBe(true);
    expect(readlinkSync(link)).toBe(`../../../blobs/${hub.sha("org/model-GGUF", "sub/model-IQ2_XXS.gguf")}`);
    expect(tree(join(cacheDir, "models--org--model-GGUF", "snapshots"))).toHaveLength(1);
  });

  test("a GGUF outside LFS is stored under its git oid and checked against it", async () => {
    const pulled = await pullOk("org/plain-GGUF");
    const blob = readlinkSync(pulled.model[0]!.local).split("/").at(-1)!;
    expect(blob).toMatch(/^[0-9a-f]{40}$/);
    expect(new Uint8Array(readFileSync(pulled.model[0]!.local))).toEqual(PLAIN);
  });

  test("a split model: every part, with the file list read page by page", async () => {
    hub.pageSize = 2;
    const pulled = await pullOk("org/split-GGUF");
    expect(pulled.model.map((f) => f.path)).toEqual([
      "big-Q4_0-00001-of-00003.gguf",
      "big-Q4_0-00002-of-00003.gguf",
      "big-Q4_0-00003-of-00003.gguf",
    ]);
    expect(hub.hubRequests().filter((r) => r.path.includes("/tree/"))).toHaveLength(2);
    for (const f of pulled.model) expect(existsSync(f.local)).toBe(true);
  });
});

describe("no request when none is needed", () => {
  test("a reference already in the cache makes no request", async () => {
    await pullOk("org/model-GGUF:Q8_0");
    hub.resetCounters();
    const again = await pullOk("org/model-GGUF:Q8_0");
    expect(again.cached).toBe(true);
    expect(again.fetched).toBe(0);
    expect(hub.requests).toEqual([]);
  });

  test("offline: the cache answers, and a miss is refused without a request", async () => {
    await pullOk("org/model-GGUF:Q8_0");
    hub.resetCounters();
    const offline = settings({ HF_HUB_OFFLINE: "1" });
    expect((await pull("org/model-GGUF:Q8_0", { settings: offline })).cached).toBe(true);
    const e = await refusal(pull("org/model-GGUF:IQ2_XXS", { settings: offline }));
    expect(e.kind).toBe("offline");
    expect(e.message).toContain("the cache holds org/model-GGUF as Q8_0");
    expect(e.message).toContain("HF_HUB_OFFLINE");
    expect(hub.requests).toEqual([]);
  });

  test("a blob another reference already pulled is linked, not fetched", async () => {
    await pullOk("org/model-GGUF:Q8_0", { mmproj: false });
    hub.resetCounters();
    const pulled = await pullOk("org/model-GGUF:model-Q8_0.gguf");
    expect(pulled.model[0]!.path).toBe("model-Q8_0.gguf");
    // The projector is new; the model was there.
    expect(hub.cdnRequests().every((r) => r.path.includes(hub.sha("org/model-GGUF", "mmproj-model-F16.gguf")))).toBe(
      true,
    );
  });
});

describe("downloads people can trust", () => {
  test("a corrupt download is refused by name and nothing reaches blobs/ or snapshots/", async () => {
    const sha = hub.sha("org/model-GGUF", "model-Q4_K_M.gguf");
    hub.faults.corrupt.add(sha);
    const e = await refusal(pullOk("org/model-GGUF", { mmproj: false }));
    expect(e.kind).toBe("integrity");
    expect(e.message).toContain("model-Q4_K_M.gguf failed its sha256 check");
    expect(e.message).toContain(sha);
    const repoDir = join(cacheDir, "models--org--model-GGUF");
    expect(tree(join(repoDir, "snapshots"))).toEqual([]);
    expect(tree(join(repoDir, "blobs"))).toEqual([]);
    expect(existsSync(join(repoDir, "refs", "main"))).toBe(false);
    hub.faults.corrupt.clear();
    expect((await pullOk("org/model-GGUF", { mmproj: false })).model[0]!.size).toBe(MODEL.length);
  });

  test("a cut connection is retried and resumed with Range from where the bytes stop", async () => {
    hub.faults.cut = { afterBytes: 50 * 1024, times: 2 };
    const events: PullEvent[] = [];
    const pulled = await pullOk("org/model-GGUF", {
      mmproj: false,
      tuning: { ...FAST, connections: 1 },
      progress: (e) => events.push(e),
    });
    expect(new Uint8Array(readFileSync(pulled.model[0]!.local))).toEqual(MODEL);
    const ranges = hub.cdnRequests().map((r) => r.range);
    expect(ranges).toHaveLength(3);
    expect(ranges[0]).toBeUndefined();
    const resumedAt = ranges.slice(1).map((r) => Number(/^bytes=(\d+)-/.exec(r!)![1]));
    expect(resumedAt[0]).toBeGreaterThan(0);
    expect(resumedAt[1]).toBeGreaterThan(resumedAt[0]!);
    // Progress: bytes grow to the size, then the check, then done.
    const file = events.filter((e) => e.kind === "file" && e.path === "model-Q4_K_M.gguf") as Extract<
      PullEvent,
      { kind: "file" }
    >[];
    expect(file.at(-1)).toMatchObject({ state: "done", done: MODEL.length, total: MODEL.length });
    expect(file.some((e) => e.state === "verifying")).toBe(true);
  });

  test("a connection that never comes back fails the pull, and no empty partial is left behind", async () => {
    // Each answer cut before its first byte: no attempt makes progress, so the attempts run out.
    hub.faults.cut = { afterBytes: 0, times: 100 };
    const e = await refusal(
      pullOk("org/model-GGUF", { mmproj: false, tuning: { ...FAST, connections: 1, attempts: 3 } }),
    );
    expect(e.kind).toBe("network");
    expect(e.message).toContain("stopped at 0 of 307200 bytes after 3 attempts");
    expect(e.message).toContain("run the pull again");
    expect(e.message).not.toContain("partial file is kept");
    expect(hub.cdnRequests()).toHaveLength(3);
    const sha = hub.sha("org/model-GGUF", "model-Q4_K_M.gguf");
    const incomplete = new RepoCache(cacheDir, "org/model-GGUF").incompletePath(sha);
    expect(existsSync(incomplete)).toBe(false);
    expect(existsSync(`${incomplete}.parts`)).toBe(false);
  });

  test("a large file is fetched in parallel ranged parts", async () => {
    hub.faults.barrier = 4;
    const pulled = await pullOk("org/model-GGUF", { mmproj: false });
    expect(hub.cdnMaxActive).toBe(4);
    const ranges = hub
      .cdnRequests()
      .map((r) => /^bytes=(\d+)-(\d*)$/.exec(r.range ?? "")!)
      .map((m) => [Number(m[1]), m[2] === "" ? MODEL.length : Number(m[2]) + 1])
      .sort((a, b) => a[0]! - b[0]!);
    expect(ranges[0]![0]).toBe(0);
    expect(ranges.at(-1)![1]).toBe(MODEL.length);
    for (let i = 1; i < ranges.length; i++) expect(ranges[i]![0]).toBe(ranges[i - 1]![1]!);
    expect(new Uint8Array(readFileSync(pulled.model[0]!.local))).toEqual(MODEL);
  });

  test("not enough free disk is refused before the first byte, with both numbers", async () => {
    const e = await refusal(pullOk("org/model-GGUF", { freeBytes: () => 1000 }));
    expect(e.kind).toBe("disk_space");
    expect(e.message).toContain("it needs 340 KiB more and 1000 bytes are free");
    expect(hub.cdnRequests()).toEqual([]);
  });

  test("a disk that fills mid-download keeps the partial file, and the next pull resumes it", async () => {
    // A disk with 100 KiB free: it writes what fits, then refuses.
    let budget = 100 * 1024;
    const filling: FileOps = {
      write(fd, data, position) {
        if (budget === 0) throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
        const n = writeSync(fd, data, 0, Math.min(budget, data.length), position);
        budget -= n;
        return n;
      },
    };
    const e = await refusal(
      pullOk("org/model-GGUF", { mmproj: false, fileOps: filling, tuning: { ...FAST, connections: 1 } }),
    );
    expect(e.kind).toBe("disk_full");
    expect(e.message).toContain("ENOSPC");
    expect(e.message).toContain("free space and pull again to resume");
    const repoDir = join(cacheDir, "models--org--model-GGUF");
    expect(tree(join(repoDir, "snapshots"))).toEqual([]);
    const sha = hub.sha("org/model-GGUF", "model-Q4_K_M.gguf");
    expect(tree(join(repoDir, "blobs")).sort()).toEqual([`${sha}.incomplete`, `${sha}.incomplete.parts`]);
    // The bytes the record claims are the ones the next pull does not fetch again.
    const kept = JSON.parse(readFileSync(join(repoDir, "blobs", `${sha}.incomplete.parts`), "utf8")).parts[0][2];
    expect(kept).toBe(100 * 1024);
    expect(e.message).toContain(`${kept} of ${MODEL.length} bytes are kept`);
    hub.resetCounters();
    const pulled = await pullOk("org/model-GGUF", { mmproj: false });
    expect(new Uint8Array(readFileSync(pulled.model[0]!.local))).toEqual(MODEL);
    expect(hub.cdnBytes).toBe(MODEL.length - kept);
  });
});

describe("tokens, proxies and refusals", () => {
  test("the token goes to the Hub and never to the CDN host", async () => {
    const pulled = await pull("org/gated-GGUF", {
      settings: settings({ HF_TOKEN: hub.token }),
      tuning: FAST,
    });
    expect(pulled.model[0]!.size).toBe(100 * 1024);
    expect(hub.hubRequests().length).toBeGreaterThan(0);
    expect(hub.hubRequests().every((r) => r.authorization === `Bearer ${hub.token}`)).toBe(true);
    expect(hub.cdnRequests().length).toBeGreaterThan(0);
    expect(hub.cdnRequests().every((r) => r.authorization === undefined)).toBe(true);
  });

  test("a gated repo without a token, or with a token not accepted, says to set HF_TOKEN and accept the licence", async () => {
    const without = await refusal(pullOk("org/gated-GGUF"));
    expect(without.kind).toBe("gated");
    expect(without.message).toBe(
      `org/gated-GGUF is gated or private (HTTP 401): accept its licence at ${hub.hubUrl}/org/gated-GGUF and set HF_TOKEN (or run \`hf auth login\`)`,
    );
    const wrong = await refusal(pull("org/gated-GGUF", { settings: settings({ HF_TOKEN: "hf_wrong" }) }));
    expect(wrong.kind).toBe("gated");
    expect(wrong.message).toContain("HTTP 403");
    expect(wrong.message).toContain("check that HF_TOKEN is a valid token");
  });

  test("an unknown repo, a tag with no file, no network", async () => {
    const unknown = await refusal(pullOk("org/nothing-here"));
    expect(unknown.kind).toBe("not_found");
    expect(unknown.message).toContain(`org/nothing-here was not found on ${hub.hubUrl}`);
    const tag = await refusal(pullOk("org/model-GGUF:Q5_K_S"));
    expect(tag.kind).toBe("no_file");
    expect(tag.message).toBe("org/model-GGUF has no GGUF file for 'Q5_K_S'; it has Q4_K_M, Q8_0, IQ2_XXS");
    const down = await refusal(
      pull("org/model-GGUF", {
        settings: hubSettings({ HF_ENDPOINT: "http://127.0.0.1:1", HF_HUB_CACHE: freshCache() }),
      }),
    );
    expect(down.kind).toBe("network");
    expect(down.message).toContain("cannot reach 127.0.0.1:1");
    expect(down.message).toContain("HF_HUB_OFFLINE=1");
  });

  test("HTTP_PROXY is used for the Hub and the CDN alike; NO_PROXY bypasses it", async () => {
    const proxy = await new ForwardProxy().start();
    try {
      const pulled = await pull("org/model-GGUF:Q8_0", { settings: settings({ HTTP_PROXY: proxy.url }), tuning: FAST });
      expect(pulled.model[0]!.size).toBe(SMALL_Q8.length);
      const hosts = new Set(proxy.forwarded.map((u) => new URL(u).origin));
      expect(hosts).toEqual(new Set([hub.hubUrl, hub.cdnUrl]));
      expect(proxy.forwarded.length).toBe(hub.requests.length);
      proxy.forwarded.length = 0;
      freshCache();
      await pull("org/model-GGUF:Q8_0", { settings: settings({ HTTP_PROXY: proxy.url, NO_PROXY: "127.0.0.1" }) });
      expect(proxy.forwarded).toEqual([]);
    } finally {
      await proxy.stop();
    }
  });
});

describe("processes sharing a cache", () => {
  const child = (ref: string, env: Record<string, string>) =>
    Bun.spawn([process.execPath, join(import.meta.dir, "pull-child.ts"), ref], {
      env: { ...process.env, HF_ENDPOINT: hub.hubUrl, HF_HUB_CACHE: cacheDir, ...env },
      stdout: "pipe",
      stderr: "pipe",
    });

  test("a partial file left by a killed process is continued, not restarted", async () => {
    freshCache();
    const stallAt = 120 * 1024;
    hub.faults.stall = { afterBytes: stallAt };
    const first = child("org/model-GGUF", { SF_TEST_TUNING: JSON.stringify({ connections: 1 }) });
    const sha = hub.sha("org/model-GGUF", "model-Q4_K_M.gguf");
    const sidecar = `${new RepoCache(cacheDir, "org/model-GGUF").incompletePath(sha)}.parts`;
    // Wait (hang guard: the test's own timeout) until the killed-to-be process has recorded every byte it got.
    const recorded = () => {
      try {
        return (JSON.parse(readFileSync(sidecar, "utf8")).parts as number[][])[0]?.[2] ?? 0;
      } catch {
        return 0;
      }
    };
    while (recorded() < stallAt) await Bun.sleep(20);
    first.kill("SIGKILL");
    await first.exited;
    hub.faults.stall = undefined;
    hub.resetCounters();
    const pulled = await pullOk("org/model-GGUF", { mmproj: false });
    expect(new Uint8Array(readFileSync(pulled.model[0]!.local))).toEqual(MODEL);
    expect(hub.cdnBytes).toBe(MODEL.length - stallAt);
    expect(hub.cdnRequests()[0]!.range).toStartWith(`bytes=${stallAt}-`);
  }, 60_000);

  test("two processes pulling one file: one downloads, the other waits and uses it", async () => {
    freshCache();
    // The first to take the lock stalls mid-file (and retries on a short idle timeout) until the other is seen waiting.
    hub.faults.stall = { afterBytes: 64 * 1024 };
    const tuning = JSON.stringify({ connections: 1, idleTimeoutMs: 300, retryBaseMs: 5 });
    const procs = [
      child("org/model-GGUF", { SF_TEST_TUNING: tuning }),
      child("org/model-GGUF", { SF_TEST_TUNING: tuning }),
    ];
    const sawWaiting = Promise.race(
      procs.map(async (p) => {
        for await (const text of p.stderr.pipeThrough(new TextDecoderStream())) if (text.includes("waiting")) return;
        await new Promise(() => {});
      }),
    );
    await sawWaiting;
    hub.faults.stall = undefined;
    const [ra, rb] = await Promise.all(procs.map(async (p) => JSON.parse(await new Response(p.stdout).text())));
    expect(ra.ok).toBe(true);
    expect(rb.ok).toBe(true);
    expect(ra.path).toBe(rb.path);
    expect([ra.waited, rb.waited]).toContain(true);
    // Every byte crossed the wire to one process once.
    expect(ra.fetched + rb.fetched).toBe(MODEL.length + MMPROJ.length);
    expect(Math.min(ra.fetched, rb.fetched)).toBe(0);
  }, 60_000);

  test("a lock left by a dead process does not hold a pull up", async () => {
    freshCache();
    const dead = Bun.spawn([process.execPath, "-e", "0"]);
    await dead.exited;
    const sha = hub.sha("org/model-GGUF", "model-Q8_0.gguf");
    const lock = new RepoCache(cacheDir, "org/model-GGUF").lockPath(sha);
    mkdirSync(join(lock, ".."), { recursive: true });
    writeFileSync(lock, JSON.stringify({ pid: dead.pid, host: (await import("node:os")).hostname(), nonce: "x" }));
    const pulled = await pullOk("org/model-GGUF:Q8_0", { mmproj: false });
    expect(pulled.model[0]!.size).toBe(SMALL_Q8.length);
    expect(existsSync(lock)).toBe(false);
  });
});
