// Checking a greedy reply without assuming batch invariance. llama.cpp does
// not promise that a sequence decodes to the same logits whatever shares its
// batch or wherever its cells sit in the pool (the kernels' reduction order
// changes with both; AVX-512 and AVX2 differ), so two correct engines may
// part at a near-tie and never meet again. What is guaranteed is that every
// token of a correct greedy reply is the argmax of its own history's logits
// up to rounding. So the reply is decoded again, teacher-forced, in one
// reference context, and each token's logit is compared with the best one
// at its position: a reply built on lost or wrong KV picks tokens far below
// on a share of its tokens that rounding never reaches.
import { expect } from "bun:test";
import { LlamaContext } from "../../src/engine/context.ts";
import type { LlamaModel } from "../../src/engine/model.ts";

/**
 * A token is off-greedy when its logit lies this far below its position's
 * best. Rounding alone, on the test fixtures: across 3,200 greedy tokens
 * decoded one at a time and checked against the teacher-forced batch, three
 * missed the reference argmax by more than 0.001 and one by 0.28 (zen4 and
 * haswell alike); a reply decoded on another history (50 prompt tokens lost)
 * misses by more than 0.05 on 19-27% of its tokens.
 */
export const OFF_GREEDY_GAP = 0.05;
/** The most off-greedy tokens a correct reply may hold, as a fraction of it: 10x what rounding gave. */
export const OFF_GREEDY_SHARE = 0.05;

/** How many of a reply's gaps (greedyGaps) exceed OFF_GREEDY_GAP. */
export function offGreedy(gaps: readonly number[]): number {
  return gaps.filter((g) => g > OFF_GREEDY_GAP).length;
}

/**
 * Whether `reply` is a greedy continuation of `prompt` up to rounding: at
 * most OFF_GREEDY_SHARE of its tokens off-greedy. Returns the count too, for
 * the failure message.
 */
export function isGreedyUpToRounding(
  model: LlamaModel,
  prompt: readonly number[],
  reply: readonly number[],
): { ok: boolean; off: number; of: number } {
  const off = offGreedy(greedyGaps(model, prompt, reply));
  return { ok: off <= reply.length * OFF_GREEDY_SHARE, off, of: reply.length };
}

/**
 * For each reply token, how far its logit lies below the best logit at its
 * position when `prompt + reply` is decoded as one sequence: 0 where the
 * token is the reference's own argmax.
 */
export function greedyGaps(model: LlamaModel, prompt: readonly number[], reply: readonly number[]): number[] {
  const all = [...prompt, ...reply];
  const ctx = new LlamaContext(model, {
    sequences: 1,
    cellsPerSequence: all.length + 64,
    batchSize: 512,
    microBatchSize: 512,
    threads: 1,
  });
  try {
    const gaps: number[] = [];
    for (let start = 0; start < all.length - 1; start += ctx.batchSize) {
      const n = Math.min(ctx.batchSize, all.length - 1 - start);
      for (let i = 0; i < n; i++) ctx.stage(i, all[start + i]!, start + i, 0, start + i >= prompt.length - 1);
      ctx.decode(n);
      for (let i = 0; i < n; i++) {
        const pos = start + i;
        if (pos < prompt.length - 1) continue;
        const row = ctx.logits(i);
        let best = -Infinity;
        for (let t = 0; t < row.length; t++) if (row[t]! > best) best = row[t]!;
        gaps.push(best - row[all[pos + 1]!]!);
      }
    }
    return gaps;
  } finally {
    ctx.free();
  }
}

/**
 * Expects `reply` to be `prompt`'s greedy continuation up to rounding (of
 * `length` tokens when given), naming the count off-greedy if not: what a
 * test compares instead of the tokens the prompt gets alone, which another
 * batch shape or CPU variant may change at a near-tie.
 */
export function expectGreedyReply(
  model: LlamaModel,
  prompt: readonly number[],
  reply: readonly number[],
  length?: number,
): void {
  if (length !== undefined) expect(reply).toHaveLength(length);
  const check = isGreedyUpToRounding(model, prompt, reply);
  expect(check, `${check.off} of ${check.of} tokens off-greedy`).toMatchObject({ ok: true });
}
