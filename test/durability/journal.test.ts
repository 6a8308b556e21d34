// Durability of every generation (docs/design.md#durable-sessions): nothing reaches a reader
// before the session log holds it, and what the log holds is exactly what the
// engine produced: the prompt span, every generated token, and how it ended.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { GREEDY } from "../../src/engine/sampling.ts";
import { JournalError, WorkerClient } from "../../src/daemon/worker-client.ts";
import type { GenerateRequest } from "../../src/engine/jobs.ts";
import type { GenerationJournal } from "../../src/session-log/journal.ts";
import { LlamaModel } from "../../src/engine/model.ts";
import type { FinishReason } from "../../src/engine/engine.ts";
import { FINISH, type SessionEvent } from "../../src/session-log/events.ts";
import { post, useServer, user } from "../http/support.ts";
import { fixturePath } from "../support/models.ts";

/** A journal whose flushes complete only when the test says so. */
class GatedJournal implements GenerationJournal {
  readonly recorded: string[] = [];
  private gates: (() => void)[] = [];
  begin(id: string) {
    this.recorded.push(`begin ${id}`);
  }
  tokens(id: string, tokens: number[]) {
    this.recorded.push(`tokens ${id} ${tokens.length}`);
  }
  end(id: string, reason: FinishReason | "crashed", _job: GenerateRequest) {
    this.recorded.push(`end ${id} ${reason}`);
  }
  flush(): Promise<void> {
    return new Promise((resolve) => this.gates.push(resolve));
  }
  get pending(): number {
    return this.gates.length;
  }
  release(): void {
    const gates = this.gates;
    this.gates = [];
    gates.forEach((g) => g());
  }
}

/** A worker on the tiny model recording through `journal`, for one describe block, and a short chat prompt. */
function useWorker(journal: GenerationJournal): { worker: WorkerClient; prompt: number[] } {
  const handle = {} as { worker: WorkerClient; prompt: number[] };
  beforeAll(async () => {
    const path = await fixturePath("tiny-random");
    const vocab = LlamaModel.load(path, { vocabOnly: true });
    handle.prompt = vocab.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", {
      addSpecial: true,
      parseSpecial: true,
    });
    vocab.free();
    handle.worker = await WorkerClient.start({ model: path, maxBatch: 2, maxContext: 1024, threads: 1, journal });
  });
  afterAll(() => handle.worker.close());
  return handle;
}

describe("delivery waits for the log", () => {
  const journal = new GatedJournal();
  const w = useWorker(journal);

  test("a generation's tokens and its end reach the reader only after the journal's flush resolves", async () => {
    const g = w.worker.generate({ prompt: w.prompt, sampling: GREEDY, maxTokens: 6, ignoreEos: true });
    const seen: string[] = [];
    const reading = (async () => {
      for await (const e of g) seen.push(e.type);
    })();
    // The worker finishes within a few ticks; every event waits on a flush.
    const started = performance.now();
    while (!journal.recorded.some((r) => r.startsWith(`end ${g.id}`)) && performance.now() - started < 10_000)
      await Bun.sleep(5);
    expect(journal.recorded.filter((r) => r.startsWith(`tokens ${g.id}`)).length).toBeGreaterThan(0);
    expect(journal.recorded).toContain(`end ${g.id} length`);
    await Bun.sleep(50);
    expect(seen).toEqual([]);
    expect(journal.pending).toBeGreaterThan(0);
    journal.release();
    await reading;
    expect(seen[0]).toBe("admitted");
    expect(seen.at(-1)).toBe("finished");
    expect(seen.filter((t) => t === "tokens").length).toBeGreaterThan(0);
  });
});

/** A journal whose writes fail from some point on, as a full or broken disk does. */
class FailingJournal implements GenerationJournal {
  broken = false;
  begin() {
    if (this.broken) throw new Error("EIO (simulated)");
  }
  tokens() {}
  end() {}
  flush(): Promise<void> {
    return this.broken ? Promise.reject(new Error("EIO (simulated)")) : Promise.resolve();
  }
}

describe("a journal that fails", () => {
  const journal = new FailingJournal();
  const w = useWorker(journal);

  test("a generation whose events cannot be made durable ends with the log's error, never hangs, even when it finished in that tick", async () => {
    journal.broken = false;
    const g = w.worker.generate({ prompt: w.prompt, sampling: GREEDY, maxTokens: 1, ignoreEos: true });
    journal.broken = true; // its admission, token and finish all arrive in one tick, then the flush fails
    const outcome = await Promise.race([
      g.result().then(
        () => "finished",
        (e: Error) => e,
      ),
      Bun.sleep(5000).then(() => "hung"),
    ]);
    expect(outcome).toBeInstanceOf(JournalError);
    expect(w.worker.inflightCount).toBe(0);
  });

  test("a generation the log cannot even begin is refused at once and leaves nothing in flight", () => {
    journal.broken = true;
    expect(() => w.worker.generate({ prompt: w.prompt, sampling: GREEDY, maxTokens: 4, ignoreEos: true })).toThrow(
      JournalError,
    );
    expect(w.worker.inflightCount).toBe(0);
    journal.broken = false;
  });
});

describe("what the log holds", () => {
  const s = useServer({ maxBatch: 2, maxContext: 1024 });

  const eventsOfLast = (): SessionEvent[] => s.server.sessions.read(s.server.sessions.lastSession);

  const generated = (events: SessionEvent[]) =>
    events.flatMap((e) => ("Generated" in e.body ? [e.body.Generated] : []));

  test("a completion: the prompt span, every token in order, and the finish code", async () => {
    const res = await post(s, "/v1/completions", {
      model: s.model,
      prompt: "Once upon a time",
      max_tokens: 24,
      temperature: 0,
      ignore_eos: true,
    });
    const body = (await res.json()) as {
      choices: { text: string }[];
      usage: { prompt_tokens: number; completion_tokens: number };
    };
    const events = eventsOfLast();
    expect("Created" in events[0]!.body).toBe(true);
    const prompt = (await (
      await post(s, "/v1/tokenize", { content: "Once upon a time", add_special: true })
    ).json()) as { tokens: number[] };
    const appended = events[1]!.body as { Appended: { span: number[]; text: string } };
    expect(appended.Appended.span).toEqual(prompt.tokens);
    const gen = generated(events);
    expect(gen.flatMap((g) => g.span).length).toBe(body.usage.completion_tokens);
    expect(gen.map((g) => g.text).join("")).toBe(body.choices[0]!.text);
    expect(gen.slice(0, -1).every((g) => g.finish === FINISH.open)).toBe(true);
    expect(gen.at(-1)!.finish).toBe(FINISH.maxTokens);
    expect(events.map((e) => e.event_id)).toEqual(events.map((_, i) => i));
  });

  test("a reply held to a grammar ends with the grammar code; a cancelled one with the cancel code", async () => {
    const res = await post(s, "/v1/chat/completions", {
      model: s.model,
      messages: user("give me json"),
      temperature: 0,
      max_tokens: 200,
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "t",
          schema: {
            type: "object",
            properties: { a: { type: "boolean" } },
            required: ["a"],
            additionalProperties: false,
          },
        },
      },
    });
    const body = (await res.json()) as { choices: { finish_reason: string }[] };
    expect(body.choices[0]!.finish_reason).toBe("stop");
    expect(generated(eventsOfLast()).at(-1)!.finish).toBe(FINISH.grammar);

    const controller = new AbortController();
    const stream = await post(
      s,
      "/v1/chat/completions",
      { model: s.model, messages: user("go on"), temperature: 0, ignore_eos: true, max_tokens: 900, stream: true },
      { signal: controller.signal },
    );
    const reader = stream.body!.getReader();
    await reader.read();
    await reader.read();
    controller.abort();
    await reader.cancel().catch(() => {});
    const started = performance.now();
    let last = generated(eventsOfLast()).at(-1);
    while (last?.finish !== FINISH.cancelled && performance.now() - started < 5000) {
      await Bun.sleep(20);
      last = generated(eventsOfLast()).at(-1);
    }
    expect(last!.finish).toBe(FINISH.cancelled);
  });

  test("a worker killed mid-generation leaves the session ended with the error code", async () => {
    const stream = await post(s, "/v1/chat/completions", {
      model: s.model,
      messages: user("a long one"),
      temperature: 0,
      ignore_eos: true,
      max_tokens: 900,
      stream: true,
    });
    const reader = stream.body!.getReader();
    await reader.read();
    await reader.read();
    process.kill(s.server.registry.default!.worker.pid!, "SIGKILL");
    while (!(await reader.read()).done);
    const gen = generated(eventsOfLast());
    expect(gen.length).toBeGreaterThan(1);
    expect(gen.at(-1)!.finish).toBe(FINISH.error);
  });
});
