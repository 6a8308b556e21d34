// Small scanners over JSON text the model is still writing: where a value
// ends (or that it has not yet), whitespace, markers outside strings, and
// the trailing-comma repair.

/** Whether the text parses as one JSON object (not an array, not a scalar): a tool call's arguments. */
export function isJsonObjectText(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

/** The text of a JSON string literal, or undefined when `text` is not one. */
export function jsonStringValue(text: string): string | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "string" ? value : undefined;
  } catch {
    return undefined;
  }
}

export const isWs = (c: string | undefined): boolean => c === " " || c === "\n" || c === "\r" || c === "\t";

export function skipWs(s: string, i: number): number {
  while (i < s.length && isWs(s[i])) i++;
  return i;
}

/** End (exclusive) of the JSON value starting at s[i], or -1 when it is not complete in `s`. */
export function jsonValueEnd(s: string, i: number): number {
  const c = s[i];
  if (c === undefined) return -1;
  if (c === '"') {
    for (let j = i + 1; j < s.length; j++) {
      if (s[j] === "\\") j++;
      else if (s[j] === '"') return j + 1;
    }
    return -1;
  }
  if (c === "{" || c === "[") {
    let depth = 0;
    for (let j = i; j < s.length; j++) {
      const d = s[j]!;
      if (d === '"') {
        const e = jsonValueEnd(s, j);
        if (e < 0) return -1;
        j = e - 1;
      } else if (d === "{" || d === "[") depth++;
      else if (d === "}" || d === "]") {
        depth--;
        if (depth === 0) return j + 1;
      }
    }
    return -1;
  }
  let j = i;
  while (j < s.length && !/[,\]}\s]/.test(s[j]!)) j++;
  return j < s.length ? j : -1;
}

/**
 * The first of `markers` in JSON text outside its strings (an argument may
 * quote a wire's markers): where, and which; undefined when none is.
 */
export function markerOutsideStrings(
  text: string,
  markers: readonly string[],
): { at: number; marker: string } | undefined {
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else {
      const marker = markers.find((m) => text.startsWith(m, i));
      if (marker) return { at: i, marker };
    }
  }
  return undefined;
}

/** Drop commas that directly precede `}` or `]` (outside strings). */
export function removeTrailingCommas(s: string): string {
  let out = "";
  let inString = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (inString) {
      out += c;
      if (c === "\\") {
        out += s[i + 1] ?? "";
        i++;
      } else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === ",") {
      let j = i + 1;
      while (j < s.length && /\s/.test(s[j]!)) j++;
      if (s[j] === "}" || s[j] === "]") continue;
    }
    out += c;
  }
  return out;
}
