// A vocabulary's control tokens (text → id), learned once per model, and text
// split on them the way llama.cpp's special-token partitioning splits it
// (tokenizer_st_partition): each control text, longest first, is cut out of
// the text that no longer one has claimed, leftmost first, and the plain runs
// between are tokenized on their own.
//
// Why not let llama_tokenize do it (parse_special): its partitioning searches
// the rest of the whole text for every control token in every fragment, so a
// prompt with many control tokens costs time quadratic in its length (30,000
// chat turns, 870 KB: ~12 s). Here occurrences are found in one pass over the
// text through a trie of the control texts, then claimed in llama.cpp's
// order: time linear in the text (times the longest control text at most).
//
// Equal-length control texts that overlap in the text are claimed in id
// order (llama.cpp's order for them is its sort's, unspecified).

export interface ControlToken {
  text: string;
  id: number;
  /** llama.cpp's LSTRIP attribute: whitespace right before it is dropped (with `strip`). */
  lstrip?: boolean;
  /** RSTRIP: whitespace right after it is dropped (with `strip`). */
  rstrip?: boolean;
}

interface TrieNode {
  next: Map<number, TrieNode>;
  /** The control token whose text ends here. */
  token?: ControlToken;
}

/** C's isspace in the "C" locale, which llama.cpp strips with. */
function isSpace(code: number): boolean {
  return code === 0x20 || (code >= 0x09 && code <= 0x0d);
}

/** One claimed control token: where its text starts in the split text. */
interface Claim {
  at: number;
  token: ControlToken;
}

export class ControlTokens {
  private readonly root: TrieNode = { next: new Map() };
  /** Claiming order: longest text first, then lowest id. */
  private readonly rank = new Map<ControlToken, number>();

  constructor(tokens: readonly ControlToken[]) {
    const ordered = tokens.filter((t) => t.text !== "").sort((a, b) => b.text.length - a.text.length || a.id - b.id);
    for (const token of ordered) {
      let node = this.root;
      for (let i = 0; i < token.text.length; i++) {
        const code = token.text.charCodeAt(i);
        let child = node.next.get(code);
        if (!child) node.next.set(code, (child = { next: new Map() }));
        node = child;
      }
      // Two tokens with one text: the first (lowest id) is the one parsing finds.
      if (node.token) continue;
      node.token = token;
      this.rank.set(token, this.rank.size);
    }
  }

  get size(): number {
    return this.rank.size;
  }

  /**
   * The text as control token ids and plain runs, in order (empty runs left
   * out). `strip` applies the tokens' lstrip/rstrip attributes, as llama.cpp
   * does when it parses special tokens in a whole text.
   */
  split(text: string, opts: { strip?: boolean } = {}): (number | string)[] {
    const byToken = this.occurrences(text);
    if (byToken.size === 0) return text === "" ? [] : [text];
    // claimed[i]: position i belongs to a control token (or whitespace one stripped).
    const claimed = new Uint8Array(text.length);
    const claims: Claim[] = [];
    const tokens = [...byToken.keys()].sort((a, b) => this.rank.get(a)! - this.rank.get(b)!);
    for (const token of tokens) {
      const length = token.text.length;
      for (const at of byToken.get(token)!) {
        if (!free(claimed, at, at + length)) continue;
        claimed.fill(1, at, at + length);
        claims.push({ at, token });
        if (opts.strip) stripAround(text, claimed, at, at + length, token);
      }
    }
    claims.sort((a, b) => a.at - b.at);
    // Between two claims the text is plain, less any whitespace stripped at its ends.
    const pieces: (number | string)[] = [];
    const plain = (from: number, to: number) => {
      while (from < to && claimed[from] === 1) from++;
      while (to > from && claimed[to - 1] === 1) to--;
      if (to > from) pieces.push(text.slice(from, to));
    };
    let end = 0;
    for (const { at, token } of claims) {
      plain(end, at);
      pieces.push(token.id);
      end = at + token.text.length;
    }
    plain(end, text.length);
    return pieces;
  }

  /** Every start of every control text in the text (overlapping ones too), by token, ascending. */
  private occurrences(text: string): Map<ControlToken, number[]> {
    const found = new Map<ControlToken, number[]>();
    if (this.rank.size === 0) return found;
    for (let i = 0; i < text.length; i++) {
      let node = this.root.next.get(text.charCodeAt(i));
      for (let j = i + 1; node; j++) {
        if (node.token) {
          const starts = found.get(node.token);
          if (starts) starts.push(i);
          else found.set(node.token, [i]);
        }
        if (j >= text.length) break;
        node = node.next.get(text.charCodeAt(j));
      }
    }
    return found;
  }
}

function free(claimed: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (claimed[i] === 1) return false;
  return true;
}

/** Drops the whitespace llama.cpp strips beside a token, up to the next claimed position. */
function stripAround(text: string, claimed: Uint8Array, from: number, to: number, token: ControlToken): void {
  if (token.lstrip)
    for (let i = from - 1; i >= 0 && claimed[i] === 0 && isSpace(text.charCodeAt(i)); i--) claimed[i] = 1;
  if (token.rstrip)
    for (let i = to; i < text.length && claimed[i] === 0 && isSpace(text.charCodeAt(i)); i++) claimed[i] = 1;
}
