// Log-probabilities of one sampled position, from its logits row with the
// request's logit bias applied (docs/design.md#sampling-chain: biased, unscaled logits;
// penalties are not replayed here: docs/design.md#sampling-chain says why).
import { jsExpSum, type ExpSum } from "./draw.ts";

export interface TokenLogprob {
  logprob: number;
  /** The most likely tokens at this position, best first: [token, logprob]. */
  top: [number, number][];
}

let expScratch: Float32Array | undefined;

/**
 * The chosen token's log-probability and the `topN` best, in two passes over
 * the row (its best, then the normaliser through `expSum`, ggml's vectorized
 * exp where the engine has it) and one small selection; a biased token is
 * corrected on its own, never by touching the row.
 */
export function positionLogprobs(
  row: Float32Array,
  chosen: number,
  topN: number,
  bias?: Record<number, number>,
  expSum: ExpSum = jsExpSum,
): TokenLogprob {
  const n = row.length;
  const biases = new Map<number, number>();
  for (const [t, b] of Object.entries(bias ?? {})) {
    const token = Number(t);
    if (token >= 0 && token < n) biases.set(token, b);
  }
  const biased = (t: number) => row[t]! + (biases.get(t) ?? 0);
  let max = -Infinity;
  for (let t = 0; t < n; t++) if (row[t]! > max) max = row[t]!;
  for (const t of biases.keys()) max = Math.max(max, biased(t));
  if (!expScratch || expScratch.length < n) expScratch = new Float32Array(n);
  const y = expScratch;
  let sum = max === -Infinity ? 0 : expSum(n, y, row, max);
  for (const t of biases.keys()) sum += Math.exp(biased(t) - max) - y[t]!;
  const logZ = max + Math.log(sum);
  // The best by raw logit, with room for every biased token to have moved above
  // them; then each candidate at its biased value.
  const best: [number, number][] = [];
  if (topN > 0) {
    const room = topN + biases.size;
    for (let t = 0; t < n; t++) {
      const v = row[t]!;
      if (best.length === room && v <= best[room - 1]![1]) continue;
      let i = best.length;
      while (i > 0 && best[i - 1]![1] < v) i--;
      best.splice(i, 0, [t, v]);
      if (best.length > room) best.pop();
    }
    const candidates = new Set([...best.map(([t]) => t), ...biases.keys()]);
    best.length = 0;
    for (const t of candidates) best.push([t, biased(t)]);
    // Best first; ties: lower id first.
    best.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
    best.length = Math.min(best.length, topN);
  }
  return {
    logprob: biased(chosen) - logZ,
    top: best.map(([t, v]) => [t, v - logZ]),
  };
}
