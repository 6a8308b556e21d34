// In-process engines on the tiny-random fixture for one test file: the model is
// loaded in beforeAll, and every engine made through the handle is closed in
// afterAll, then the model freed.
import { afterAll, beforeAll } from "bun:test";
import { Engine, type EngineOptions } from "../../src/engine/engine.ts";
import { LlamaModel } from "../../src/engine/model.ts";
import { fixturePath } from "./models.ts";

export interface TinyEngines {
  /** The loaded model (valid from beforeAll on). */
  readonly model: LlamaModel;
  /** A new engine with the file's defaults overridden by `opts`. */
  engine(opts?: Partial<EngineOptions>): Engine;
}

export function useTinyEngines(defaults: EngineOptions): TinyEngines {
  let model: LlamaModel | undefined;
  const engines: Engine[] = [];
  beforeAll(async () => {
    model = LlamaModel.load(await fixturePath("tiny-random"));
  });
  afterAll(() => {
    engines.forEach((e) => e.close());
    model?.free();
  });
  return {
    get model() {
      if (!model) throw new Error("the tiny model loads in beforeAll");
      return model;
    },
    engine(opts = {}) {
      const e = new Engine(this.model, { ...defaults, ...opts });
      engines.push(e);
      return e;
    },
  };
}
