// IdleMemory: memory is released once, after work, when nothing has run for
// the idle period; never while work is in flight, never without work before.
// The period is shortened here and the test waits for the release itself.
import { expect, test } from "bun:test";
import { IdleMemory, releaseMemory } from "../../src/runtime/idle-memory.ts";

function counting(
  idleMs: number,
  minWork = 1,
): { memory: IdleMemory; releases: () => number; released: () => Promise<void> } {
  let n = 0;
  let waiters: (() => void)[] = [];
  const memory = new IdleMemory(
    idleMs,
    () => {
      n++;
      waiters.forEach((w) => w());
      waiters = [];
    },
    minWork,
  );
  return { memory, releases: () => n, released: () => new Promise<void>((resolve) => waiters.push(resolve)) };
}

test("released once after counted work ends, not while any is in flight", async () => {
  const { memory, releases, released } = counting(20);
  memory.busy();
  memory.busy();
  memory.done();
  // One still in flight: the next release can only follow the last done().
  const first = released();
  memory.done();
  await first;
  expect(releases()).toBe(1);
  // Idle with no new work: no second release.
  memory.idleNow();
  await Bun.sleep(60);
  expect(releases()).toBe(1);
});

test("a loop's turns: each turn cancels the pending release; idle again, it comes", async () => {
  const { memory, releases, released } = counting(20);
  memory.working();
  memory.idleNow();
  memory.working();
  expect(releases()).toBe(0);
  const next = released();
  memory.idleNow();
  await next;
  expect(releases()).toBe(1);
});

test("nothing is released by a process that never worked", async () => {
  const { memory, releases } = counting(5);
  memory.idleNow();
  memory.done();
  await Bun.sleep(40);
  expect(releases()).toBe(0);
});

test("releaseMemory runs here (a full collection and, on glibc, malloc_trim)", () => {
  expect(() => releaseMemory()).not.toThrow();
});

test("too little work since the last release buys none (a lone probe every few seconds)", async () => {
  const { memory, releases, released } = counting(5, 3);
  memory.busy();
  memory.done();
  memory.busy();
  memory.done();
  await Bun.sleep(40);
  expect(releases()).toBe(0);
  const next = released();
  memory.busy();
  memory.done();
  await next;
  expect(releases()).toBe(1);
});
