// The tool-call wires superfluid parses, in the order they are tried: the
// most specific markers first, the generic JSON fallback last.
import { apertus } from "./apertus.ts";
import { commandR, commandRPlus } from "./command-r.ts";
import { deepseek, deepseekV31 } from "./deepseek.ts";
import { deepseekV32, deepseekV4 } from "./deepseek-dsml.ts";
import { fireFunction } from "./firefunction.ts";
import { functionaryV31, functionaryV32 } from "./functionary.ts";
import { gemma4 } from "./gemma4.ts";
import { genericJson } from "./generic-json.ts";
import { glm45, glm47 } from "./glm.ts";
import { gptOss } from "./gpt-oss.ts";
import { granite } from "./granite.ts";
import { hermes } from "./hermes.ts";
import { kimiK2 } from "./kimi-k2.ts";
import { kimiK3 } from "./kimi-k3.ts";
import { lfm2 } from "./lfm2.ts";
import { llama3 } from "./llama3.ts";
import { minimaxM2 } from "./minimax.ts";
import { minimaxM3 } from "./minimax-m3.ts";
import { mistral, mistralCallIds, mistralNamed } from "./mistral.ts";
import { qwenXml, seedOss } from "./qwen-xml.ts";
import type { ToolDialect } from "./types.ts";

export type { ParserOptions, ToolCallEvent, ToolCallParser, ToolDialect } from "./types.ts";

export const TOOL_DIALECTS: ToolDialect[] = [
  // Harmony's channels carry reasoning and the answer too: every reply is parsed.
  { ...gptOss, alwaysParse: true },
  deepseekV32,
  deepseekV4,
  deepseekV31,
  deepseek,
  kimiK2,
  kimiK3,
  mistral,
  mistralCallIds,
  mistralNamed,
  // Before Llama 3: v3.1's template also holds `<|python_tag|>`.
  functionaryV31,
  functionaryV32,
  llama3,
  seedOss,
  minimaxM2,
  minimaxM3,
  glm47,
  glm45,
  gemma4,
  commandR,
  commandRPlus,
  granite,
  fireFunction,
  apertus,
  lfm2,
  // Before Hermes: these templates also hold `<tool_call>`.
  qwenXml,
  hermes,
  genericJson,
];

/** The first dialect whose markers the template (and vocabulary) shows, if any. */
export function detectToolDialect(template: string, hasToken: (text: string) => boolean): ToolDialect | undefined {
  return TOOL_DIALECTS.find((d) => d.detect(template, hasToken));
}
