// Drafting with a small model of the same vocabulary (--speculate
// draft-model:<path>, docs/design.md#speculative-decoding): the draft model
// runs in the worker beside the target, in a context of its own whose
// sequences mirror the lanes' (same indices). Each tick, every drafting
// lane's draft sequence is first brought level with the lane's context (cut
// back to what they share, the rest decoded: a new request's whole prompt, a
// running one's last accepted tokens), then the draft model decodes greedily
// `depth` tokens ahead, all lanes in one decode per step. The target verifies
// the drafts as it does prompt lookup's; whatever it rejected is cut off the
// draft sequence at the next tick's levelling, since only the shared prefix
// is kept.
import { LlamaContext } from "./context.ts";
import type { LlamaModel } from "./model.ts";
import { commonPrefix } from "./token-prefix.ts";

/** One lane's drafting request: its sequence, the tokens its KV holds, the token it feeds next, and the draft length wanted. */
export interface DraftRequest {
  seq: number;
  held: readonly number[];
  next: number;
  depth: number;
}

export interface ModelDrafterOptions {
  /** Sequences of the target's KV (lanes and the prefix cache's spares): the draft mirrors the indices. */
  sequences: number;
  /** Cells of the draft's own pool, shared by its sequences. */
  cells: number;
  threads: number;
}

/** The first token ids whose text is compared between the target's and the draft's vocabularies. */
const VOCAB_CHECK_TOKENS = 4096;

/** Why a draft model cannot draft for `target`, or undefined when it can. */
export function draftIncompatibility(target: LlamaModel, draft: LlamaModel): string | undefined {
  if (draft.vocabInfo.size !== target.vocabInfo.size) {
    return `its vocabulary has ${draft.vocabInfo.size} tokens, the model's ${target.vocabInfo.size}`;
  }
  const n = Math.min(VOCAB_CHECK_TOKENS, target.vocabInfo.size);
  for (let t = 0; t < n; t++) {
    if (!Buffer.from(target.tokenBytes(t, true)).equals(Buffer.from(draft.tokenBytes(t, true)))) {
      return `token ${t} is a different piece in its vocabulary`;
    }
  }
  return undefined;
}

export class ModelDrafter {
  private readonly context: LlamaContext;
  /** The tokens each draft sequence holds, by sequence index. */
  private readonly held: number[][];

  constructor(
    readonly model: LlamaModel,
    opts: ModelDrafterOptions,
  ) {
    this.context = new LlamaContext(model, {
      sequences: opts.sequences,
      cellsPerSequence: opts.cells,
      sharedCells: opts.cells,
      batchSize: 512,
      microBatchSize: 512,
      threads: opts.threads,
    });
    this.held = Array.from({ length: opts.sequences }, () => []);
  }

  /**
   * Greedy drafts for the requests, by sequence. A request whose context does
   * not fit the draft's pool, or a decode the draft's context refuses, gets
   * no draft (the target decodes plainly); the draft's sequences are emptied
   * after a refusal so the next tick starts level.
   */
  propose(requests: readonly DraftRequest[]): Map<number, number[]> {
    const drafts = new Map<number, number[]>();
    try {
      const live = this.level(requests.filter((r) => r.held.length + 1 + r.depth <= this.context.cellsPerSequence));
      for (const [r, first] of live) drafts.set(r.seq, [first]);
      // One decode per further step, every lane still drafting in it.
      for (let step = 1; ; step++) {
        const going = [...live.keys()].filter((r) => r.depth > step);
        if (going.length === 0) break;
        going.forEach((r, i) => {
          const held = this.held[r.seq]!;
          const token = drafts.get(r.seq)![step - 1]!;
          this.context.stage(i, token, held.length, r.seq, true);
          held.push(token);
        });
        this.context.decode(going.length);
        going.forEach((r, i) => drafts.get(r.seq)!.push(this.argmax(i)));
      }
    } catch {
      this.reset();
      return new Map();
    }
    return drafts;
  }

  /**
   * Brings each request's draft sequence level with its context (the held
   * tokens and the next one), decoding what it lacks, and returns each
   * request's first draft token (the draft model's pick after that context).
   */
  private level(requests: readonly DraftRequest[]): Map<DraftRequest, number> {
    const firsts = new Map<DraftRequest, number>();
    const batch = this.context.batchSize;
    let staged = 0;
    let ending: [DraftRequest, number][] = []; // requests whose last context token is staged, with its row
    const flush = () => {
      if (staged === 0) return;
      this.context.decode(staged);
      for (const [r, row] of ending) firsts.set(r, this.argmax(row));
      staged = 0;
      ending = [];
    };
    for (const r of requests) {
      const held = this.held[r.seq]!;
      const context = [...r.held, r.next];
      // Keep what both hold, but at least the last token is decoded again (its logits are the first pick).
      let keep = Math.min(commonPrefix(held, context), context.length - 1);
      if (keep < held.length && !this.context.truncate(r.seq, keep)) {
        this.context.truncate(r.seq, 0);
        keep = 0;
      }
      held.length = keep;
      for (let pos = keep; pos < context.length; pos++) {
        if (staged === batch) flush();
        const last = pos === context.length - 1;
        this.context.stage(staged, context[pos]!, pos, r.seq, last);
        held.push(context[pos]!);
        if (last) ending.push([r, staged]);
        staged++;
      }
    }
    flush();
    return firsts;
  }

  private argmax(row: number): number {
    const logits = this.context.logits(row);
    let best = 0;
    for (let t = 1; t < logits.length; t++) if (logits[t]! > logits[best]!) best = t;
    return best;
  }

  private reset(): void {
    for (let seq = 0; seq < this.held.length; seq++) {
      this.context.truncate(seq, 0);
      this.held[seq] = [];
    }
  }

  close(): void {
    this.context.free();
  }
}
