// The standby worker `serve` starts ahead (src/daemon/standby-worker.ts): the
// first WorkerClient takes it over and it serves like a worker of its own;
// one nobody claims exits when the daemon's channel closes.
import { afterEach, describe, expect, test } from "bun:test";
import type { WorkerToDaemon } from "../../src/engine/protocol.ts";
import { GREEDY } from "../../src/engine/sampling.ts";
import { selfCommand } from "../../src/daemon/self-command.ts";
import {
  claimStandbyWorker,
  devicesOfStandby,
  dropStandbyWorker,
  startStandbyWorker,
} from "../../src/daemon/standby-worker.ts";
import { WorkerClient } from "../../src/daemon/worker-client.ts";
import { fixturePath } from "../support/models.ts";

afterEach(() => dropStandbyWorker());

describe("standby worker", () => {
  test("the first WorkerClient takes it over and generates with it", async () => {
    startStandbyWorker();
    const path = await fixturePath("tiny-random");
    const worker = await WorkerClient.start({ model: path, maxBatch: 2, maxContext: 512, threads: 1 });
    try {
      // Taken: nothing is left to claim.
      expect(claimStandbyWorker(["--model", path], () => {})).toBeUndefined();
      expect(worker.info.lanes).toBe(2);
      let finished;
      for await (const e of worker.generate({ prompt: [1, 2, 3], sampling: GREEDY, maxTokens: 4, ignoreEos: true })) {
        if (e.type === "finished") finished = e;
      }
      expect(finished).toMatchObject({ reason: "length", completionTokens: 4 });
    } finally {
      await worker.close();
    }
  });

  test("a model that cannot load is reported after the claim, as from a worker of its own", async () => {
    startStandbyWorker();
    await expect(
      WorkerClient.start({ model: "/nonexistent/model.gguf", maxBatch: 1, maxContext: 512, threads: 1 }),
    ).rejects.toThrow(/failed|exited/);
  });

  test("unclaimed, it exits with status 0 once the daemon's channel closes", async () => {
    const messages: WorkerToDaemon[] = [];
    const proc = Bun.spawn(selfCommand("worker", "--standby"), {
      stdio: ["ignore", "inherit", "inherit"],
      serialization: "json",
      ipc: (message: WorkerToDaemon) => messages.push(message),
    });
    proc.disconnect();
    expect(await proc.exited).toBe(0);
    // At most its devices, if it had loaded its library before the channel closed.
    expect(messages.filter((m) => m.type !== "devices")).toEqual([]);
  });

  test("it reports the devices its backends registered; a claim ends the wait for them", async () => {
    startStandbyWorker();
    const devices = await devicesOfStandby();
    expect(devices?.some((d) => d.type === "cpu")).toBe(true);
    dropStandbyWorker();
    startStandbyWorker();
    const pending = devicesOfStandby();
    claimStandbyWorker(["--model", "/nonexistent/model.gguf"], () => {});
    // Claimed: a later load asks afresh, and whoever waited is answered.
    expect(devicesOfStandby()).toBeUndefined();
    expect(["undefined", "object"]).toContain(typeof (await pending));
  });

  test("a dropped standby is not claimed", () => {
    startStandbyWorker();
    dropStandbyWorker();
    expect(claimStandbyWorker(["--model", "x.gguf"], () => {})).toBeUndefined();
  });
});
