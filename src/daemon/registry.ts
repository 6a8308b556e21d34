// The models this daemon serves, by served id; the first is the default.
import type { ServedModel } from "./served-model.ts";

export class ModelRegistry {
  private readonly models = new Map<string, ServedModel>();

  add(model: ServedModel): void {
    this.models.set(model.id, model);
  }

  /** The default model (the first added); undefined before any is loaded. */
  get default(): ServedModel | undefined {
    return this.models.values().next().value;
  }

  all(): ServedModel[] {
    return [...this.models.values()];
  }

  find(id: string): ServedModel | undefined {
    return this.models.get(id);
  }

  async close(): Promise<void> {
    await Promise.all(this.all().map((m) => m.close()));
  }
}
