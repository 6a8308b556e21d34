// A model file's GGUF header read off the Hub before any of the file is
// downloaded (docs/cli.md#pulling-models): metadata and tensor infos from the
// file's first bytes, fetched with Range requests through the same client
// (the resolve route's redirect to the CDN included), first FIRST_BYTES, then
// as much more as the header turns out to need (a large vocabulary's header
// runs to tens of MiB). The project's own reader parses it (src/gguf), so a
// fit check sees the same figures it sees on a local file.
import { GgufFormatError, type GgufFile, NeedMoreBytes, parseGgufPrefix } from "../gguf/index.ts";
import { HubError } from "./errors.ts";

/** The first request's bytes: the whole header of most models. */
export const HEADER_FIRST_BYTES = 4 * 1024 * 1024;
/** No real header is larger; a file that claims one is corrupt, and is not fetched whole to find out. */
export const HEADER_MAX_BYTES = 256 * 1024 * 1024;

/** A file's bytes `start` to `end` (exclusive): a 206, or a 200 with the whole file. */
export type RangeOpener = (range: { start: number; end: number }, signal?: AbortSignal) => Promise<Response>;

/** Bytes `start` to `end` of the file; a 200 to a request from 0 is read only that far. */
async function fetchRange(
  open: RangeOpener,
  path: string,
  start: number,
  end: number,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  if (end <= start) return new Uint8Array(0);
  const res = await open({ start, end }, signal);
  if (res.status === 200 && start > 0) {
    await res.body?.cancel();
    throw new HubError("hub", `the Hub ignored a Range request for ${path}: its GGUF header cannot be read`);
  }
  const out = new Uint8Array(end - start);
  let got = 0;
  const reader = res.body?.getReader();
  if (reader) {
    try {
      while (got < out.length) {
        const { done, value } = await reader.read();
        if (done) break;
        const n = Math.min(value.length, out.length - got);
        out.set(value.subarray(0, n), got);
        got += n;
      }
    } finally {
      await reader.cancel().catch(() => {});
    }
  }
  if (got < out.length)
    throw new HubError("network", `the Hub sent ${got} of ${out.length} bytes asked for of ${path}'s GGUF header`);
  return out;
}

/**
 * The GGUF header (metadata and tensor infos) of `path`, a file of `size` bytes on the Hub, from its first bytes.
 * `firstBytes`: the first request's length (tests make it small to see the header grow).
 */
export async function readRemoteHeader(
  open: RangeOpener,
  path: string,
  size: number,
  options: { firstBytes?: number; signal?: AbortSignal } = {},
): Promise<GgufFile> {
  let bytes = await fetchRange(open, path, 0, Math.min(size, options.firstBytes ?? HEADER_FIRST_BYTES), options.signal);
  for (;;) {
    try {
      return parseGgufPrefix(bytes, size, path);
    } catch (err) {
      if (err instanceof GgufFormatError)
        throw new HubError("hub", `${path} on the Hub is not a GGUF file superfluid can read: ${err.message}`);
      if (!(err instanceof NeedMoreBytes)) throw err;
      // At least double what is there, so a long header takes a few requests, not one per field.
      const end = Math.min(size, Math.max(err.end, bytes.length * 2));
      if (end > HEADER_MAX_BYTES)
        throw new HubError(
          "hub",
          `${path} on the Hub claims a GGUF header of over ${HEADER_MAX_BYTES / 1024 / 1024} MiB: it is corrupt`,
        );
      const more = await fetchRange(open, path, bytes.length, end, options.signal);
      const grown = new Uint8Array(end);
      grown.set(bytes);
      grown.set(more, bytes.length);
      bytes = grown;
    }
  }
}
