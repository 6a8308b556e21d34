// GLM 4.5-4.7's call wire: the name right after `<tool_call>`, then key and
// value tags, values raw text typed by the schema. GLM 4.6 puts each tag on
// its own line; GLM 4.7 writes them back to back:
//
//   <tool_call>NAME\n<arg_key>P</arg_key>\n<arg_value>VALUE</arg_value>\n</tool_call>
//   <tool_call>NAME<arg_key>P</arg_key><arg_value>VALUE</arg_value></tool_call>
import type { ToolDialect } from "./types.ts";
import { xmlDialect, type XmlWire } from "./xml-calls.ts";

const WIRE: XmlWire = {
  block: { open: "<tool_call>", close: "</tool_call>" },
  param: { open: "<arg_key>", nameEnd: "</arg_key>", valueOpen: "<arg_value>", close: "</arg_value>" },
  padded: false,
};

function glmDialect(name: string, nl: "\n" | "", detect: ToolDialect["detect"]): ToolDialect {
  return xmlDialect(
    name,
    WIRE,
    {
      blockOpen: "<tool_call>",
      callOpen: (tool) => tool,
      paramOpen: (p) => `${nl}<arg_key>${p}</arg_key>${nl}<arg_value>`,
      paramClose: "</arg_value>",
      callClose: nl,
      blockClose: "</tool_call>",
      callsPerBlock: "one",
      between: nl,
    },
    detect,
  );
}

const isGlm = (t: string) => t.includes("<arg_key>") && t.includes("<arg_value>");

/** GLM 4.7: the tags back to back. */
export const glm47 = glmDialect("glm-4.7", "", (t) => isGlm(t) && t.includes("</arg_key><arg_value>"));
/** GLM 4.5/4.6: each tag on its own line. */
export const glm45 = glmDialect("glm-4.5", "\n", isGlm);
