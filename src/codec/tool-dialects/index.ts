// The tool-call wires superfluid parses, in the order they are tried: the
// most specific markers first, the generic JSON fallback last.
import { deepseek } from "./deepseek.ts";
import { genericJson } from "./generic-json.ts";
import { gptOss } from "./gpt-oss.ts";
import { hermes } from "./hermes.ts";
import { llama3 } from "./llama3.ts";
import { mistral } from "./mistral.ts";
import type { ToolDialect } from "./types.ts";

export type { ToolCallEvent, ToolCallParser, ToolDialect } from "./types.ts";

export const TOOL_DIALECTS: ToolDialect[] = [
  // Harmony's channels carry reasoning and the answer too: every reply is parsed.
  { ...gptOss, alwaysParse: true },
  deepseek,
  mistral,
  llama3,
  hermes,
  genericJson,
];

/** The first dialect whose markers the template (and vocabulary) shows, if any. */
export function detectToolDialect(template: string, hasToken: (text: string) => boolean): ToolDialect | undefined {
  return TOOL_DIALECTS.find((d) => d.detect(template, hasToken));
}
