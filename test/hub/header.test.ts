// A model's GGUF header read off the Hub before its first byte is downloaded
// (src/hub/header.ts): the project's reader parses a file's first bytes as it
// parses the file, asks for more when the header runs past them, and a pull
// hands the header and the weights' bytes (every split part) to its
// beforeDownload hook, whose refusal leaves nothing downloaded. Against the
// Hub stand-in on loopback.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  GgufFormatError,
  type GgufFile,
  NeedMoreBytes,
  parseGgufPrefix,
  readGgufSync,
  writeGgufBytes,
} from "../../src/gguf/index.ts";
import { HubError } from "../../src/hub/errors.ts";
import { HEADER_FIRST_BYTES, readRemoteHeader } from "../../src/hub/header.ts";
import { pull } from "../../src/hub/pull.ts";
import { hubSettings } from "../../src/hub/settings.ts";
import { fakeGguf, HubStandin } from "../support/hub-standin.ts";
import { fixturePath } from "../support/models.ts";

const hub = new HubStandin();
const dirs: string[] = [];
let chatPath = "";
let chatBytes: Uint8Array;

/** A GGUF whose header is long (a large vocabulary) and whose weights follow it: 1 MiB of F32. */
const LONG = writeGgufBytes({
  metadata: [
    ["general.architecture", "llama"],
    ["general.name", "long-header"],
    ["llama.context_length", 4096],
    ["llama.embedding_length", 64],
    ["llama.block_count", 2],
    ["llama.attention.head_count", 4],
    ["llama.attention.head_count_kv", 2],
    ["tokenizer.ggml.tokens", Array.from({ length: 20_000 }, (_, i) => `token-${i}`)],
  ],
  tensors: [{ name: "token_embd.weight", dims: [64, 4096], type: "F32", data: new Float32Array(64 * 4096) }],
});

beforeAll(async () => {
  await hub.start();
  chatPath = await fixturePath("tiny-chat");
  chatBytes = new Uint8Array(readFileSync(chatPath));
  hub.addRepo("org/long-GGUF", { "long-Q8_0.gguf": LONG });
  // A split model: the first part holds the metadata; the second stands in with bytes no reader looks at.
  hub.addRepo("org/split-GGUF", {
    "split-Q8_0-00001-of-00002.gguf": LONG,
    "split-Q8_0-00002-of-00002.gguf": fakeGguf(300_000),
  });
});
afterAll(async () => {
  await hub.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
afterEach(() => hub.resetCounters());

function freshCache(): string {
  const dir = mkdtempSync(join(tmpdir(), "sf-hub-header-"));
  dirs.push(dir);
  return dir;
}

/** A file's bytes served by Range in memory, the ranges asked for logged. */
function opener(bytes: Uint8Array, asked: { start: number; end: number }[]) {
  return async (range: { start: number; end: number }) => {
    asked.push(range);
    return new Response(bytes.slice(range.start, range.end), { status: 206 });
  };
}

/** What the reader answers for a file, without the numbers that depend on how it was read. */
const facts = (f: GgufFile) => ({
  metadata: f.metadata,
  tensors: f.tensors,
  dataOffset: f.dataOffset,
  size: f.fileSize,
});

describe("the GGUF header from a file's first bytes", () => {
  test("the whole file parses as readGgufSync parses it; a prefix that stops short asks for more", () => {
    expect(facts(parseGgufPrefix(chatBytes, chatBytes.length, "tiny.gguf"))).toEqual(facts(readGgufSync(chatPath)));
    let need: unknown;
    try {
      parseGgufPrefix(LONG.subarray(0, 1000), LONG.length, "long.gguf");
    } catch (err) {
      need = err;
    }
    expect(need).toBeInstanceOf(NeedMoreBytes);
    expect((need as NeedMoreBytes).end).toBeGreaterThan(1000);
    // A corrupt file is still a format error naming it, not a request for more.
    const bad = Uint8Array.from(LONG.subarray(0, 64));
    bad[0] = 0;
    expect(() => parseGgufPrefix(bad, LONG.length, "bad.gguf")).toThrow(GgufFormatError);
  });

  test("the header is fetched in growing contiguous ranges until it parses, never the weights", async () => {
    const asked: { start: number; end: number }[] = [];
    const header = await readRemoteHeader(opener(LONG, asked), "long.gguf", LONG.length, { firstBytes: 4096 });
    expect(facts(header)).toEqual(facts(parseGgufPrefix(LONG, LONG.length, "long.gguf")));
    expect(asked.length).toBeGreaterThan(1);
    expect(asked[0]).toEqual({ start: 0, end: 4096 });
    for (let i = 1; i < asked.length; i++) {
      expect(asked[i]!.start).toBe(asked[i - 1]!.end);
      expect(asked[i]!.end - asked[i]!.start).toBeGreaterThanOrEqual(asked[i - 1]!.end - asked[i - 1]!.start);
    }
    // The weights (1 MiB after the header) are not all fetched.
    expect(asked.at(-1)!.end).toBeLessThan(LONG.length);
  });

  test("a file that is not GGUF is refused naming it", async () => {
    const junk = new Uint8Array(4096).fill(7);
    const err = await readRemoteHeader(opener(junk, []), "junk.gguf", junk.length).catch((e) => e);
    expect(err).toBeInstanceOf(HubError);
    expect((err as HubError).message).toContain("junk.gguf on the Hub is not a GGUF file superfluid can read");
  });
});

describe("a pull's beforeDownload hook", () => {
  test("sees the header (from the first split part) and every part's bytes; a throw leaves nothing downloaded", async () => {
    const cacheDir = freshCache();
    const seen: { header: GgufFile; weights: number }[] = [];
    const refusal = new Error("does not fit");
    const err = await pull("org/split-GGUF:Q8_0", {
      settings: hubSettings({ HF_ENDPOINT: hub.hubUrl, HF_HUB_CACHE: cacheDir }),
      headerFirstBytes: 4096,
      beforeDownload: (header, weights) => {
        seen.push({ header, weights });
        throw refusal;
      },
    }).catch((e) => e);
    expect(err).toBe(refusal);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.header.metadata["general.name"]).toBe("long-header");
    expect(seen[0]!.weights).toBe(LONG.length + 300_000);
    // Only ranged reads of the first part's header reached the CDN; no blob, partial or snapshot in the cache.
    const first = hub.sha("org/split-GGUF", "split-Q8_0-00001-of-00002.gguf");
    const cdn = hub.cdnRequests();
    expect(cdn.length).toBeGreaterThan(0);
    for (const r of cdn) {
      expect(r.path).toStartWith(`/blobs/${first}`);
      expect(r.range).toMatch(/^bytes=\d+-\d+$/);
    }
    expect(hub.cdnBytes).toBeLessThan(LONG.length);
    const repoDir = join(cacheDir, "models--org--split-GGUF");
    const blobs = existsSync(join(repoDir, "blobs")) ? readdirSync(join(repoDir, "blobs")) : [];
    expect(blobs.filter((b) => !b.endsWith(".lock"))).toEqual([]);
    expect(existsSync(join(repoDir, "snapshots"))).toBe(false);
  });

  test("a hook that passes lets the download go on; a cached model is not asked about again", async () => {
    const cacheDir = freshCache();
    const settings = hubSettings({ HF_ENDPOINT: hub.hubUrl, HF_HUB_CACHE: cacheDir });
    let calls = 0;
    const pulled = await pull("org/long-GGUF", {
      settings,
      beforeDownload: (_header, weights) => {
        calls++;
        expect(weights).toBe(LONG.length);
      },
    });
    expect(calls).toBe(1);
    expect(pulled.fetched).toBe(LONG.length);
    // One ranged header read (the file is under HEADER_FIRST_BYTES: it is the whole file), then the download.
    expect(LONG.length).toBeLessThan(HEADER_FIRST_BYTES);
    expect(readFileSync(pulled.model[0]!.local).equals(LONG)).toBe(true);
    hub.resetCounters();
    const again = await pull("org/long-GGUF", {
      settings,
      beforeDownload: () => {
        calls++;
      },
    });
    expect(again.cached).toBe(true);
    expect(calls).toBe(1);
    expect(hub.requests).toEqual([]);
  });
});
