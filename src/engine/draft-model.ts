// Drafting with a small model of the same vocabulary (--speculate
// draft-model:<path>, docs/design.md#speculative-decoding): the draft model
// runs in the worker beside the target, in a context of its own whose
// sequences mirror the lanes' (same indices). Each tick, every drafting
// lane's draft sequence is first brought level with the lane's context (cut
// back to what they share, the rest decoded: a new request's whole prompt, a
// running one's last accepted tokens; at most one batch a tick, so a long new
// prompt is levelled over several ticks before its lane drafts), then the
// draft model decodes greedily `depth` tokens ahead, all lanes in one decode
// per step. The target verifies the drafts as it does prompt lookup's;
// whatever it rejected is cut off the draft sequence at the next tick's
// levelling, since only the shared prefix is kept. The draft's pool has no
// prefix sharing between its sequences (each holds its lane's whole context).
import type { KvTypes } from "../gguf/kv-type.ts";
import { LlamaContext } from "./context.ts";
import type { LlamaModel } from "./model.ts";
import { commonPrefix } from "./token-prefix.ts";

/**
 * One lane's drafting request: its sequence, the tokens its KV holds, the token it feeds next, and the draft length
 * wanted.
 */
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
  /** The KV cache's element types, the target's. */
  kvTypes?: KvTypes;
}

/** Calls to skip after the draft's context refused a decode. */
const REST_AFTER_FAILURE = 64;

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
  /** Cells of the draft's pool, shared by its sequences. */
  private readonly cells: number;
  /** Calls left to skip after a refused decode. */
  private resting = 0;

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
      ...(opts.kvTypes ? { kvTypes: opts.kvTypes } : {}),
    });
    this.held = Array.from({ length: opts.sequences }, () => []);
    this.cells = opts.cells;
  }

  /**
   * Greedy drafts for the requests, by sequence. Sequences no request names
   * are emptied first (their lanes finished, paused or stopped drafting). A
   * request the draft's pool has no room for gets no draft (the target
   * decodes plainly); one whose context is not level yet (a new request's
   * prompt) is levelled a micro-batch a tick and drafts once it is. A decode
   * the draft's context refuses empties it and pauses drafting for a while,
   * rather than levelling every lane again on the next tick.
   */
  propose(requests: readonly DraftRequest[]): Map<number, number[]> {
    const drafts = new Map<number, number[]>();
    if (this.resting > 0) {
      this.resting--;
      return drafts;
    }
    try {
      this.release(new Set(requests.map((r) => r.seq)));
      const live = this.level(requests);
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
      this.release(new Set());
      this.resting = REST_AFTER_FAILURE;
      return new Map();
    }
    return drafts;
  }

  /** Empties the sequences no request names (all of them for an empty set). */
  private release(requested: ReadonlySet<number>): void {
    this.held.forEach((held, seq) => {
      if (held.length === 0 || requested.has(seq)) return;
      this.context.truncate(seq, 0);
      this.held[seq] = [];
    });
  }

  /**
   * Brings each request's draft sequence toward its context (the held tokens,
   * then the next one): cut back to what both hold, then the rest decoded,
   * at most one batch in all. Returns the first draft token (the draft
   * model's pick after the whole context) of each request levelled in full.
   */
  private level(requests: readonly DraftRequest[]): Map<DraftRequest, number> {
    const firsts = new Map<DraftRequest, number>();
    let used = this.held.reduce((n, held) => n + held.length, 0);
    let staged = 0;
    const ending: [DraftRequest, number][] = []; // requests whose last context token is staged, with its row
    for (const r of requests) {
      const room = this.context.batchSize - staged;
      if (room <= 0) break;
      const held = this.held[r.seq]!;
      const at = (pos: number) => (pos < r.held.length ? r.held[pos]! : r.next);
      // What both hold, but the next token is always decoded again (its logits are the first pick).
      let keep = Math.min(commonPrefix(held, r.held), r.held.length);
      const missing = r.held.length + 1 - keep;
      // The pool must take the rest of the context and the draft steps beside every other sequence.
      if (used - held.length + keep + missing + r.depth > this.cells) continue;
      if (keep < held.length) {
        if (!this.context.truncate(r.seq, keep)) {
          this.context.truncate(r.seq, 0);
          keep = 0;
        }
        used -= held.length - keep;
        held.length = keep;
      }
      const take = Math.min(r.held.length + 1 - keep, room);
      for (let pos = keep; pos < keep + take; pos++) {
        const last = pos === r.held.length;
        this.context.stage(staged, at(pos), pos, r.seq, last);
        held.push(at(pos));
        if (last) ending.push([r, staged]);
        staged++;
      }
      used += take;
    }
    if (staged > 0) {
      this.context.decode(staged);
      for (const [r, row] of ending) firsts.set(r, this.argmax(row));
    }
    return firsts;
  }

  private argmax(row: number): number {
    const logits = this.context.logits(row);
    let best = 0;
    for (let t = 1; t < logits.length; t++) if (logits[t]! > logits[best]!) best = t;
    return best;
  }

  close(): void {
    this.context.free();
  }
}
