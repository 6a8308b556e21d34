// The tokens two sequences share from their start: what the prefix cache,
// pins and cache breakpoints all measure reuse by.

/** How many leading tokens `a` and `b` share, counting at most `max`. */
export function commonPrefix(a: readonly number[], b: readonly number[], max = Infinity): number {
  const n = Math.min(a.length, b.length, max);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
