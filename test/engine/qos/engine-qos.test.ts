// QoS in the engine: class order, lane caps, aging, preemption (a paused lane
// resumes and its reply equals the same request run alone), the rule that an
// urgent prompt finishing its prefill has no lower-class prefill beside it,
// and start deadlines.
import { describe, expect, test } from "bun:test";
import type { Engine, EngineOptions, GenerateJob, TickEvents } from "../../../src/engine/engine.ts";
import { GREEDY } from "../../../src/engine/sampling.ts";
import type { QosClass } from "../../../src/engine/scheduler.ts";
import { useTinyEngines } from "../../support/engines.ts";

const tiny = useTinyEngines({
  lanes: 1,
  cellsPerSequence: 1024,
  threads: 1,
  prefillBudget: 64,
  hostCacheBytes: 64 * 2 ** 20,
});
const engine = (opts: Partial<EngineOptions> = {}): Engine => tiny.engine(opts);

let nextId = 0;
const words = (seed: string, n: number) => Array.from({ length: n }, (_, i) => `${seed}${(i * 7919) % 97}`).join(" ");
const prompt = (seed: string, n = 20) => tiny.model.tokenize(words(seed, n), { addSpecial: true, parseSpecial: true });
const job = (p: number[], qos: QosClass, maxTokens = 12, extra: Partial<GenerateJob> = {}): GenerateJob => ({
  id: `${["i", "c", "a", "b"][qos]}${nextId++}`,
  prompt: p,
  sampling: GREEDY,
  maxTokens,
  ignoreEos: true,
  qos,
  ...extra,
});

interface Trace {
  out: Map<string, number[]>;
  finished: Map<string, TickEvents["finished"][number]>;
  admittedOrder: string[];
  ticks: TickEvents[];
}

function drain(
  e: Engine,
  trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] },
  maxTicks = 10_000,
): Trace {
  for (let t = 0; t < maxTicks && e.hasWork(); t++) step(e, trace);
  return trace;
}

function step(e: Engine, trace: Trace): TickEvents {
  const ev = e.tick();
  trace.ticks.push(ev);
  for (const a of ev.admitted) trace.admittedOrder.push(a.id);
  for (const [id, t] of ev.tokens) {
    if (!trace.out.has(id)) trace.out.set(id, []);
    trace.out.get(id)!.push(t);
  }
  for (const f of ev.finished) trace.finished.set(f.id, f);
  return ev;
}

function alone(p: number[], maxTokens: number): number[] {
  const e = engine({ hostCacheBytes: 0 });
  const j = job(p, 2, maxTokens);
  e.submit(j);
  return drain(e).out.get(j.id)!;
}

describe("admission by class", () => {
  test("queued work starts in class order, FIFO within a class", () => {
    const e = engine({ lanes: 1 });
    const blocker = job(prompt("blocker"), 0, 4);
    e.submit(blocker);
    step(e, { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] });
    const jobs = [job(prompt("b1"), 3, 2), job(prompt("a1"), 2, 2), job(prompt("c1"), 1, 2), job(prompt("a2"), 2, 2)];
    jobs.forEach((j) => e.submit(j));
    const t = drain(e);
    // The completion job arrived while an interactive lane ran: no preemption (not below it).
    expect(t.admittedOrder).toEqual([jobs[2]!.id, jobs[1]!.id, jobs[3]!.id, jobs[0]!.id]);
  });

  test("a class at its lane cap waits while other classes run", () => {
    const e = engine({ lanes: 3, classLanes: { background: 1 } });
    const bgs = [0, 1, 2].map((i) => job(prompt(`bg${i}`), 3, 6));
    bgs.forEach((j) => e.submit(j));
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    let most = 0;
    while (e.hasWork()) {
      step(e, trace);
      most = Math.max(most, e.snapshot().classLanes[3]);
      expect(e.snapshot().activeLanes).toBeLessThanOrEqual(1);
    }
    expect(most).toBe(1);
    expect(trace.finished.size).toBe(3);
  });

  test("a job waiting long enough moves up a class and is granted before newer better-class work", () => {
    const e = engine({ lanes: 1, starvationTicks: 4 });
    const first = job(prompt("first"), 2, 3);
    e.submit(first);
    const bg = job(prompt("starved"), 3, 2);
    e.submit(bg);
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    // Keep agent work arriving; without aging the background job would never start.
    for (let i = 0; i < 40 && !trace.admittedOrder.includes(bg.id); i++) {
      if (e.queued < 2) e.submit(job(prompt(`agent${i}`), 2, 3));
      step(e, trace);
    }
    expect(trace.admittedOrder).toContain(bg.id);
    expect(e.stats.starvationGrants).toBeGreaterThan(0);
    drain(e, trace);
  });
});

describe("preemption", () => {
  test("an interactive request takes a busy agent lane; the agent resumes and its reply equals its reply alone", () => {
    const agentPrompt = prompt("the agent's long task", 40);
    const reference = alone(agentPrompt, 40);
    const e = engine({ lanes: 1 });
    const agent = job(agentPrompt, 2, 40);
    e.submit(agent);
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    while ((trace.out.get(agent.id)?.length ?? 0) < 10) step(e, trace);
    const chat = job(prompt("quick question"), 0, 5);
    e.submit(chat);
    const ev = step(e, trace);
    expect(ev.admitted.map((a) => a.id)).toEqual([chat.id]);
    expect(e.snapshot()).toMatchObject({ paused: 1, preemptions: 1 });
    drain(e, trace);
    expect(trace.finished.get(chat.id)!.reason).toBe("length");
    expect(trace.finished.get(agent.id)).toMatchObject({ reason: "length", completionTokens: 40 });
    // Nothing repeated or lost: the agent's tokens, across the pause, are its reply alone.
    expect(trace.out.get(agent.id)).toEqual(reference);
    // The agent was admitted once; its resume is not a second admission.
    expect(trace.admittedOrder.filter((id) => id === agent.id).length).toBe(1);
    expect(e.stats.resumes).toBe(1);
    // The interactive reply finished before the agent produced anything more.
    const chatDone = trace.ticks.findIndex((t) => t.finished.some((f) => f.id === chat.id));
    const agentAfter = trace.ticks.findIndex(
      (t, i) => i > trace.ticks.indexOf(ev) && t.tokens.some(([id]) => id === agent.id),
    );
    expect(agentAfter).toBeGreaterThanOrEqual(chatDone);
  });

  test("the victim is the lowest class below the newcomer, decoding before prefilling", () => {
    const e = engine({ lanes: 3, prefillBudget: 64 });
    const agentDecoding = job(prompt("agent decoding", 10), 2, 200);
    const bgDecoding = job(prompt("bg decoding", 10), 3, 200);
    e.submit(agentDecoding);
    e.submit(bgDecoding);
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    while ((trace.out.get(bgDecoding.id)?.length ?? 0) < 2) step(e, trace);
    const bgPrefilling = job(prompt("bgpre", 60), 3, 10);
    e.submit(bgPrefilling);
    step(e, trace);
    expect(e.snapshot().activeLanes).toBe(3);
    const urgent = job(prompt("urgent"), 1, 3);
    e.submit(urgent);
    step(e, trace);
    // Both background lanes are below the agent; of those, the decoding one goes.
    const queued = e.snapshot();
    expect(queued.paused).toBe(1);
    expect(trace.out.get(bgDecoding.id)!.length).toBeGreaterThan(0);
    const before = trace.out.get(bgDecoding.id)!.length;
    step(e, trace);
    expect(trace.out.get(bgDecoding.id)!.length).toBe(before); // paused: no new tokens
    e.cancel(agentDecoding.id);
    e.cancel(bgDecoding.id);
    e.cancel(bgPrefilling.id);
    drain(e, trace);
    // The paused lane, cancelled while queued, ends with what it had generated.
    expect(trace.finished.get(bgDecoding.id)).toMatchObject({ reason: "cancelled", completionTokens: before });
  });

  test("nothing is preempted for a request of the same or a lower class", () => {
    const e = engine({ lanes: 1 });
    const running = job(prompt("running"), 0, 6);
    e.submit(running);
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    step(e, trace);
    e.submit(job(prompt("another interactive"), 0, 2));
    e.submit(job(prompt("an agent"), 2, 2));
    drain(e, trace);
    expect(e.stats.preemptions).toBe(0);
  });
});

describe("no starvation", () => {
  test("a background job gets in although interactive work never stops queueing", () => {
    const e = engine({ lanes: 1, starvationTicks: 4 });
    const bg = job(prompt("starved"), 3, 2);
    e.submit(job(prompt("first"), 0, 3));
    e.submit(bg);
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    for (let i = 0; i < 400 && !trace.finished.has(bg.id); i++) {
      if (e.queued < 3) e.submit(job(prompt(`chat${i}`), 0, 3));
      step(e, trace);
    }
    expect(trace.finished.get(bg.id)?.reason).toBe("length");
    drain(e, trace);
  });

  test("a job granted a lane by aging keeps it long enough to finish, not paused again at once", () => {
    const e = engine({ lanes: 1, starvationTicks: 4 });
    e.submit(job(prompt("c-first"), 1, 6));
    const agent = job(prompt("agent"), 2, 4);
    e.submit(agent);
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    for (let i = 0; i < 300 && !trace.finished.has(agent.id); i++) {
      if (e.snapshot().queueDepths[1] < 1) e.submit(job(prompt(`c${i}`), 1, 1));
      step(e, trace);
    }
    expect(trace.finished.get(agent.id)).toMatchObject({ reason: "length", completionTokens: 4 });
    drain(e, trace);
  });

  test("a starving prefill keeps its chunk beside interactive prompts finishing every tick", () => {
    const e = engine({ lanes: 2, prefillBudget: 64, starvationTicks: 4 });
    const agent = job(prompt("long agent", 60), 2, 2);
    e.submit(agent);
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    for (let t = 0; t < 400 && !trace.finished.has(agent.id); t++) {
      e.submit(job(prompt(`hi${t}`, 3), 0, 1));
      step(e, trace);
    }
    expect(trace.finished.get(agent.id)?.reason).toBe("length");
    drain(e, trace);
  });
});

describe("tick planning", () => {
  test("in the tick an interactive prompt finishes prefilling, no lower-class prompt is prefilled beside it", () => {
    const e = engine({ lanes: 2, prefillBudget: 64 });
    const agent = job(prompt("a long agent prompt", 200), 2, 2);
    e.submit(agent);
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    step(e, trace); // the agent starts prefilling
    const chat = job(prompt("hi", 3), 0, 2);
    e.submit(chat);
    const staged: number[][] = [];
    const stage = e.context.stage.bind(e.context);
    e.context.stage = (i, token, pos, seq, logits) => {
      if (i === 0) staged.push([]);
      staged.at(-1)!.push(seq);
      stage(i, token, pos, seq, logits);
    };
    step(e, trace);
    e.context.stage = stage;
    // That tick held the chat's whole prompt and nothing of the agent's.
    const chatSeqs = new Set(staged[0]);
    expect(chatSeqs.size).toBe(1);
    expect(staged[0]!.length).toBe(chat.prompt.length);
    drain(e, trace);
    expect(trace.finished.size).toBe(2);
  });

  test("a request still queued past its start deadline expires; one that started does not", () => {
    const e = engine({ lanes: 1 });
    const running = job(prompt("busy"), 2, 30);
    const late = job(prompt("late"), 2, 4, { startBy: Date.now() + 20 });
    const fine = job(prompt("fine"), 2, 4, { startBy: Date.now() + 60_000 });
    e.submit(running);
    e.submit(late);
    e.submit(fine);
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    step(e, trace);
    Bun.sleepSync(30);
    drain(e, trace);
    expect(trace.finished.get(late.id)).toMatchObject({ reason: "expired", completionTokens: 0 });
    expect(trace.finished.get(fine.id)!.reason).toBe("length");
    expect(e.stats.expired).toBe(1);
  });
});

// Issue #34 (5): one request's n choices held all 8 lanes for minutes while
// a 2-token chat waited 156.9 s. A request's choices now share the lanes of
// their class fairly with other requests: while another waits, one holds at
// most its share, and its other choices queue behind.
describe("fair share between requests of one class", () => {
  const groupJobs = (group: string, n: number, qos: QosClass, maxTokens: number) =>
    Array.from({ length: n }, (_, i) => job(prompt(`${group}${i}`), qos, maxTokens, { group }));

  test("a request holding every lane gives one up to another request of its class at once", () => {
    const e = engine({ lanes: 4 });
    const big = groupJobs("big", 4, 2, 200);
    big.forEach((j) => e.submit(j));
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    while (e.snapshot().activeLanes < 4 || e.snapshot().prefilling > 0) step(e, trace);
    const small = job(prompt("small"), 2, 2);
    e.submit(small);
    // The next tick pauses one of the big request's lanes and starts the small one.
    step(e, trace);
    expect(trace.admittedOrder.at(-1)).toBe(small.id);
    expect(e.snapshot().preemptions).toBe(1);
    // The small reply finishes while the big one is still running.
    while (!trace.finished.has(small.id)) step(e, trace);
    expect(big.filter((j) => trace.finished.has(j.id))).toEqual([]);
    drain(e, trace);
    // Every one of the big request's choices completes, its paused one too.
    for (const j of big) {
      expect(trace.finished.get(j.id)?.reason).toBe("length");
      expect(trace.out.get(j.id)).toHaveLength(200);
    }
  });

  test("two requests of n choices each hold half the lanes; no lane idles while work waits", () => {
    const e = engine({ lanes: 4 });
    const a = groupJobs("ga", 4, 2, 40);
    const b = groupJobs("gb", 4, 2, 40);
    [...a, ...b].forEach((j) => e.submit(j));
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    step(e, trace);
    const held = (g: GenerateJob[]) =>
      g.filter((j) => trace.admittedOrder.includes(j.id) && !trace.finished.has(j.id)).length;
    expect([held(a), held(b)]).toEqual([2, 2]);
    // While both have work queued, each tick runs on every lane, shared evenly
    // (a lane that finishes in a tick is refilled at the next one's start).
    while (e.snapshot().queued > 0) {
      const ev = step(e, trace);
      const ran = (g: GenerateJob[]) => held(g) + ev.finished.filter((f) => g.some((j) => j.id === f.id)).length;
      expect(ran(a) + ran(b)).toBe(4);
      expect(Math.abs(ran(a) - ran(b))).toBeLessThanOrEqual(1);
    }
    drain(e, trace);
    for (const j of [...a, ...b]) expect(trace.out.get(j.id)).toHaveLength(40);
  });

  test("one request alone may use every lane", () => {
    const e = engine({ lanes: 4 });
    groupJobs("solo", 6, 2, 8).forEach((j) => e.submit(j));
    step(e, { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] });
    expect(e.snapshot().activeLanes).toBe(4);
  });

  test("fair share never crosses classes: a lower class waits, a higher one preempts as before", () => {
    const e = engine({ lanes: 2 });
    const big = groupJobs("agent", 2, 2, 60);
    big.forEach((j) => e.submit(j));
    const trace: Trace = { out: new Map(), finished: new Map(), admittedOrder: [], ticks: [] };
    step(e, trace);
    const background = job(prompt("bg"), 3, 2);
    e.submit(background);
    for (let t = 0; t < 5; t++) step(e, trace);
    expect(trace.admittedOrder).not.toContain(background.id);
    expect(e.snapshot().preemptions).toBe(0);
    drain(e, trace);
    expect(trace.finished.get(background.id)?.reason).toBe("length");
  });
});
