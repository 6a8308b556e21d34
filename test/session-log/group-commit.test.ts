// Group commit (docs/design.md#group-commit): syncs start at most once per window,
// a flush waits at most one window for its sync to start, and nothing a flush
// covers is acknowledged (so nothing reaches a reader) before a sync that began
// after its records were written has returned. Time is a hand-stepped clock and
// syncs are fakes: the tests count syncs, never wall time.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WorkerClient } from "../../src/daemon/worker-client.ts";
import { LlamaModel } from "../../src/engine/model.ts";
import { GREEDY } from "../../src/engine/sampling.ts";
import type { SessionEvent } from "../../src/session-log/events.ts";
import { SessionJournal } from "../../src/session-log/journal.ts";
import { SessionStore } from "../../src/session-log/store.ts";
import { encodeRecord, GROUP_WINDOW_MS, WalWriter, type WalClock } from "../../src/session-log/wal.ts";
import { fixturePath } from "../support/models.ts";

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "sf-group-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A clock the test moves: `advance` runs every timer that falls due, in order. */
class ManualClock implements WalClock {
  private t = 0;
  private timers: { at: number; fn: () => void }[] = [];
  now(): number {
    return this.t;
  }
  after(ms: number, fn: () => void): void {
    this.timers.push({ at: this.t + ms, fn });
  }
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      this.timers.sort((a, b) => a.at - b.at);
      const next = this.timers[0];
      if (!next || next.at > end) break;
      this.timers.shift();
      this.t = next.at;
      next.fn();
      await settle();
    }
    this.t = end;
    await settle();
  }
}

/** Lets every queued microtask and promise reaction run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

const ev = (n: number): SessionEvent => ({
  session: 1,
  event_id: n,
  epoch: 1,
  ts_unix_ms: 0,
  body: { Generated: { span: [n], text: "x", finish: 0 } },
});

/** A writer on a real file whose syncs are counted and return at once. */
function countingWriter(windowMs = GROUP_WINDOW_MS) {
  const path = join(tempDir(), "wal.log");
  const clock = new ManualClock();
  const syncs: number[] = [];
  const w = new WalWriter(
    path,
    openSync(path, "a"),
    "data",
    { sync: async () => void syncs.push(clock.now()) },
    { windowMs, clock },
  );
  return { w, clock, syncs };
}

describe("group commit window", () => {
  test("ticks faster than the window share syncs: at most one starts per window, and each flush is acknowledged within one window", async () => {
    const { w, clock, syncs } = countingWriter();
    const tick = 0.5; // ms between flushes, four to a window
    const acked: number[] = [];
    const flushedAt: number[] = [];
    for (let i = 0; i < 100; i++) {
      w.push(encodeRecord(ev(i)));
      flushedAt.push(clock.now());
      void w.flush().then(() => (acked[i] = clock.now()));
      await clock.advance(tick);
    }
    await clock.advance(GROUP_WINDOW_MS);
    // 50 ms of ticks: one sync per 2 ms window at most (plus the first, which starts at once).
    expect(syncs.length).toBeLessThanOrEqual(Math.ceil((100 * tick) / GROUP_WINDOW_MS) + 1);
    expect(syncs.length).toBeGreaterThanOrEqual(Math.floor((100 * tick) / GROUP_WINDOW_MS));
    for (let k = 1; k < syncs.length; k++) expect(syncs[k]! - syncs[k - 1]!).toBeGreaterThanOrEqual(GROUP_WINDOW_MS);
    for (let i = 0; i < 100; i++) {
      expect(acked[i]).toBeDefined();
      expect(acked[i]! - flushedAt[i]!).toBeLessThanOrEqual(GROUP_WINDOW_MS);
    }
    expect(w.stats.syncs).toBe(syncs.length);
    await w.close();
  });

  test("ticks a window or more apart are synced at once, one sync each, with no wait", async () => {
    const { w, clock, syncs } = countingWriter();
    for (let i = 0; i < 20; i++) {
      w.push(encodeRecord(ev(i)));
      let done = false;
      void w.flush().then(() => (done = true));
      await settle(); // no clock movement: the sync must not wait for a timer
      expect(done).toBe(true);
      await clock.advance(3); // a one-lane decode step of the large-vocabulary fixture
    }
    expect(syncs.length).toBe(20);
    await w.close();
  });

  test("window 0 syncs as soon as no sync is in flight", async () => {
    const { w, clock, syncs } = countingWriter(0);
    for (let i = 0; i < 10; i++) {
      w.push(encodeRecord(ev(i)));
      await w.flush();
      await clock.advance(0.1);
    }
    expect(syncs.length).toBe(10);
    await w.close();
  });

  test("a flush is acknowledged only after a sync that began after its records were written has returned", async () => {
    const path = join(tempDir(), "wal.log");
    const clock = new ManualClock();
    let written = 0;
    let synced = 0;
    const pending: (() => void)[] = [];
    const w = new WalWriter(
      path,
      openSync(path, "a"),
      "data",
      {
        write(fd, data) {
          writeSync(fd, data);
          written += data.length;
        },
        // Held until the test lets it return; what it covers is what was written when it began.
        sync: () => {
          const covers = written;
          return new Promise<void>((resolve) =>
            pending.push(() => {
              synced = covers;
              resolve();
            }),
          );
        },
      },
      { clock },
    );
    let pushed = 0;
    const violations: string[] = [];
    let acks = 0;
    for (let i = 0; i < 60; i++) {
      const line = encodeRecord(ev(i));
      w.push(line);
      pushed += Buffer.byteLength(line);
      const needs = pushed;
      void w.flush().then(() => {
        acks++;
        if (synced < needs) violations.push(`flush ${i} acknowledged with ${synced} of its ${needs} bytes synced`);
      });
      // Syncs return in bursts, out of step with the flushes and the window.
      if (i % 7 === 3) for (const release of pending.splice(0)) release();
      await settle();
      await clock.advance(i % 3 === 0 ? 1.5 : 0.4);
    }
    while (acks < 60) {
      for (const release of pending.splice(0)) release();
      await clock.advance(GROUP_WINDOW_MS);
    }
    expect(violations).toEqual([]);
    expect(synced).toBe(readFileSync(path).length);
    await w.close();
  });
});

describe("delivery waits for the sync of its records, through the worker client", () => {
  let model: string;
  let prompt: number[];
  beforeAll(async () => {
    model = await fixturePath("tiny-random");
    const vocab = LlamaModel.load(model, { vocabOnly: true });
    prompt = vocab.tokenize("hello there", { addSpecial: true, parseSpecial: false });
    vocab.free();
  });
  const workers: WorkerClient[] = [];
  afterAll(async () => {
    for (const w of workers) await w.close();
  });

  test("every token a reader sees is in the log's synced bytes when it is delivered", async () => {
    const dir = tempDir();
    let synced = 0; // bytes of wal.log covered by a sync that has returned
    const store = await SessionStore.open(dir, {
      fileOps: {
        // Returns on a later macrotask, so deliveries have every chance to run ahead of it.
        sync: () => {
          const covers = Bun.file(join(dir, "wal.log")).size;
          return new Promise<void>((resolve) =>
            setImmediate(() => {
              synced = covers;
              resolve();
            }),
          );
        },
      },
    });
    const vocab = LlamaModel.load(model, { vocabOnly: true });
    const journal = new SessionJournal(store, "m", vocab);
    const worker = await WorkerClient.start({ model, maxBatch: 2, maxContext: 512, threads: 1, journal });
    workers.push(worker);
    /** Tokens the synced part of the log holds, over every session. */
    const syncedTokens = () => {
      const text = readFileSync(join(dir, "wal.log")).subarray(0, synced).toString("utf8");
      let n = 0;
      for (const line of text.split("\n")) {
        if (!line) continue;
        const e = JSON.parse(line.slice(9)) as SessionEvent;
        if ("Generated" in e.body) n += e.body.Generated.span.length;
      }
      return n;
    };
    const problems: string[] = [];
    let delivered = 0;
    await Promise.all(
      [0, 1].map(async (k) => {
        const g = worker.generate({ prompt: [...prompt, k + 5], sampling: GREEDY, maxTokens: 24, ignoreEos: true });
        for await (const e of g) {
          if (e.type !== "tokens") continue;
          delivered += e.tokens.length;
          const onDisk = syncedTokens();
          if (onDisk < delivered) problems.push(`${delivered} tokens delivered, ${onDisk} synced`);
        }
      }),
    );
    expect(delivered).toBe(48);
    expect(problems).toEqual([]);
    vocab.free();
    await worker.close();
    await store.close();
  });
});
