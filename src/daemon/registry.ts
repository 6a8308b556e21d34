// The models this daemon serves, by served id; the first is the default.
import { ApiError } from "../http/errors.ts";
import type { ServedModel } from "./served-model.ts";

export class ModelRegistry {
  private readonly models = new Map<string, ServedModel>();

  add(model: ServedModel): void {
    this.models.set(model.id, model);
  }

  get default(): ServedModel {
    const first = this.models.values().next().value;
    if (!first) throw new ApiError(503, "no model is loaded");
    return first;
  }

  all(): ServedModel[] {
    return [...this.models.values()];
  }

  find(id: string): ServedModel | undefined {
    return this.models.get(id);
  }

  /** The model a request names; 404 in OpenAI's words when unknown. */
  get(id: string): ServedModel {
    const model = this.models.get(id);
    if (!model) throw new ApiError(404, `The model '${id}' does not exist`, null, "model");
    return model;
  }

  async close(): Promise<void> {
    await Promise.all(this.all().map((m) => m.close()));
  }
}
