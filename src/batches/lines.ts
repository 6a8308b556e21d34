// Reading a batch's input file (JSONL) line by line from disk, a chunk at a
// time, never whole: the check at create and each run stream the file again
// rather than hold its lines, so the server's memory does not grow with the
// file, and a large file does not stall the event loop while it is read.
import { open } from "node:fs/promises";

/** One line of the file, in file order. */
export interface FileLine {
  /** Counts every line from 1, blank ones included. */
  number: number;
  /**
   * The line without its newline; undefined for a line over the reader's limit (its bytes were skipped, never held).
   */
  text: string | undefined;
}

const CHUNK_BYTES = 1 << 20;
/**
 * Lines handed out between turns of the event loop. A chunk in the page
 * cache is read back without a real wait, so the reads alone would not let
 * the server's other requests in while a large file is checked.
 */
const LINES_PER_TURN = 256;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The lines of the file at `path`; a line longer than `maxLineBytes` comes back without its text. */
export async function* fileLines(path: string, maxLineBytes: number): AsyncGenerator<FileLine> {
  const fh = await open(path, "r");
  try {
    const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
    // The current line's bytes so far, when it spans chunks.
    let parts: Buffer[] = [];
    let partBytes = 0;
    let tooLong = false;
    let number = 0;
    let sinceTurn = 0;
    const take = (piece: Buffer) => {
      if (tooLong || piece.length === 0) return;
      if (partBytes + piece.length > maxLineBytes) {
        tooLong = true;
        parts = [];
        return;
      }
      // Copied: the chunk is read into again.
      parts.push(Buffer.from(piece));
      partBytes += piece.length;
    };
    const line = (): FileLine => {
      const text = tooLong
        ? undefined
        : parts.length === 1
          ? parts[0]!.toString("utf8")
          : Buffer.concat(parts, partBytes).toString("utf8");
      parts = [];
      partBytes = 0;
      tooLong = false;
      return { number: ++number, text };
    };
    for (;;) {
      const { bytesRead } = await fh.read(chunk, 0, CHUNK_BYTES, null);
      if (bytesRead === 0) break;
      const data = chunk.subarray(0, bytesRead);
      let start = 0;
      for (let nl = data.indexOf(0x0a, start); nl >= 0; nl = data.indexOf(0x0a, start)) {
        take(data.subarray(start, nl));
        start = nl + 1;
        yield line();
        if (++sinceTurn >= LINES_PER_TURN) {
          sinceTurn = 0;
          await nextTurn();
        }
      }
      take(data.subarray(start));
    }
    // A last line without a newline.
    if (partBytes > 0 || tooLong) yield line();
  } finally {
    await fh.close();
  }
}
