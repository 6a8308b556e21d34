// Every choice of one request: `n` for each of its prompts (a chat has one
// prompt; /v1/completions may send several), numbered as OpenAI numbers them
// (prompt index * n + j). Each prompt's first choice starts at once, so
// reading it sees its admission; its siblings start once it has prefilled
// (they copy its KV). A cancel also reaches siblings that start after it.
import { randomUUID } from "node:crypto";
import type { ServedModel } from "../daemon/served-model.ts";
import type { Generation } from "../daemon/worker-client.ts";
import type { GenerateRequest } from "../engine/jobs.ts";
import { startChoices } from "./engine-request.ts";

export class ChoiceSet {
  /** Each choice's generation, in reply order; a prompt's first resolves at once. */
  readonly generations: Promise<Generation>[] = [];
  private readonly live: Generation[] = [];
  private cancelled = false;

  /**
   * Starts every prompt's first choice before returning, or throws (a model
   * being unloaded refuses it) with nothing left running: every request is
   * built before any starts, and the ones started before a refusal stop.
   */
  constructor(
    private readonly model: ServedModel,
    requests: GenerateRequest[],
    private readonly n: number,
    private readonly opts: { durable: boolean },
  ) {
    // Every prompt's choices are one request's: they share its fair share of lanes (docs/design.md#fair-share).
    const group = requests.length * n > 1 ? randomUUID() : undefined;
    try {
      for (const request of requests) this.start(request, group);
    } catch (err) {
      this.cancel();
      throw err;
    }
  }

  private start(request: GenerateRequest, group: string | undefined): void {
    const mine: Generation[] = [];
    const started = startChoices(this.model, request, this.n, mine, {
      durable: this.opts.durable,
      ...(group ? { group } : {}),
    }).finally(() => {
      this.live.push(...mine.slice(1));
      if (this.cancelled) mine.forEach((g) => g.cancel());
    });
    started.catch(() => {}); // each choice awaits it; this keeps a failure from also counting as unhandled
    if (mine[0]) this.live.push(mine[0]);
    for (let j = 0; j < this.n; j++) {
      this.generations.push(j === 0 && mine[0] ? Promise.resolve(mine[0]) : started.then((gens) => gens[j]!));
    }
  }

  cancel(): void {
    this.cancelled = true;
    this.live.forEach((g) => g.cancel());
  }
}
