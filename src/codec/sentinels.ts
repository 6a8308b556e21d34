// Sentinels stand in for message content in a second render of a chat
// template, so the scaffolding around the content can be found (see
// template.ts for the whole scheme).
import type { PromptSegment } from "./segments.ts";

const SENTINEL_OPEN = "\uE000";
const SENTINEL_CLOSE = "\uE001";
const DIGIT_BASE = 0xe010;

/** Eight random private-use characters that appear nowhere in the request. */
export function pickNonce(haystack: string): string {
  for (;;) {
    const bytes = crypto.getRandomValues(new Uint8Array(8));
    const nonce = Array.from(bytes, (b) => String.fromCharCode(0xe100 + b)).join("");
    if (!haystack.includes(SENTINEL_OPEN + nonce)) return nonce;
  }
}

/** The sentinel for message `index`: open mark, nonce, the index in private-use digits, close mark. */
export function sentinel(nonce: string, index: number): string {
  const digits = Array.from(String(index), (d) => String.fromCharCode(DIGIT_BASE + Number(d))).join("");
  return SENTINEL_OPEN + nonce + digits + SENTINEL_CLOSE;
}

/**
 * Cuts the real render at the places the sentinel render had sentinels, or
 * returns undefined when the two renders do not line up.
 */
export function align(
  real: string,
  masked: string,
  nonce: string,
  contents: Map<number, string>,
): PromptSegment[] | undefined {
  const pattern = new RegExp(`${SENTINEL_OPEN}${nonce}([\\uE010-\\uE019]+)${SENTINEL_CLOSE}`, "g");
  // split with a capture group alternates: scaffold, index, scaffold, index, ..., scaffold
  const parts = masked.split(pattern);
  const segments: PromptSegment[] = [];
  const push = (text: string, trusted: boolean) => {
    if (text === "") return;
    const last = segments[segments.length - 1];
    if (last && last.trusted === trusted) last.text += text;
    else segments.push({ text, trusted });
  };

  let pos = 0;
  const first = parts[0]!;
  if (!real.startsWith(first)) return undefined;
  push(first, true);
  pos = first.length;
  for (let k = 1; k < parts.length; k += 2) {
    const index = Number(Array.from(parts[k]!, (c) => c.charCodeAt(0) - DIGIT_BASE).join(""));
    const raw = contents.get(index);
    if (raw === undefined) return undefined;
    const scaffold = parts[k + 1]!;
    const isLast = k + 2 >= parts.length;
    const fits = (c: string) =>
      real.startsWith(c, pos) &&
      real.startsWith(scaffold, pos + c.length) &&
      (!isLast || pos + c.length + scaffold.length === real.length);
    const chosen = candidates(raw).find(fits);
    if (chosen === undefined) return undefined;
    push(chosen, false);
    push(scaffold, true);
    pos += chosen.length + scaffold.length;
  }
  return pos === real.length ? segments : undefined;
}

/** The forms a template commonly gives message content: as is, trimmed, or inside a JSON string. */
function candidates(raw: string): string[] {
  const forms = [raw, raw.trim(), JSON.stringify(raw).slice(1, -1)];
  return forms.filter((f, i) => forms.indexOf(f) === i);
}
