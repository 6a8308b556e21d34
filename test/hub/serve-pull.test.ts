// A reference served, loaded and pulled through the server: `serve org/repo:TAG`
// pulls what the cache lacks (and starts with no request once it is there),
// /health shows the pull while the server starts, --offline and a failed pull
// stop the start with the reason, POST /v1/models/load pulls, and Ollama's
// /api/pull (with the official `ollama` client) pulls hf.co names in Ollama's
// statuses. The Hub is a stand-in on loopback serving the built-in chat model's
// bytes under a GGUF name; `superfluid pull` and `list` run as the CLI does.
// A model that cannot fit in any machine's memory (its metadata claims 8 GiB
// of KV a token) is refused by the fit check before its first byte when it is
// pulled to be loaded, and pulled like any other by /api/pull and `superfluid
// pull`, which do not load.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ollama } from "ollama";
import { startServer, type RunningServer } from "../../src/cli/serve.ts";
import { newNode, nodeView, poll, type NodeView } from "../../src/cli/top.ts";
import { parseServeOptions, type ServeOptions } from "../../src/cli/serve-options.ts";
import { formatBytes } from "../../src/runtime/byte-size.ts";
import { writeGgufBytes } from "../../src/gguf/index.ts";
import { HEADER_FIRST_BYTES } from "../../src/hub/header.ts";
import { fixturePath } from "../support/models.ts";
import { HubStandin } from "../support/hub-standin.ts";

process.env.SUPERFLUID_QUIET ??= "1";

const hub = new HubStandin();
const REPO = "org/tiny-GGUF";
const REF = `${REPO}:Q8_0`;
/** tiny-random's layer-skip draft (the same vocabulary), for `--speculate draft-model:REF` on tiny-random. */
const DRAFT_REPO = "org/tiny-draft-GGUF";
const DRAFT_REF = `${DRAFT_REPO}:Q8_0`;
const HUGE_REPO = "org/huge-GGUF";
const HUGE_REF = `${HUGE_REPO}:Q8_0`;
/**
 * 8 GiB of KV a token (2 layers x 1 KV head x 2^30 + 2^30 f16 values), and 6 MiB of weights: more bytes than the
 * header read fetches, so a download is told apart from it.
 */
const HUGE = writeGgufBytes({
  metadata: [
    ["general.architecture", "llama"],
    ["general.name", "huge-kv"],
    ["llama.context_length", 1 << 20],
    ["llama.embedding_length", 64],
    ["llama.block_count", 2],
    ["llama.attention.head_count", 1],
    ["llama.attention.head_count_kv", 1],
    ["llama.attention.key_length", 1 << 30],
    ["llama.attention.value_length", 1 << 30],
  ],
  tensors: [{ name: "token_embd.weight", dims: [64, 24_576], type: "F32", data: () => {} }],
});
let chatBytes: Uint8Array;
let chatPath = "";
let randomPath = "";
const saved: Record<string, string | undefined> = {};
const temps: string[] = [];

function temp(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}

/** Points the process's Hub variables at the stand-in and a fresh cache (restored in afterAll). */
function freshCache(): string {
  const dir = temp("sf-serve-hub-");
  process.env.HF_HUB_CACHE = dir;
  return dir;
}

beforeAll(async () => {
  for (const name of ["HF_ENDPOINT", "MODEL_ENDPOINT", "HF_HUB_CACHE", "HF_TOKEN", "HF_HUB_OFFLINE", "HTTP_PROXY"])
    saved[name] = process.env[name];
  await hub.start();
  chatPath = await fixturePath("tiny-chat");
  chatBytes = new Uint8Array(readFileSync(chatPath));
  hub.addRepo(REPO, { "tiny-chat-Q8_0.gguf": chatBytes, "README.md": new TextEncoder().encode("# tiny\n") });
  hub.addRepo(HUGE_REPO, { "huge-kv-Q8_0.gguf": HUGE });
  randomPath = await fixturePath("tiny-random");
  hub.addRepo(DRAFT_REPO, {
    "tiny-random-draft-Q8_0.gguf": new Uint8Array(readFileSync(await fixturePath("tiny-random-draft"))),
  });
  process.env.HF_ENDPOINT = hub.hubUrl;
  delete process.env.MODEL_ENDPOINT;
  delete process.env.HF_TOKEN;
  delete process.env.HF_HUB_OFFLINE;
  delete process.env.HTTP_PROXY;
});

afterAll(async () => {
  await hub.stop();
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

async function serve(
  args: string[],
  lines: string[] = [],
  seams?: Parameters<typeof startServer>[3],
): Promise<RunningServer> {
  const opts = parseServeOptions([
    ...args,
    "--port",
    "0",
    "--threads",
    "1",
    "--max-batch",
    "1",
    "--max-context",
    "512",
    "--sessions",
    temp("sf-serve-sessions-"),
  ]) as ServeOptions;
  return startServer(opts, (l) => lines.push(l), undefined, seams);
}

/** What the cache holds of a repo's blobs (lock files aside): none after a refusal before the first byte. */
function blobsOf(cache: string, repo: string): string[] {
  const dir = join(cache, `models--${repo.replace("/", "--")}`, "blobs");
  return existsSync(dir) ? readdirSync(dir).filter((b) => !b.endsWith(".lock")) : [];
}

/** Only the header was read: every CDN request a bounded range from the start, fewer bytes than the file. */
function onlyHeaderRead(): void {
  const cdn = hub.cdnRequests();
  expect(cdn.length).toBeGreaterThan(0);
  for (const r of cdn) expect(r.range).toMatch(/^bytes=\d+-\d+$/);
  expect(hub.cdnBytes).toBeLessThanOrEqual(HEADER_FIRST_BYTES);
  expect(hub.cdnBytes).toBeLessThan(HUGE.length);
}

async function refused(args: string[]): Promise<string> {
  try {
    const server = await serve(args);
    await server.close();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error("the server started; a refusal was expected");
}

describe("serve org/repo:TAG", () => {
  test("pulls what the cache lacks, showing it on /health, then starts from the cache with no request", async () => {
    freshCache();
    let release!: () => void;
    hub.faults.hold = new Promise((r) => (release = r));
    const seen: unknown[] = [];
    let top: NodeView | undefined;
    const lines: string[] = [];
    const starting = serve([REF], lines, {
      // While the CDN holds the bytes back, /health answers 503 loading with the file being pulled.
      listening: (url) => {
        void (async () => {
          for (;;) {
            const body = (await (await fetch(`${url}/health`)).json()) as { pulling?: unknown[] };
            if (body.pulling) {
              seen.push(...body.pulling);
              // `superfluid top` shows the same pull while the server starts.
              const node = newNode(url);
              await poll(node, undefined);
              top = nodeView(node);
              break;
            }
            await Bun.sleep(10);
          }
          hub.faults.hold = undefined;
          release();
        })();
      },
    });
    const server = await starting;
    try {
      expect(seen[0]).toEqual({
        model: REF,
        file: "tiny-chat-Q8_0.gguf",
        state: "downloading",
        done: 0,
        total: chatBytes.length,
      });
      expect(top?.state).toBe("loading");
      expect(top?.pulls?.map((p) => [p.model, p.file, p.total])).toEqual([
        [REF, "tiny-chat-Q8_0.gguf", chatBytes.length],
      ]);
      expect(lines.some((l) => l.startsWith("superfluid: pulling tiny-chat-Q8_0.gguf"))).toBe(true);
      expect(lines.some((l) => l.startsWith("superfluid: pulled tiny-chat-Q8_0.gguf"))).toBe(true);
      const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string }[] };
      expect(models.data.map((m) => m.id)).toEqual([REPO]);
      const chat = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: REPO, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
      });
      expect(chat.status).toBe(200);
    } finally {
      await server.close();
    }
    hub.resetCounters();
    const t0 = performance.now();
    const again = await serve([REF]);
    const cachedMs = performance.now() - t0;
    await again.close();
    expect(hub.requests).toEqual([]);
    const t1 = performance.now();
    const local = await serve([chatPath]);
    const localMs = performance.now() - t1;
    await local.close();
    console.error(`start to ready: cached reference ${cachedMs.toFixed(0)} ms, local path ${localMs.toFixed(0)} ms`);
  }, 120_000);

  test("--offline, an unknown repo and a missing tag stop the start with the reason", async () => {
    freshCache();
    hub.resetCounters();
    const offline = await refused([REF, "--offline"]);
    expect(offline).toContain("offline mode (HF_HUB_OFFLINE=1 or --offline) makes no request");
    expect(hub.requests).toEqual([]);
    expect(await refused(["org/missing-GGUF"])).toContain("org/missing-GGUF was not found on");
    expect(await refused([`${REPO}:Q4_K_M`])).toBe("org/tiny-GGUF has no GGUF file for 'Q4_K_M'; it has Q8_0");
  }, 60_000);

  test("a model that does not fit is refused before its first byte, naming both figures and a way out", async () => {
    const cache = freshCache();
    hub.resetCounters();
    const message = await refused([HUGE_REF]);
    expect(message).toMatch(
      /^model 'org\/huge-GGUF' does not fit in memory: it needs .* \(weights 6\.\d+ MiB \+ KV .* for \d+ tokens at 8 GiB a token\) but .* of (host|device) memory is free; a smaller --max-context or --max-batch/,
    );
    expect(message).toContain(`nothing of ${HUGE_REF} was downloaded (a smaller quant of ${HUGE_REPO}`);
    onlyHeaderRead();
    expect(blobsOf(cache, HUGE_REPO)).toEqual([]);
    expect(existsSync(join(cache, "models--org--huge-GGUF", "snapshots"))).toBe(false);
  }, 60_000);
});

describe("--speculate draft-model:org/repo:TAG", () => {
  test("the draft model is pulled before the worker starts, then drafts; cached, it starts with no request", async () => {
    const cache = freshCache();
    hub.resetCounters();
    const lines: string[] = [];
    const args = [randomPath, "--speculate", `draft-model:${DRAFT_REF}`];
    const server = await serve(args, lines);
    const commit = hub.commitOf(DRAFT_REPO);
    const draftFile = join(cache, "models--org--tiny-draft-GGUF", "snapshots", commit, "tiny-random-draft-Q8_0.gguf");
    try {
      expect(blobsOf(cache, DRAFT_REPO)).toEqual([hub.sha(DRAFT_REPO, "tiny-random-draft-Q8_0.gguf")]);
      expect(existsSync(draftFile)).toBe(true);
      expect(lines).toContain(`superfluid: draft model ${DRAFT_REF} is ${draftFile}`);
      expect(lines.some((l) => l.startsWith("superfluid: pulled tiny-random-draft-Q8_0.gguf"))).toBe(true);
      expect(lines).toContain("superfluid: speculation: draft-model");
      const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {
        data: { id: string; meta: { speculation?: string } }[];
      };
      expect(models.data.map((m) => m.meta.speculation)).toEqual(["draft-model"]);
      const chat = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: models.data[0]!.id,
          messages: [{ role: "user", content: "hi" }],
          max_tokens: 4,
          temperature: 0,
        }),
      });
      expect(chat.status).toBe(200);
    } finally {
      await server.close();
    }
    hub.resetCounters();
    const again = await serve([...args, "--offline"]);
    await again.close();
    expect(hub.requests).toEqual([]);
  }, 120_000);

  test("a draft reference that cannot be pulled stops the start with the pull's reason", async () => {
    freshCache();
    hub.resetCounters();
    const offline = await refused([randomPath, "--speculate", `draft-model:${DRAFT_REF}`, "--offline"]);
    expect(offline).toContain("offline mode (HF_HUB_OFFLINE=1 or --offline) makes no request");
    expect(hub.requests).toEqual([]);
    const missing = await refused([randomPath, "--speculate", "draft-model:org/missing-GGUF"]);
    expect(missing).toContain("org/missing-GGUF was not found on");
  }, 60_000);
});

describe("pulling through the API", () => {
  let server: RunningServer;
  beforeAll(async () => {
    freshCache();
    server = await serve([chatPath]);
  });
  afterAll(async () => {
    await server?.close();
  });

  test("Ollama's pull() of an hf.co name: Ollama's statuses, then listed and chatting under that name", async () => {
    const ollama = new Ollama({ host: server.url });
    const statuses: { status: string; digest?: string; total?: number; completed?: number }[] = [];
    for await (const part of await ollama.pull({ model: `hf.co/${REF}`, stream: true })) statuses.push(part);
    const sha = hub.sha(REPO, "tiny-chat-Q8_0.gguf");
    expect(statuses[0]).toEqual({ status: "pulling manifest" });
    const pulling = statuses.filter((s) => s.status === `pulling ${sha.slice(0, 12)}`);
    expect(pulling.length).toBeGreaterThan(0);
    expect(pulling.at(-1)).toEqual({
      status: `pulling ${sha.slice(0, 12)}`,
      digest: `sha256:${sha}`,
      total: chatBytes.length,
      completed: chatBytes.length,
    });
    expect(statuses.slice(-3).map((s) => s.status)).toEqual(["verifying sha256 digest", "writing manifest", "success"]);
    const tags = await ollama.list();
    expect(tags.models.map((m) => m.name)).toContain(`hf.co/${REF}`);
    const reply = await ollama.chat({
      model: `hf.co/${REF}`,
      messages: [{ role: "user", content: "hi" }],
      options: { num_predict: 4 },
    });
    expect(reply.message.role).toBe("assistant");
    // Pulled again: from the cache, no request, the same ending.
    hub.resetCounters();
    const whole: unknown = await ollama.pull({ model: `hf.co/${REF}`, stream: false });
    expect(whole).toEqual({ status: "success" });
    expect(hub.requests).toEqual([]);
  }, 120_000);

  test("refusals: a library name is 400, an unknown repo and a missing tag carry the Hub's reason", async () => {
    const post = async (body: unknown) => {
      const res = await fetch(`${server.url}/api/pull`, { method: "POST", body: JSON.stringify(body) });
      return { status: res.status, json: (await res.json()) as { error: string } };
    };
    const library = await post({ model: "llama3.2" });
    expect(library.status).toBe(400);
    expect(library.json.error).toContain("superfluid pulls only from the Hugging Face Hub");
    const unknown = await post({ model: "hf.co/org/missing-GGUF:Q4_K_M" });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toContain("org/missing-GGUF was not found");
    const tag = await post({ model: `hf.co/${REPO}:Q2_K` });
    expect(tag.status).toBe(404);
    expect(tag.json.error).toBe("org/tiny-GGUF has no GGUF file for 'Q2_K'; it has Q8_0");
  });

  test("POST /v1/models/load of a model that does not fit: 507 insufficient_memory, nothing downloaded", async () => {
    const cache = freshCache();
    hub.resetCounters();
    const res = await fetch(`${server.url}/v1/models/load`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: HUGE_REF }),
    });
    expect(res.status).toBe(507);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("insufficient_memory");
    expect(body.error.message).toMatch(/does not fit in memory: it needs .* but .* of (host|device) memory is free/);
    expect(body.error.message).toContain(`nothing of ${HUGE_REF} was downloaded`);
    onlyHeaderRead();
    expect(blobsOf(cache, HUGE_REPO)).toEqual([]);
  }, 60_000);

  test("/api/pull does not check the fit (pulling is not loading): the model is pulled", async () => {
    const cache = freshCache();
    const res = await fetch(`${server.url}/api/pull`, {
      method: "POST",
      body: JSON.stringify({ model: `hf.co/${HUGE_REF}`, stream: false }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "success" });
    expect(blobsOf(cache, HUGE_REPO)).toEqual([hub.sha(HUGE_REPO, "huge-kv-Q8_0.gguf")]);
  }, 60_000);

  test("POST /v1/models/load with a reference pulls it and loads it", async () => {
    freshCache();
    const res = await fetch(`${server.url}/v1/models/load`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: `${REPO}:tiny-chat-Q8_0.gguf` }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { id: string }).id).toBe(REPO);
  }, 120_000);
});

describe("superfluid pull and list", () => {
  const cli = async (args: string[], env: Record<string, string>) => {
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "../../src/main.ts"), ...args], {
      env: { ...process.env, HF_ENDPOINT: hub.hubUrl, ...env },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    return { out, err, code };
  };

  test("pull prints the model's path, list shows reference, quant, size and path; a failure exits 1", async () => {
    const cache = temp("sf-cli-hub-");
    const pulled = await cli(["pull", REF], { HF_HUB_CACHE: cache });
    expect(pulled.code).toBe(0);
    const commit = hub.commitOf(REPO);
    const path = join(cache, "models--org--tiny-GGUF", "snapshots", commit, "tiny-chat-Q8_0.gguf");
    expect(pulled.out).toBe(`${path}\n`);
    expect(pulled.err).toContain("pulled tiny-chat-Q8_0.gguf");
    const listed = await cli(["list"], { HF_HUB_CACHE: cache });
    expect(listed.code).toBe(0);
    const [head, row] = listed.out.trim().split("\n");
    expect(head!.split(/\s+/)).toEqual(["REFERENCE", "QUANT", "SIZE", "PATH"]);
    expect(row!.split(/\s{2,}/)).toEqual([REF, "Q8_0", formatBytes(chatBytes.length), path]);
    const json = await cli(["list", "--json"], { HF_HUB_CACHE: cache });
    expect(JSON.parse(json.out)).toMatchObject({ reference: REF, quant: "Q8_0", size: chatBytes.length, path });
    const failed = await cli(["pull", "org/missing-GGUF"], { HF_HUB_CACHE: cache });
    expect(failed.code).toBe(1);
    expect(failed.err).toContain("superfluid pull: org/missing-GGUF was not found");
    const usage = await cli(["pull"], { HF_HUB_CACHE: cache });
    expect(usage.code).toBe(2);
    // Download only: no fit check, so a model too large for this machine is pulled all the same.
    const huge = await cli(["pull", HUGE_REF], { HF_HUB_CACHE: cache });
    expect(huge.code).toBe(0);
    expect(blobsOf(cache, HUGE_REPO)).toEqual([hub.sha(HUGE_REPO, "huge-kv-Q8_0.gguf")]);
  }, 60_000);
});
