// Qwen3.5's XML call wire, shared by Qwen3-Coder, Nemotron 3 Nano and
// StepFun 3.5 (each template renders a call as below), and Seed-OSS's
// variant of it inside `<seed:tool_call>` with values unpadded:
//
//   <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>
//   <seed:tool_call>\n<function=NAME>\n<parameter=P>VALUE</parameter>\n</function>\n</seed:tool_call>
import { xmlDialect, type XmlWire } from "./xml-calls.ts";

const functionTags = (block: string, padded: boolean): XmlWire => ({
  block: { open: `<${block}>`, close: `</${block}>` },
  call: { open: "<function=", nameEnd: ">", close: "</function>" },
  param: { open: "<parameter=", nameEnd: ">", close: "</parameter>" },
  padded,
});

export const qwenXml = xmlDialect(
  "qwen-xml",
  functionTags("tool_call", true),
  {
    blockOpen: "<tool_call>\n",
    callOpen: (name) => `<function=${name}>\n`,
    paramOpen: (name) => `<parameter=${name}>\n`,
    paramClose: "\n</parameter>\n",
    callClose: "</function>\n",
    blockClose: "</tool_call>",
    callsPerBlock: "one",
    between: "\n",
  },
  (t) => t.includes("<tool_call>") && t.includes("<function=") && t.includes("<parameter="),
);

export const seedOss = xmlDialect(
  "seed-oss",
  functionTags("seed:tool_call", false),
  {
    blockOpen: "<seed:tool_call>\n",
    callOpen: (name) => `<function=${name}>\n`,
    paramOpen: (name) => `<parameter=${name}>`,
    paramClose: "</parameter>\n",
    callClose: "</function>\n",
    blockClose: "</seed:tool_call>",
    callsPerBlock: "one",
    between: "\n",
  },
  (t) => t.includes("<seed:tool_call>"),
);
