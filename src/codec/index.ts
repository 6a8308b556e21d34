// The codec layer: between the HTTP layer and the engine, pure TypeScript.
// Chat templates to prompt tokens, tokens back to text, stop strings and
// reasoning markers.
export type { Tokenizer } from "./tokenizer.ts";
export {
  ChatTemplate,
  TemplateError,
  templateReads,
  type ChatMessage,
  type ToolCall,
  type ToolDef,
  type TextPart,
  type RenderInput,
  type RenderedPrompt,
} from "./template.ts";
export type { PromptSegment } from "./segments.ts";
export {
  renderToTokens,
  tokenizeSegments,
  tokenizeText,
  type PromptTokens,
  type PromptTokenOptions,
} from "./prompt.ts";
export { ControlTokens, type ControlToken } from "./control-tokens.ts";
export { IncrementalDecoder } from "./detokenizer.ts";
export { StopMatcher, type StopResult } from "./stop.ts";
export { ReasoningSplitter, splitReasoning, type ReasoningOptions, type SplitText } from "./reasoning.ts";
export { strftime } from "./strftime.ts";
