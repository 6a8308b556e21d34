// The models this daemon serves, by served id; the first is the default.
// Aliases (--alias NAME=ID, docs/cli.md#model-lookup-and-sampling-flags) let
// clients that send their own model names (a coding agent's `claude-...`)
// reach a served model: an exact name, or a pattern with `*` wildcards.
import type { ServedModel } from "./served-model.ts";

export interface ModelAlias {
  /** The name clients send; `*` matches any run of characters. */
  name: string;
  /** The served id it maps to. */
  target: string;
}

/** A `*` pattern as an anchored regular expression (every other character literal). */
function patternOf(name: string): RegExp {
  const literal = name.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${literal.join(".*")}$`, "s");
}

export class ModelRegistry {
  private readonly models = new Map<string, ServedModel>();
  private readonly aliasList: (ModelAlias & { pattern: RegExp })[] = [];

  add(model: ServedModel): void {
    this.models.set(model.id, model);
  }

  /** Maps `name` to the served id `target`. Exact names win over patterns; patterns are tried in the order added. */
  alias(name: string, target: string): void {
    this.aliasList.push({ name, target, pattern: patternOf(name) });
  }

  get aliases(): readonly ModelAlias[] {
    return this.aliasList.map(({ name, target }) => ({ name, target }));
  }

  /** The default model (the first added); undefined before any is loaded. */
  get default(): ServedModel | undefined {
    return this.models.values().next().value;
  }

  all(): ServedModel[] {
    return [...this.models.values()];
  }

  /** A served id, else an alias's target. */
  find(id: string): ServedModel | undefined {
    const served = this.models.get(id);
    if (served) return served;
    const exact = this.aliasList.find((a) => !a.name.includes("*") && a.name === id);
    const alias = exact ?? this.aliasList.find((a) => a.pattern.test(id));
    return alias && this.models.get(alias.target);
  }

  async close(): Promise<void> {
    await Promise.all(this.all().map((m) => m.close()));
  }
}
