// Burst gathering (src/daemon/burst-gather.ts): what is held, and what lets it go.
import { describe, expect, test } from "bun:test";
import { BurstGather } from "../../src/daemon/burst-gather.ts";

function gatherer(maxWaitMs = 60_000) {
  const sent: string[] = [];
  let onSend: (() => void) | undefined;
  const gather = new BurstGather<string>((job) => {
    sent.push(job);
    onSend?.();
  }, maxWaitMs);
  const nextSend = () => new Promise<void>((resolve) => (onSend = resolve));
  return { gather, sent, nextSend };
}

describe("burst gathering", () => {
  test("a request alone, or beside a worker that is decoding, is never held", () => {
    const { gather, sent } = gatherer();
    expect(gather.offer("alone", true, 0, 8)).toBe(false);
    expect(gather.offer("beside a busy worker", false, 5, 8)).toBe(false);
    expect(gather.size).toBe(0);
    expect(sent).toEqual([]);
  });

  test("held while other prompts are prepared; the last one ready sends them all, in order", () => {
    const { gather, sent } = gatherer();
    expect(gather.offer("a", true, 2, 8)).toBe(true);
    expect(gather.offer("b", true, 1, 8)).toBe(true);
    expect(sent).toEqual([]);
    expect(gather.offer("c", true, 0, 8)).toBe(true);
    expect(sent).toEqual(["a", "b", "c"]);
    expect(gather.size).toBe(0);
  });

  test("once something is held, later jobs join it even if the worker no longer looks idle", () => {
    const { gather, sent } = gatherer();
    gather.offer("a", true, 1, 8);
    expect(gather.offer("b", false, 1, 8)).toBe(true);
    expect(gather.size).toBe(2);
    gather.release();
    expect(sent).toEqual(["a", "b"]);
  });

  test("as many as a tick admits go at once, without waiting for the rest", () => {
    const { gather, sent } = gatherer();
    gather.offer("a", true, 3, 2);
    expect(sent).toEqual([]);
    gather.offer("b", true, 2, 2);
    expect(sent).toEqual(["a", "b"]);
  });

  test("a prompt that never becomes a generation (refused, cancelled) holds the others only until the time cap", async () => {
    const { gather, sent, nextSend } = gatherer(1);
    const sending = nextSend();
    gather.offer("a", true, 1, 8);
    await sending;
    expect(sent).toEqual(["a"]);
    expect(gather.size).toBe(0);
  });

  test("dropped jobs are never sent (their worker died; the next one is sent them again)", async () => {
    const { gather, sent } = gatherer(1);
    gather.offer("a", true, 1, 8);
    gather.drop();
    await Bun.sleep(20);
    expect(sent).toEqual([]);
    gather.release();
    expect(sent).toEqual([]);
  });
});
