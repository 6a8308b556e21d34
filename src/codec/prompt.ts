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
// content that spells `<|im_end|>` becomes ordinary text tokens. The control
// texts are cut out in JS (./control-tokens.ts), never by llama_tokenize's
// special parsing, whose cost grows with the square of a prompt's length.
//
// Not reproduced in chat prompts: llama.cpp's lstrip/rstrip attributes on a few
// models' special tokens (whitespace next to such a token is tokenized here,
// not dropped). tokenizeText, for text tokenized whole (/v1/completions,
// /v1/tokenize), does apply them, as llama_tokenize does.
import type { ControlTokens } from "./control-tokens.ts";
import type { Tokenizer } from "./tokenizer.ts";
import type { PromptSegment } from "./segments.ts";
import type { ChatTemplate, RenderInput } from "./template.ts";

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
  controls: ControlTokens,
  input: RenderInput,
  opts: PromptTokenOptions,
): PromptTokens {
  const rendered = template.render(input);
  const tokens = tokenizeSegments(tokenizer, controls, rendered.segments);
  if (opts.addBos) {
    const bos = opts.bosToken ?? bosFromText(tokenizer, controls, template.bosToken);
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

function bosFromText(tokenizer: Tokenizer, controls: ControlTokens, text: string): number {
  const ids = tokenizeText(tokenizer, controls, text, { addSpecial: false });
  if (ids.length !== 1)
    throw new Error("addBos needs a BOS id: pass bosToken, or give the template a bos_token that is one token");
  return ids[0]!;
}

/**
 * Whether the prompt's tail (after the last message content) opens a block it
 * does not close. Content is skipped so a user who types `<think>` does not
 * make the caller treat the answer as reasoning.
 */
function endsInsideBlock(segments: PromptSegment[], open: string, close: string): boolean {
  const last = segments[segments.length - 1];
  if (!last?.trusted) return false;
  const at = last.text.lastIndexOf(open);
  return at >= 0 && !last.text.includes(close, at + open.length);
}

/** Token ids for the segments: control tokens recognized in trusted text only. */
export function tokenizeSegments(tokenizer: Tokenizer, controls: ControlTokens, segments: PromptSegment[]): number[] {
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
    for (const piece of controls.split(seg.text)) {
      if (typeof piece === "number") pieces.push(piece);
      else pushText(piece);
    }
  }
  return tokenizePieces(tokenizer, pieces);
}

/**
 * Text to token ids with its control-token text parsed: what llama_tokenize
 * gives with parse_special (lstrip/rstrip included), in linear time.
 * `addSpecial` frames it as the vocabulary asks (BOS, EOS, CLS/SEP).
 */
export function tokenizeText(
  tokenizer: Tokenizer,
  controls: ControlTokens,
  text: string,
  opts: { addSpecial: boolean },
): number[] {
  const tokens = tokenizePieces(tokenizer, controls.split(text, { strip: true }));
  if (!opts.addSpecial) return tokens;
  const frame = specialFrame(tokenizer);
  return [...frame.before, ...tokens, ...frame.after];
}

function tokenizePieces(tokenizer: Tokenizer, pieces: (number | string)[]): number[] {
  const tokens: number[] = [];
  for (const piece of pieces) {
    if (typeof piece === "number") tokens.push(piece);
    else for (const id of tokenizer.tokenize(piece, { addSpecial: false, parseSpecial: false })) tokens.push(id);
  }
  return tokens;
}

/** The tokens add_special puts before and after any text (they do not depend on it). */
interface SpecialFrame {
  before: number[];
  after: number[];
}

const frames = new WeakMap<Tokenizer, SpecialFrame>();

function specialFrame(tokenizer: Tokenizer): SpecialFrame {
  let frame = frames.get(tokenizer);
  if (frame) return frame;
  const plain = tokenizer.tokenize("a", { addSpecial: false, parseSpecial: false });
  const framed = tokenizer.tokenize("a", { addSpecial: true, parseSpecial: false });
  const at = framed.findIndex((_, i) => plain.every((id, j) => framed[i + j] === id));
  if (at < 0) throw new Error("the vocabulary's special tokens do not frame text: cannot tell what add_special adds");
  frame = { before: framed.slice(0, at), after: framed.slice(at + plain.length) };
  frames.set(tokenizer, frame);
  return frame;
}
