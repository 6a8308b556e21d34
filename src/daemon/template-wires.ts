// What a model's chat template teaches it to write besides text: its
// tool-call wire and its reasoning markers, judged with its vocabulary (a
// marker counts as a token only when it is one). One reading for the server
// (served-model.ts) and `superfluid check`, so the two never disagree.
import { detectReasoningMarkers, type ReasoningMarkers } from "../codec/reasoning-markers.ts";
import { detectToolDialect, type ToolDialect } from "../codec/tool-dialects/index.ts";
import type { LlamaModel } from "../engine/model.ts";
import type { ModelInfo } from "../gguf/index.ts";

export interface TemplateWires {
  /** How it writes tool calls; undefined when the template shows no tools. */
  toolDialect: ToolDialect | undefined;
  /** Where its reasoning goes; undefined when its vocabulary has no markers. */
  reasoningMarkers: ReasoningMarkers | undefined;
  /** The wire's call openers that are single tokens (banned when no call may be made). */
  callOpenerTokens: number[];
}

export function templateWires(info: ModelInfo, tokenizer: LlamaModel): TemplateWires {
  const single = (s: string) => tokenizer.tokenize(s, { parseSpecial: true }).length === 1;
  const template = info.toolUseTemplate ?? info.chatTemplate ?? "";
  const toolDialect = template ? detectToolDialect(template, single) : undefined;
  const callOpenerTokens = (toolDialect?.openers ?? [])
    .filter(single)
    .map((s) => tokenizer.tokenize(s, { parseSpecial: true })[0]!);
  return { toolDialect, reasoningMarkers: detectReasoningMarkers(template, single), callOpenerTokens };
}
