// Log-probabilities of one sampled position, from its logits row with the
// request's logit bias applied (docs/design.md#sampling-chain: biased, unscaled logits;
// penalties are not replayed here: docs/design.md#sampling-chain says why).

export interface TokenLogprob {
  logprob: number;
  /** The most likely tokens at this position, best first: [token, logprob]. */
  top: [number, number][];
}

export function positionLogprobs(
  row: Float32Array,
  chosen: number,
  topN: number,
  bias?: Record<number, number>,
): TokenLogprob {
  const biased = (t: number) => row[t]! + (bias?.[t] ?? 0);
  let max = -Infinity;
  for (let t = 0; t < row.length; t++) {
    const v = biased(t);
    if (v > max) max = v;
  }
  let sum = 0;
  for (let t = 0; t < row.length; t++) sum += Math.exp(biased(t) - max);
  const logZ = max + Math.log(sum);
  // Keep the best topN in a small array sorted descending (ties: lower id first).
  const best: [number, number][] = [];
  if (topN > 0) {
    for (let t = 0; t < row.length; t++) {
      const v = biased(t);
      if (best.length === topN && v <= best[topN - 1]![1]) continue;
      let i = best.length;
      while (i > 0 && best[i - 1]![1] < v) i--;
      best.splice(i, 0, [t, v]);
      if (best.length > topN) best.pop();
    }
  }
  return {
    logprob: biased(chosen) - logZ,
    top: best.map(([t, v]) => [t, v - logZ]),
  };
}
