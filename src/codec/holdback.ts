// Shared by the stop matcher and the reasoning splitter: how much of a text's
// end might be the start of one of some marker strings.

/** Length of the longest suffix of `text` that is a proper prefix of one of `markers`. */
export function partialSuffixLength(text: string, markers: readonly string[]): number {
  let best = 0;
  for (const m of markers) {
    for (let n = Math.min(m.length - 1, text.length); n > best; n--) {
      if (text.endsWith(m.slice(0, n))) {
        best = n;
        break;
      }
    }
  }
  return best;
}
