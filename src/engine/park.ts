// Park artifacts (docs/cli.md#parking): a lane's KV sealed to a file at the
// end of a session's generation, so the next generation on that session
// restores it instead of prefilling the whole history again, across restarts.
//
// The KV itself is llama.cpp's own sequence state export (lossless). Around it
// an envelope says what it may be used for: the model it was computed by, how
// many tokens it covers and a digest of those token ids, so a history that
// was rewritten since resumes cold, never wrong; and a checksum of the whole
// file, so a torn or corrupted file is refused instead of loaded.
//
// Layout: magic (8 bytes) | version (u32 LE) | header length (u32 LE) |
// header (JSON) | blob | sha256 of everything before it (32 bytes).
import { createHash } from "node:crypto";
import { closeSync, fsyncSync, openSync, readSync, renameSync, rmSync, fstatSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { makePrivateDir, openPrivate } from "../runtime/private-files.ts";
import type { LlamaModel } from "./model.ts";

const MAGIC = Buffer.from("SFPARK\0\0", "latin1");
/** Bumped whenever the envelope or what the header means changes; other versions are ignored. */
export const PARK_VERSION = 1;
const PREFIX_BYTES = MAGIC.length + 8;
const CHECKSUM_BYTES = 32;
/** A header larger than this is not one we wrote. */
const MAX_HEADER_BYTES = 64 * 1024;

interface ParkHeader {
  /** modelIdentity() of the model whose KV this is. */
  model: string;
  /** Tokens the KV covers: positions [0, tokens). */
  tokens: number;
  /** sha256 (hex) of those token ids as little-endian int32. */
  digest: string;
  /** Bytes of the state export. */
  blobBytes: number;
  /** The only encoding llama.cpp has (the lossy tier is another runtime's). */
  encoding: "lossless";
}

/**
 * What must be equal for a KV export to be reusable: the architecture and the
 * shapes its state export depends on, and the weights' size and name (a
 * different quantization or finetune of the same shape differs in one of them).
 */
export function modelIdentity(model: LlamaModel): string {
  const api = model.llama.api;
  const h = model.handle;
  return JSON.stringify({
    arch: model.meta("general.architecture") ?? "",
    name: model.meta("general.name") ?? "",
    vocab: model.vocabInfo.size,
    ctxTrain: api.llama_model_n_ctx_train(h),
    layers: api.llama_model_n_layer(h),
    embd: api.llama_model_n_embd(h),
    headsKv: api.llama_model_n_head_kv(h),
    weightBytes: Number(api.llama_model_size(h)),
  });
}

/** sha256 (hex) of token ids as little-endian int32: what an artifact's header records. */
export function tokenDigest(tokens: ArrayLike<number>, count = tokens.length): string {
  const ids = new Int32Array(count);
  for (let i = 0; i < count; i++) ids[i] = tokens[i]!;
  return createHash("sha256").update(new Uint8Array(ids.buffer)).digest("hex");
}

/**
 * Seals `blob` (the KV of `tokens`) to `path`: written to `<path>.tmp`,
 * flushed, then renamed over `path`, so a reader sees the old artifact or the
 * new one, never a torn one. The folder is made private (0700), the file is
 * 0600. Returns the file's size.
 */
export function sealPark(path: string, identity: string, tokens: readonly number[], blob: Uint8Array): number {
  const header: ParkHeader = {
    model: identity,
    tokens: tokens.length,
    digest: tokenDigest(tokens),
    blobBytes: blob.length,
    encoding: "lossless",
  };
  const headerBytes = Buffer.from(JSON.stringify(header), "utf8");
  const prefix = Buffer.alloc(PREFIX_BYTES);
  MAGIC.copy(prefix, 0);
  prefix.writeUInt32LE(PARK_VERSION, MAGIC.length);
  prefix.writeUInt32LE(headerBytes.length, MAGIC.length + 4);
  const checksum = createHash("sha256").update(prefix).update(headerBytes).update(blob).digest();
  makePrivateDir(dirname(path));
  const tmp = `${path}.tmp`;
  const fd = openPrivate(tmp, "w");
  try {
    for (const part of [prefix, headerBytes, blob, checksum]) writeAll(fd, part);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, path);
  return prefix.length + headerBytes.length + blob.length + checksum.length;
}

function writeAll(fd: number, bytes: Uint8Array): void {
  for (let off = 0; off < bytes.length; ) off += writeSync(fd, bytes, off, bytes.length - off);
}

function readExactly(fd: number, length: number, position: number): Buffer | undefined {
  const buf = Buffer.alloc(length);
  let got = 0;
  while (got < length) {
    const n = readSync(fd, buf, got, length - got, position + got);
    if (n === 0) return undefined;
    got += n;
  }
  return buf;
}

export type ParkLookup =
  | { ok: true; tokens: number; blob: Uint8Array }
  /**
   * missing: no file; stale: another model, version or history, or no better than `atLeast`; corrupt: not a whole
   * artifact (deleted).
   */
  | { ok: false; why: "missing" | "stale" | "corrupt" };

/**
 * The artifact at `path`, when it was sealed by a model with `identity` and
 * covers a prefix of `prompt` longer than `atLeast` tokens (by the digest of
 * its token ids). The header is checked before the blob is read; the blob
 * only after the file's checksum. A file that is not a whole artifact (torn,
 * truncated, bit-flipped) is deleted: it can never become valid.
 */
export function openPark(path: string, identity: string, prompt: readonly number[], atLeast: number): ParkLookup {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return { ok: false, why: "missing" };
  }
  let corrupt = false;
  try {
    const size = fstatSync(fd).size;
    const prefix = readExactly(fd, PREFIX_BYTES, 0);
    if (!prefix?.subarray(0, MAGIC.length).equals(MAGIC)) {
      corrupt = true;
      return { ok: false, why: "corrupt" };
    }
    // Another envelope version may be a newer server's: left alone, and cold.
    if (prefix.readUInt32LE(MAGIC.length) !== PARK_VERSION) return { ok: false, why: "stale" };
    const headerLength = prefix.readUInt32LE(MAGIC.length + 4);
    const headerBytes = headerLength <= MAX_HEADER_BYTES ? readExactly(fd, headerLength, PREFIX_BYTES) : undefined;
    let header: ParkHeader | undefined;
    try {
      header = headerBytes ? (JSON.parse(headerBytes.toString("utf8")) as ParkHeader) : undefined;
    } catch {
      header = undefined;
    }
    const blobAt = PREFIX_BYTES + headerLength;
    if (
      !header ||
      !Number.isSafeInteger(header.blobBytes) ||
      !Number.isSafeInteger(header.tokens) ||
      size !== blobAt + header.blobBytes + CHECKSUM_BYTES
    ) {
      corrupt = true;
      return { ok: false, why: "corrupt" };
    }
    if (header.model !== identity || header.tokens <= atLeast || header.tokens > prompt.length)
      return { ok: false, why: "stale" };
    if (header.digest !== tokenDigest(prompt, header.tokens)) return { ok: false, why: "stale" };
    const rest = readExactly(fd, header.blobBytes + CHECKSUM_BYTES, blobAt);
    if (!rest) {
      corrupt = true;
      return { ok: false, why: "corrupt" };
    }
    const blob = rest.subarray(0, header.blobBytes);
    const checksum = createHash("sha256").update(prefix).update(headerBytes!).update(blob).digest();
    if (!checksum.equals(rest.subarray(header.blobBytes))) {
      corrupt = true;
      return { ok: false, why: "corrupt" };
    }
    return { ok: true, tokens: header.tokens, blob: new Uint8Array(blob.buffer, blob.byteOffset, blob.length) };
  } finally {
    closeSync(fd);
    if (corrupt) rmSync(path, { force: true });
  }
}
