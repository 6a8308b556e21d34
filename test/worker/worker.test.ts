// The daemon's link to a worker process: handshake, generation, cancel, and a
// worker killed mid-generation.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { LlamaModel } from "../../src/engine/model.ts";
import { GREEDY } from "../../src/engine/sampling.ts";
import { WorkerClient, WorkerCrashedError, WorkerStartError } from "../../src/daemon/worker-client.ts";
import { fixturePath } from "../support/models.ts";

let worker: WorkerClient;
let vocab: LlamaModel;
let prompt: number[];

beforeAll(async () => {
  const path = await fixturePath("tiny-random");
  vocab = LlamaModel.load(path, { vocabOnly: true });
  prompt = vocab.tokenize("<|im_start|>user\ntell me a story<|im_end|>\n<|im_start|>assistant\n", {
    addSpecial: true,
    parseSpecial: true,
  });
  worker = await WorkerClient.start({ model: path, maxBatch: 4, maxContext: 2048, threads: 2 });
});
afterAll(async () => {
  await worker.close();
  vocab.free();
});

describe("worker link", () => {
  test("the handshake reports the context, vocabulary and special tokens", () => {
    const info = worker.info;
    expect(info.lanes).toBe(4);
    expect(info.sequences).toBe(6);
    expect(info.contextPerSequence).toBe(2048);
    expect(info.vocab.size).toBe(vocab.vocabInfo.size);
    const imEnd = vocab.tokenize("<|im_end|>", { parseSpecial: true });
    expect(imEnd.length).toBe(1);
    expect(info.vocab.eog).toContain(imEnd[0]!);
    expect(info.capabilities.generate).toBe(true);
  });

  test("generates and reports usage", async () => {
    const g = worker.generate({ prompt, sampling: GREEDY, maxTokens: 12, ignoreEos: true });
    const events: string[] = [];
    let result;
    for await (const e of g) {
      events.push(e.type);
      if (e.type === "finished") result = e;
    }
    expect(events[0]).toBe("admitted");
    expect(events.at(-1)).toBe("finished");
    expect(result).toMatchObject({ reason: "length", promptTokens: prompt.length, completionTokens: 12 });
  });

  test("cancel ends the generation and frees the lane", async () => {
    const g = worker.generate({ prompt, sampling: GREEDY, maxTokens: 100000, ignoreEos: true });
    let seen = 0;
    let finish;
    for await (const e of g) {
      if (e.type === "tokens") {
        seen += e.tokens.length;
        if (seen >= 5) g.cancel();
      }
      if (e.type === "finished") finish = e;
    }
    expect(finish).toMatchObject({ reason: "cancelled" });
    expect(worker.inflightCount).toBe(0);
  });

  test("SIGKILL mid-generation gives a typed error; the worker comes back and the next request works", async () => {
    const reference = await worker.generate({ prompt, sampling: GREEDY, maxTokens: 16, ignoreEos: true }).result();
    const pid = worker.pid!;
    const g = worker.generate({ prompt, sampling: GREEDY, maxTokens: 100000, ignoreEos: true });
    let error: unknown;
    let seen = 0;
    try {
      for await (const e of g) {
        if (e.type === "tokens") {
          seen += e.tokens.length;
          if (seen >= 8) process.kill(pid, "SIGKILL");
        }
      }
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(WorkerCrashedError);
    expect((error as WorkerCrashedError).code).toBe("worker_crashed");
    expect((error as Error).message).toContain("SIGKILL");
    const after = await worker.generate({ prompt, sampling: GREEDY, maxTokens: 16, ignoreEos: true }).result();
    expect(worker.pid).not.toBe(pid);
    expect(worker.respawns).toBe(1);
    expect(after.tokens).toEqual(reference.tokens);
  });

  test("a request sent just as the worker dies is taken over by its replacement", async () => {
    const respawns = worker.respawns;
    process.kill(worker.pid!, "SIGKILL");
    const result = await worker.generate({ prompt, sampling: GREEDY, maxTokens: 4, ignoreEos: true }).result();
    expect(result).toMatchObject({ reason: "length", completionTokens: 4 });
    expect(worker.respawns).toBe(respawns + 1);
  });

  test("a queued request cancelled as the worker dies is not started again by its replacement", async () => {
    const busy = Array.from({ length: 4 }, () =>
      worker.generate({ prompt, sampling: GREEDY, maxTokens: 100000, ignoreEos: true }),
    );
    const settled = busy.map((g) => g.result().catch((err) => err));
    await Promise.all(busy.map((g) => g.prefilled));
    const queued = worker.generate({ prompt, sampling: GREEDY, maxTokens: 1500, ignoreEos: true });
    process.kill(worker.pid!, "SIGKILL");
    queued.cancel();
    const result = await queued.result();
    expect(result).toMatchObject({ reason: "cancelled", completionTokens: 0 });
    for (const r of await Promise.all(settled)) expect(r).toBeInstanceOf(WorkerCrashedError);
  });

  test("a model that cannot load is a start error, not a hang", async () => {
    const started = WorkerClient.start({ model: "/nonexistent/model.gguf", maxBatch: 1, maxContext: 512, threads: 1 });
    await expect(started).rejects.toBeInstanceOf(WorkerStartError);
  });
});
