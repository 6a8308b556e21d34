// One model family's tool-call wire: how to recognise it from the chat
// template, how to parse calls out of streamed output, and the grammar that
// forces a call (tool_choice "required" or a named function).
import type { ToolSpec } from "../tool-grammar.ts";

export type { ToolSpec };

/** What a parser reads out of a reply, in order. */
export type ToolCallEvent =
  | { type: "text"; text: string } // ordinary content
  | { type: "reasoning"; text: string } // reasoning in a wire that carries it (gpt-oss's analysis channel)
  | { type: "call-start"; index: number; id: string; name: string } // once the name is known
  | { type: "call-args"; index: number; text: string } // a fragment of the raw arguments JSON text
  | { type: "call-end"; index: number; arguments: string }; // the whole arguments text

/** What a parser is made with for one reply. */
export interface ParserOptions {
  /** Makes call ids (by default OpenAI-style `call_…`). */
  newId?: () => string;
  /**
   * The request's tools. Wires that write argument values as raw text (the
   * XML-style ones) type each value by its parameter's schema: `3` for an
   * integer, `"3"` for a string.
   */
  tools?: ToolSpec[];
}

/** A streaming parser: text in (any chunking), content and call events out. */
export interface ToolCallParser {
  push(text: string): ToolCallEvent[];
  /** End of output: held text comes out; an unterminated call is finished or returned as text. */
  flush(): ToolCallEvent[];
}

export interface ToolDialect {
  /** Short name, shown in logs and /v1/models. */
  name: string;
  /**
   * Whether a model uses this wire. `template` is the chat template source (tool-use
   * template first when the model has one); `hasToken(text)` says whether the vocabulary
   * holds `text` as a single (special) token.
   */
  detect(template: string, hasToken: (text: string) => boolean): boolean;
  /** A fresh parser for one reply. */
  parser(opts?: ParserOptions): ToolCallParser;
  /** GBNF (root rule `root`) for one call, or several when `parallel`, to one of `tools`. */
  forcedGrammar(tools: ToolSpec[], parallel: boolean): string;
  /**
   * Texts that end the reply once a call may be made: the template puts the
   * tools' results after them in the same turn (Apertus's `<|tools_suffix|>`),
   * so the model would go on to write results of its own.
   */
  stops?: string[];
  /** The wire also carries reasoning and content channels, so every reply is parsed, tools or not. */
  alwaysParse?: boolean;
  /**
   * The text every call opens with (the forced grammar starts with it). With
   * tool_choice "auto" the forced grammar waits for it, so a call that starts
   * is held to its tool's schema while free text stays free.
   */
  trigger?: string;
  /**
   * Texts that open a call (special tokens in the models that use the wire).
   * Where one is a single token it is never sampled when no call may be made
   * (no tools, or tool_choice "none"), so no call markup can reach the reply.
   */
  openers?: string[];
}
