// The scheduling policy on its own: class names and aliases, the class FIFOs
// with aging and head-of-class requeue, lane caps, and the prefill budget.
import { describe, expect, test } from "bun:test";
import { ClassQueues, PrefillBudget } from "../../../src/engine/scheduler.ts";
import { parseClassLanes, parseQos } from "../../../src/http/qos.ts";

describe("QoS classes", () => {
  test("names, aliases and numbers", () => {
    expect(["interactive", "interactive-chat", "0", " Interactive "].map(parseQos)).toEqual([0, 0, 0, 0]);
    expect(["completion", "inline-completion", "1"].map(parseQos)).toEqual([1, 1, 1]);
    expect(["agent", "foreground", "foreground-agent", "2"].map(parseQos)).toEqual([2, 2, 2, 2]);
    expect(["background", "background-agent", "3"].map(parseQos)).toEqual([3, 3, 3]);
    expect(["", "urgent", "4", "-1"].map(parseQos)).toEqual([undefined, undefined, undefined, undefined]);
  });

  test("--class-lanes", () => {
    expect(parseClassLanes("background=2,agent=6", 8)).toEqual({ background: 2, agent: 6 });
    expect(parseClassLanes("background-agent=1", 8)).toEqual({ background: 1 });
    expect(() => parseClassLanes("background=9", 8)).toThrow("between 1 and --max-batch (8)");
    expect(() => parseClassLanes("background=0", 8)).toThrow("between 1 and --max-batch");
    expect(() => parseClassLanes("urgent=1", 8)).toThrow("class=N");
    expect(() => parseClassLanes("background", 8)).toThrow("class=N");
  });
});

describe("class queues", () => {
  test("best class first, FIFO within a class, preempted work at the head of its class", () => {
    const q = new ClassQueues<string>(0);
    q.push("agent-1", 2, 0);
    q.push("bg-1", 3, 0);
    q.push("inter-1", 0, 0);
    q.push("agent-2", 2, 0);
    q.pushFront("agent-paused", 2, 5);
    expect(q.ordered(5).map((e) => e.item)).toEqual(["inter-1", "agent-paused", "agent-1", "agent-2", "bg-1"]);
    expect(q.depths()).toEqual([1, 0, 3, 1]);
    q.remove("agent-1");
    expect(q.size).toBe(4);
  });

  test("a job moves up one class for each starvation period it waits", () => {
    const q = new ClassQueues<string>(8);
    q.push("bg", 3, 0);
    q.push("agent", 2, 5);
    expect(q.ordered(5).map((e) => e.item)).toEqual(["agent", "bg"]);
    // At tick 8 the background job has waited one period: it competes as an agent, and has waited longer.
    expect(q.ordered(8)).toMatchObject([
      { item: "bg", effective: 2 },
      { item: "agent", effective: 2 },
    ]);
    // At tick 16 the background job has waited two periods: it competes as completion (1).
    const at16 = q.ordered(16);
    expect(at16.map((e) => e.item)).toEqual(["bg", "agent"]);
    expect(at16[0]).toMatchObject({ qos: 3, effective: 1 });
    // Both fully aged: equal competing class, so the one waiting longer goes first.
    expect(q.ordered(100)).toMatchObject([
      { item: "bg", effective: 0 },
      { item: "agent", effective: 0 },
    ]);
    // A new interactive job ties with them and queues behind both.
    q.push("inter", 0, 100);
    expect(q.ordered(100).map((e) => e.item)).toEqual(["bg", "agent", "inter"]);
  });
});

describe("prefill budget", () => {
  test("a fixed budget until the cost is known, then capped to ~0.5 s of work while a newcomer could start", () => {
    const b = new PrefillBudget({ budget: 4096, targetFreeMs: 50, targetBusyMs: 250 });
    expect(b.next(true)).toBe(4096);
    b.observe(1000, 0, 2000); // 2 ms per token: 0.5 s is 250 tokens, so 128-token steps
    expect(b.next(true)).toBe(128);
    expect(b.next(false)).toBe(3584); // 8 s of work: 4000 tokens, in whole 512 chunks
    const fast = new PrefillBudget({ budget: 4096, targetFreeMs: 50, targetBusyMs: 250 });
    fast.observe(1000, 0, 100); // 0.1 ms per token: 5000 in 0.5 s
    expect(fast.next(true)).toBe(4096);
  });

  test("decode-heavy ticks do not teach the prefill cost", () => {
    const b = new PrefillBudget({ budget: 1024, targetFreeMs: 50, targetBusyMs: 250 });
    b.observe(20, 8, 50);
    b.observe(40, 30, 500);
    expect(b.msPerToken).toBeUndefined();
  });

  test("adaptive: sized so a prefill tick lands near the tick target, within 256-4096", () => {
    const b = new PrefillBudget({ budget: 0, targetFreeMs: 50, targetBusyMs: 250 });
    expect(b.next(true)).toBe(512);
    b.observe(1000, 0, 100); // 0.1 ms per token
    expect(b.next(true)).toBe(500);
    expect(b.next(false)).toBe(2500);
    b.observe(1000, 0, 100_000); // very slow now
    expect(b.next(true)).toBe(256);
  });
});
