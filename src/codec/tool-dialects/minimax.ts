// MiniMax M2's call wire: one `<minimax:tool_call>` block holding one
// `<invoke>` per call, values raw text typed by the schema:
//
//   <minimax:tool_call>\n<invoke name="NAME">\n<parameter name="P">VALUE</parameter>\n</invoke>\n</minimax:tool_call>
import { xmlDialect } from "./xml-calls.ts";

export const minimaxM2 = xmlDialect(
  "minimax-m2",
  {
    block: { open: "<minimax:tool_call>", close: "</minimax:tool_call>" },
    call: { open: '<invoke name="', nameEnd: '">', close: "</invoke>" },
    param: { open: '<parameter name="', nameEnd: '">', close: "</parameter>" },
    padded: false,
  },
  {
    blockOpen: "<minimax:tool_call>\n",
    callOpen: (name) => `<invoke name="${name}">\n`,
    paramOpen: (name) => `<parameter name="${name}">`,
    paramClose: "</parameter>\n",
    callClose: "</invoke>\n",
    blockClose: "</minimax:tool_call>",
    callsPerBlock: "many",
    between: "",
  },
  (t) => t.includes("<minimax:tool_call>") && t.includes("<invoke name="),
);
