// The batch queue (src/batches/queue.ts): at most `running` batches at once,
// the rest first in first out, a full waiting line refused.
import { describe, expect, test } from "bun:test";
import { BatchQueue, DEFAULT_QUEUE_LIMITS } from "../../src/batches/queue.ts";

function queue(running: number, waiting: number) {
  const started: string[] = [];
  const q = new BatchQueue({ running, waiting }, (id) => started.push(id));
  return { q, started };
}

describe("batch queue", () => {
  test("the spec's limits: 4 running, 256 waiting", () => {
    expect(DEFAULT_QUEUE_LIMITS).toEqual({ running: 4, waiting: 256 });
  });

  test("starts up to `running` at once; the others start in arrival order as slots free", () => {
    const { q, started } = queue(2, 10);
    for (const id of ["a", "b", "c", "d"]) q.enqueue(id);
    expect(started).toEqual(["a", "b"]);
    expect(q.waiting).toBe(2);
    q.done("b");
    expect(started).toEqual(["a", "b", "c"]);
    q.done("a");
    q.done("c");
    expect(started).toEqual(["a", "b", "c", "d"]);
    expect(q.running).toBe(1);
    q.done("zzz"); // not running: nothing moves
    expect(q.running).toBe(1);
  });

  test("full once `waiting` batches wait behind full slots; a removed one frees its place", () => {
    const { q, started } = queue(1, 2);
    expect(q.full).toBe(false);
    q.enqueue("a");
    q.enqueue("b");
    expect(q.full).toBe(false);
    q.enqueue("c");
    expect(q.full).toBe(true);
    expect(q.remove("b")).toBe(true);
    expect(q.remove("a")).toBe(false); // running, not waiting
    expect(q.full).toBe(false);
    q.done("a");
    expect(started).toEqual(["a", "c"]);
  });

  test("with no waiting room, a batch is refused only while every slot is taken", () => {
    const { q } = queue(1, 0);
    expect(q.full).toBe(false);
    q.enqueue("a");
    expect(q.full).toBe(true);
  });
});
