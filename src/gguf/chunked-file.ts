// A forward-only little-endian cursor over a file that reads it in growing
// chunks from a file descriptor, so parsing the GGUF header of a multi-GB model
// touches only the first few MB. Every read is checked against the file size,
// so a corrupt length can never make us allocate or wait for bytes that are
// not there. The bytes may also come from a buffer holding the file's first
// bytes only (a header fetched with a Range request, src/hub/header.ts): a read
// past them throws NeedMoreBytes, naming how far the file must be fetched.

import { closeSync, fstatSync, openSync, readSync } from "node:fs";

export class GgufFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GgufFormatError";
  }
}

/** A read past the bytes a prefix buffer holds: fetch the file up to `end` (exclusive) and parse again. */
export class NeedMoreBytes extends Error {
  constructor(readonly end: number) {
    super(`the GGUF header goes on past the bytes fetched: ${end} needed`);
    this.name = "NeedMoreBytes";
  }
}

/** Where a ChunkedFile's bytes come from: a file descriptor, or the first bytes of a file in memory. */
interface ByteSource {
  /** Bytes read into `into` at `offset` (at most `length`) from `position`; 0 at the end of what is there. */
  read(into: Uint8Array, offset: number, length: number, position: number): number;
  /** Called when fewer than the bytes needed up to `end` were read. */
  short(end: number, what: string): never;
  close(): void;
}

const FIRST_CHUNK = 64 * 1024;
const MAX_CHUNK = 16 * 1024 * 1024;

const utf8 = new TextDecoder("utf-8", { fatal: false });

export class ChunkedFile {
  readonly path: string;
  readonly size: number;
  private readonly source: ByteSource;
  private buf = new Uint8Array(0);
  private view = new DataView(this.buf.buffer);
  /** Absolute file offset of buf[0]. */
  private bufStart = 0;
  private nextChunk = FIRST_CHUNK;
  /** Absolute read position. */
  pos = 0;

  /**
   * A file on disk, or (`prefix` given) a file of `size` bytes of which only the first `prefix.length` are at hand,
   * `path` then naming it in messages.
   */
  constructor(path: string, prefix?: { bytes: Uint8Array; size: number }) {
    this.path = path;
    if (prefix) {
      const { bytes } = prefix;
      this.size = prefix.size;
      this.source = {
        read: (into, offset, length, position) => {
          const n = Math.max(0, Math.min(length, bytes.length - position));
          into.set(bytes.subarray(position, position + n), offset);
          return n;
        },
        short: (end) => {
          throw new NeedMoreBytes(end);
        },
        close: () => {},
      };
      return;
    }
    let fd = openSync(path, "r");
    try {
      this.size = fstatSync(fd).size;
    } catch (e) {
      closeSync(fd);
      throw e;
    }
    this.source = {
      read: (into, offset, length, position) => readSync(fd, into, offset, length, position),
      short: (_end, what) => this.fail(`file shrank while reading ${what}`),
      close: () => {
        if (fd >= 0) closeSync(fd);
        fd = -1;
      },
    };
  }

  close(): void {
    this.source.close();
  }

  get remaining(): number {
    return this.size - this.pos;
  }

  fail(what: string, at = this.pos): never {
    throw new GgufFormatError(`${this.path}: ${what} (at byte ${at} of ${this.size})`);
  }

  /** Make sure `n` bytes from `pos` are buffered; throws if the file is too short. */
  private ensure(n: number, what: string): void {
    if (n > this.size - this.pos)
      this.fail(`truncated file: ${what} needs ${n} bytes, only ${this.size - this.pos} left`);
    const have = this.bufStart + this.buf.length - this.pos;
    if (have >= n) return;
    const want = Math.min(Math.max(n, this.nextChunk), this.size - this.pos);
    this.nextChunk = Math.min(this.nextChunk * 2, MAX_CHUNK);
    const fresh = new Uint8Array(want);
    let got = 0;
    while (got < want) {
      const r = this.source.read(fresh, got, want - got, this.pos + got);
      if (r <= 0) break;
      got += r;
    }
    if (got < n) this.source.short(this.pos + n, what);
    this.buf = fresh.subarray(0, got);
    this.view = new DataView(fresh.buffer, 0, got);
    this.bufStart = this.pos;
  }

  /** Buffer offset of the next `n` bytes, advancing `pos`. Call before touching `view` (it may be replaced). */
  private at(n: number, what: string): number {
    this.ensure(n, what);
    const off = this.pos - this.bufStart;
    this.pos += n;
    return off;
  }

  u8(what = "u8"): number {
    const o = this.at(1, what);
    return this.view.getUint8(o);
  }
  i8(what = "i8"): number {
    const o = this.at(1, what);
    return this.view.getInt8(o);
  }
  u16(what = "u16"): number {
    const o = this.at(2, what);
    return this.view.getUint16(o, true);
  }
  i16(what = "i16"): number {
    const o = this.at(2, what);
    return this.view.getInt16(o, true);
  }
  u32(what = "u32"): number {
    const o = this.at(4, what);
    return this.view.getUint32(o, true);
  }
  i32(what = "i32"): number {
    const o = this.at(4, what);
    return this.view.getInt32(o, true);
  }
  f32(what = "f32"): number {
    const o = this.at(4, what);
    return this.view.getFloat32(o, true);
  }
  f64(what = "f64"): number {
    const o = this.at(8, what);
    return this.view.getFloat64(o, true);
  }
  u64(what = "u64"): bigint {
    const o = this.at(8, what);
    return this.view.getBigUint64(o, true);
  }
  i64(what = "i64"): bigint {
    const o = this.at(8, what);
    return this.view.getBigInt64(o, true);
  }

  /** A u64 that must be a safe integer no larger than `max` (a count or length). */
  count(what: string, max: number): number {
    const start = this.pos;
    const v = this.u64(what);
    if (v > BigInt(max))
      this.fail(`${what} ${v} is impossible for a file of this size (corrupt or truncated file)`, start);
    return Number(v);
  }

  /** GGUF string: u64 byte length then UTF-8 bytes. */
  string(what = "string"): string {
    const len = this.count(`${what} length`, this.remaining - 8);
    const off = this.at(len, what);
    return utf8.decode(this.buf.subarray(off, off + len));
  }
}
