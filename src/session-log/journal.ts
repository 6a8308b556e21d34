// Every generation as a durable session (docs/design.md#durable-sessions): its prompt span and
// every token the engine commits go into the session log, and the worker
// client delivers nothing to a reader before the log has it on disk. Spans are
// token ids, so a replay never re-renders; the text beside them is for people
// and tools reading the log. A failed write ends every open session (store.ts):
// the journal then forgets them, and records nothing more for them.
import { IncrementalDecoder } from "../codec/index.ts";
import type { Tokenizer } from "../codec/tokenizer.ts";
import type { FinishReason, GenerateRequest } from "../engine/jobs.ts";
import { FINISH, type FinishCode } from "./events.ts";
import type { SessionStore } from "./store.ts";

/**
 * What the worker client records every generation through (SessionJournal
 * below is the session log's). Calls are synchronous and buffered; the worker
 * client delivers nothing recorded to a reader before flush() has made it
 * durable.
 */
export interface GenerationJournal {
  begin(id: string, job: GenerateRequest): void;
  tokens(id: string, tokens: number[]): void;
  /** The generation ended; "crashed" when its worker died under it. */
  end(id: string, reason: FinishReason | "crashed", job: GenerateRequest): void;
  /** Rejects when the records could not be made durable; a later flush tries again. */
  flush(): Promise<void>;
  /** Why the journal cannot be written, while it cannot (null or absent when it can). */
  readonly failure?: Error | null;
}

interface OpenSession {
  session: number;
  decoder: IncrementalDecoder;
}

/** The finish code a generation's end is logged with. */
export function finishCode(reason: FinishReason | "crashed", constrained: boolean): FinishCode {
  switch (reason) {
    case "stop":
      return constrained ? FINISH.grammar : FINISH.endOfTurn;
    case "length":
      return FINISH.maxTokens;
    case "cancelled":
      return FINISH.cancelled;
    default:
      return FINISH.error;
  }
}

export class SessionJournal implements GenerationJournal {
  private readonly open = new Map<string, OpenSession>();

  constructor(
    private readonly store: SessionStore,
    private readonly model: string,
    private readonly tokenizer: Tokenizer,
  ) {}

  begin(id: string, job: GenerateRequest): void {
    const s = job.sampling;
    // Per-request extras (penalties, logit_bias, logprobs) are not recorded (docs/design.md#session-records).
    const session = this.store.create({
      model: this.model,
      max_tokens: job.maxTokens,
      ignore_eos: job.ignoreEos ?? false,
      sampling: { temperature: s.temperature, top_p: s.topP, top_k: s.topK, min_p: s.minP, seed: s.seed },
      ...(job.grammar === undefined ? {} : { grammar: job.grammar }),
    });
    const promptText = new IncrementalDecoder(this.tokenizer);
    this.store.append(session, {
      Appended: { text: promptText.push(job.prompt) + promptText.flush(), span: job.prompt },
    });
    this.open.set(id, { session, decoder: new IncrementalDecoder(this.tokenizer) });
  }

  /** The generation's session, while the store still takes its records. */
  private live(id: string): OpenSession | undefined {
    const open = this.open.get(id);
    if (open && !this.store.isLive(open.session)) this.open.delete(id);
    return this.open.get(id);
  }

  tokens(id: string, tokens: number[]): void {
    const open = this.live(id);
    if (!open) return;
    this.store.append(open.session, {
      Generated: { span: tokens, text: open.decoder.push(tokens), finish: FINISH.open },
    });
  }

  end(id: string, reason: FinishReason | "crashed", job: GenerateRequest): void {
    const open = this.live(id);
    if (!open) return;
    this.open.delete(id);
    const finish = finishCode(reason, job.grammar !== undefined && job.grammarTrigger === undefined);
    this.store.append(open.session, { Generated: { span: [], text: open.decoder.flush(), finish } });
    this.store.release(open.session);
  }

  flush(): Promise<void> {
    return this.store.flush().catch((err: unknown) => {
      // The failed write ended every open session; their generations are failed, never ended.
      for (const id of [...this.open.keys()]) this.live(id);
      throw err;
    });
  }

  get failure(): Error | null {
    return this.store.failure;
  }
}
