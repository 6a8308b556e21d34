// A rendered chat prompt to token ids, keeping message content from forging
// control tokens.
//
// llama.cpp's server tokenizes the whole prompt with special parsing: the
// control-token texts are cut out first, and each run of plain text between
// them is tokenized on its own. We do the same, except that control tokens are
// only cut out of trusted text (scaffolding and assistant history): message
// content joins the plain runs. So for content without control-token text the
// ids are exactly what llama.cpp would produce (including where a tokenizer
// inserts its SentencePiece space prefix: at the start of each plain run), and
// content that spells `<|im_end|>` becomes ordinary text tokens.
//
// Not reproduced: llama.cpp's lstrip/rstrip attributes on a few models' special
// tokens (whitespace next to such a token is tokenized here, not dropped).
import type { Tokenizer } from "./tokenizer.ts";
import type { ChatTemplate, PromptSegment, RenderInput } from "./template.ts";

export interface PromptTokens {
  tokens: number[];
  text: string;
  /** The prompt leaves a reasoning block open, so the model's output starts inside it. */
  endsInReasoning: boolean;
  /** false when the template's output could not be split (the whole prompt was tokenized with special parsing). */
  isolated: boolean;
}

export interface PromptTokenOptions {
  /** Put the BOS token first (the model's add_bos flag), unless the template already did. */
  addBos: boolean;
  /** BOS id; by default the template's bos_token text tokenized with special parsing. */
  bosToken?: number;
  /** Reasoning markers for endsInReasoning (default `<think>` / `</think>`). */
  reasoning?: { open: string; close: string };
}

export function renderToTokens(
  template: ChatTemplate,
  tokenizer: Tokenizer,
  input: RenderInput,
  opts: PromptTokenOptions,
): PromptTokens {
  const rendered = template.render(input);
  const tokens = tokenizeSegments(tokenizer, rendered.segments);
  if (opts.addBos) {
    const bos = opts.bosToken ?? bosFromText(tokenizer, template.bosToken);
    const alreadyThere = tokens[0] === bos || (template.bosToken !== "" && rendered.text.startsWith(template.bosToken));
    if (!alreadyThere) tokens.unshift(bos);
  }
  const markers = opts.reasoning ?? { open: "<think>", close: "</think>" };
  return {
    tokens,
    text: rendered.text,
    endsInReasoning: endsInsideBlock(rendered.segments, markers.open, markers.close),
    isolated: rendered.isolated,
  };
}

function bosFromText(tokenizer: Tokenizer, text: string): number {
  const ids = text === "" ? [] : tokenizer.tokenize(text, { parseSpecial: true });
  if (ids.length !== 1) throw new Error("addBos needs a BOS id: pass bosToken, or give the template a bos_token that is one token");
  return ids[0]!;
}

/**
 * Whether the prompt's tail (after the last message content) opens a block it
 * does not close. Content is skipped so a user who types `<think>` does not
 * make the caller treat the answer as reasoning.
 */
function endsInsideBlock(segments: PromptSegment[], open: string, close: string): boolean {
  const last = segments[segments.length - 1];
  if (!last || !last.trusted) return false;
  const at = last.text.lastIndexOf(open);
  return at >= 0 && !last.text.includes(close, at + open.length);
}

/** Token ids for the segments: control tokens recognized in trusted text only. */
export function tokenizeSegments(tokenizer: Tokenizer, segments: PromptSegment[]): number[] {
  const controls = controlTokensIn(tokenizer, segments);
  // Longest first, like llama.cpp's partitioning, so one control text inside another cannot win.
  const ordered = [...controls.keys()].sort((a, b) => b.length - a.length);

  // Pieces: a control token id, or plain text (trusted or not; adjacent plain text is merged).
  const pieces: (number | string)[] = [];
  const pushText = (text: string) => {
    if (text === "") return;
    const last = pieces.length - 1;
    if (typeof pieces[last] === "string") pieces[last] += text;
    else pieces.push(text);
  };
  for (const seg of segments) {
    if (!seg.trusted) {
      pushText(seg.text);
      continue;
    }
    for (const piece of splitOnControls(seg.text, ordered, controls)) {
      if (typeof piece === "number") pieces.push(piece);
      else pushText(piece);
    }
  }

  const tokens: number[] = [];
  for (const piece of pieces) {
    if (typeof piece === "number") tokens.push(piece);
    else for (const id of tokenizer.tokenize(piece, { addSpecial: false, parseSpecial: false })) tokens.push(id);
  }
  return tokens;
}

/** The control tokens (text → id) that special parsing finds in the trusted segments. */
function controlTokensIn(tokenizer: Tokenizer, segments: PromptSegment[]): Map<string, number> {
  const found = new Map<string, number>();
  const checked = new Set<number>();
  const decoder = new TextDecoder();
  for (const seg of segments) {
    if (!seg.trusted || seg.text === "") continue;
    for (const id of tokenizer.tokenize(seg.text, { addSpecial: false, parseSpecial: true })) {
      if (checked.has(id)) continue;
      checked.add(id);
      // A control token renders as nothing unless asked for its text; plain and
      // user-defined tokens come out of plain tokenization anyway.
      if (tokenizer.tokenBytes(id, false).length > 0) continue;
      const text = decoder.decode(tokenizer.tokenBytes(id, true));
      if (text !== "") found.set(text, id);
    }
  }
  return found;
}

function splitOnControls(text: string, ordered: string[], controls: Map<string, number>): (number | string)[] {
  let pieces: (number | string)[] = [text];
  for (const control of ordered) {
    const id = controls.get(control)!;
    const next: (number | string)[] = [];
    for (const piece of pieces) {
      if (typeof piece === "number") {
        next.push(piece);
        continue;
      }
      const parts = piece.split(control);
      parts.forEach((part, i) => {
        if (i > 0) next.push(id);
        if (part !== "") next.push(part);
      });
    }
    pieces = next;
  }
  return pieces;
}
