// The tool-call wires superfluid parses, in the order they are tried: the
// most specific markers first, the generic JSON fallback last.
import { hermes } from "./hermes.ts";
import type { ToolDialect } from "./types.ts";

export type { ToolCallParser, ToolDialect } from "./types.ts";

export const TOOL_DIALECTS: ToolDialect[] = [hermes];

/** The first dialect whose markers the template (and vocabulary) shows, if any. */
export function detectToolDialect(template: string, hasToken: (text: string) => boolean): ToolDialect | undefined {
  return TOOL_DIALECTS.find((d) => d.detect(template, hasToken));
}
