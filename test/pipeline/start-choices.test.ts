// startChoices starts the first choice before it returns, or throws at once:
// the chat, Messages and Responses routes read live[0] right after calling it
// without awaiting, so a refusal that surfaced only as a rejected promise
// left them iterating nothing (a 500 "undefined is not an object") when a
// model was being unloaded (a retired worker's generate throws a 503).
import { expect, test } from "bun:test";
import type { ServedModel } from "../../src/daemon/served-model.ts";
import { RequestError } from "../../src/daemon/request-error.ts";
import { startChoices } from "../../src/pipeline/engine-request.ts";

const unloading = () => new RequestError(503, "model 'm' is being unloaded", "model_unloading", "model");

function modelWhose(generate: () => unknown): ServedModel {
  return { worker: { generate } } as unknown as ServedModel;
}

test("a refused first choice throws synchronously, with its own error", () => {
  const model = modelWhose(() => {
    throw unloading();
  });
  const live: unknown[] = [];
  let thrown: unknown;
  try {
    void startChoices(model, { prompt: [1], sampling: { seed: 1 } } as never, 2, live as never);
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(RequestError);
  expect((thrown as RequestError).code).toBe("model_unloading");
  expect(live).toHaveLength(0);
});

test("a started first choice is in live before the call returns; one choice resolves at once", async () => {
  const generation = { prefilled: Promise.resolve() };
  const model = modelWhose(() => generation);
  const live: unknown[] = [];
  const started = startChoices(model, { prompt: [1], sampling: { seed: 1 } } as never, 1, live as never);
  expect(live).toEqual([generation]);
  expect(await started).toEqual([generation] as never);
});
