// Shared by the stop matcher, the reasoning splitter and the tool-call
// parsers: how much of a text's end might be the start of one of some marker
// strings, and splitting streamed text at a marker without letting half of
// one out as text.

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

/**
 * Looks for `marker` in buffered text. Found: the text before it and the text
 * after it. Not found: the text that can go out now and what must be held
 * back because it may be the start of the marker (nothing when `final`).
 */
export function seekMarker(
  buffered: string,
  marker: string,
  final = false,
): { before: string; after: string } | { before: string; after: undefined; held: string } {
  const at = buffered.indexOf(marker);
  if (at >= 0) return { before: buffered.slice(0, at), after: buffered.slice(at + marker.length) };
  const keep = final ? 0 : partialSuffixLength(buffered, [marker]);
  return {
    before: buffered.slice(0, buffered.length - keep),
    after: undefined,
    held: buffered.slice(buffered.length - keep),
  };
}

/** The first occurrence of any of `markers` in `text` at or after `from`: where, and which marker. */
export function firstMarker(
  text: string,
  markers: readonly string[],
  from = 0,
): { at: number; marker: string } | undefined {
  let best: { at: number; marker: string } | undefined;
  for (const marker of markers) {
    const at = text.indexOf(marker, from);
    if (at >= 0 && (!best || at < best.at)) best = { at, marker };
  }
  return best;
}
