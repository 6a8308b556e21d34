// Thresholds for statistical tests, derived from the sample size rather than
// picked: the most events a Binomial(n, p) count reaches with probability
// 1 - alpha, so a test that allows that many fails by chance at most once in
// 1/alpha runs when the true rate is at most p.

/** The smallest k with P(X > k) <= alpha for X ~ Binomial(n, p). */
export function binomialUpperQuantile(n: number, p: number, alpha: number): number {
  if (p <= 0) return 0;
  if (p >= 1) return n;
  // Summed in log space from k = 0: n up to a few thousand stays exact enough.
  const logP = Math.log(p);
  const logQ = Math.log1p(-p);
  let logC = 0; // log C(n, 0)
  let cdf = 0;
  for (let k = 0; k <= n; k++) {
    if (k > 0) logC += Math.log(n - k + 1) - Math.log(k);
    cdf += Math.exp(logC + k * logP + (n - k) * logQ);
    if (1 - cdf <= alpha) return k;
  }
  return n;
}
