// Kimi K3's "XTML" wire: every part of a message is a tag built from the
// special tokens <|open|>, <|close|> and <|sep|> (tag names and attributes
// are plain text). An assistant turn, as the template writes it:
//   <|open|>message role="assistant"<|sep|>
//   <|open|>think<|sep|>REASONING<|close|>think<|sep|>            (when thinking)
//   <|open|>response<|sep|>CONTENT<|close|>response<|sep|>
//   <|open|>tools<|sep|>
//     <|open|>call tool="NAME" index="1"<|sep|>
//       <|open|>argument key="P" type="string"<|sep|>raw text<|close|>argument<|sep|>
//       <|open|>argument key="Q" type="number"<|sep|>JSON<|close|>argument<|sep|>
//     <|close|>call<|sep|>
//     …
//   <|close|>tools<|sep|>
//   <|close|>message<|sep|><|end_of_msg|>
// The generation prompt opens the message and its think section (or, with
// thinking off, its response section). The think section is reasoning, split
// out before this parser (markers <|open|>think<|sep|> … <|close|>think<|sep|>);
// what reaches it is the response and tools sections, whose tags are markup:
// so every reply is parsed (`alwaysParse`), tools or not. A string value is
// written as it is, any other as JSON (its type= says which); attribute values
// escape `&` and `"`. The parser and grammar builder are ./tagged-params.ts's.
import type { Expr } from "../../../grammar/index.ts";
import { lit, repeat, seq } from "../tool-grammar.ts";
import { type TaggedLayout, TaggedParamParser, type TaggedWire, taggedCallsGrammar } from "./tagged-params.ts";
import type { ToolDialect } from "./types.ts";

const open = (tag: string) => `<|open|>${tag}<|sep|>`;
const close = (tag: string) => `<|close|>${tag}<|sep|>`;

export const KIMI_K3_TAGS = {
  thinkOpen: open("think"),
  thinkClose: close("think"),
  responseOpen: open("response"),
  responseClose: close("response"),
  toolsOpen: open("tools"),
  toolsClose: close("tools"),
  messageClose: close("message"),
  endOfMessage: "<|end_of_msg|>",
} as const;

const T = KIMI_K3_TAGS;

/** An attribute value as the template escapes it (`escape_attr`), and back. */
const escapeAttribute = (text: string): string => text.replaceAll("&", "&amp;").replaceAll('"', "&quot;");
const unescapeAttribute = (text: string): string => text.replaceAll("&quot;", '"').replaceAll("&amp;", "&");

const WIRE: TaggedWire = {
  blockOpens: [T.toolsOpen],
  blockCloses: [T.toolsClose],
  call: {
    open: '<|open|>call tool="',
    tag: /^<\|open\|>call tool="([^"]*)"(?:\s+index="\d*")?<\|sep\|>/,
    close: close("call"),
  },
  param: {
    open: '<|open|>argument key="',
    tag: /^<\|open\|>argument key="([^"]*)"(?:\s+type="(\w*)")?<\|sep\|>/,
    close: close("argument"),
    mark: (tag) => (tag[2] === undefined ? undefined : tag[2] === "string" ? "string" : "json"),
  },
  // Arguments the client sent as a JSON string come back as one JSON block.
  object: { open: "<|open|>json", tag: /^<\|open\|>json(?:\s+type="object")?<\|sep\|>/, close: close("json") },
  attribute: unescapeAttribute,
  // Around the content (the think tags too, where no reasoning split took them).
  markup: [
    T.responseOpen,
    T.responseClose,
    T.messageClose,
    T.endOfMessage,
    T.thinkOpen,
    T.thinkClose,
    open('message role="assistant"'),
  ],
  tokens: ["<|open|>", "<|close|>", "<|sep|>"],
};

/** The template's JSON type names (its `xtml_type`): integers are numbers. */
const typeName = (type: string): string => (type === "integer" ? "number" : type);

const DIGIT: Expr = { kind: "class", negated: false, ranges: [[0x30, 0x39]] };
const NONZERO: Expr = { kind: "class", negated: false, ranges: [[0x31, 0x39]] };

const LAYOUT: TaggedLayout = {
  // The call's number in the turn (from 1) is the model's to write.
  callOpen: (name) =>
    seq(lit(`<|open|>call tool="${escapeAttribute(name)}" index="`), NONZERO, repeat(DIGIT, 0, 2), lit('"<|sep|>')),
  paramOpen: (key, value) => {
    const head = `<|open|>argument key="${escapeAttribute(key)}" type="`;
    if (value.string) return lit(`${head}string"<|sep|>`);
    const names = [...new Set(value.types.map(typeName))];
    return seq(lit(head), names.length === 1 ? lit(names[0]!) : { kind: "alt", alts: names.map(lit) }, lit('"<|sep|>'));
  },
  paramClose: close("argument"),
  paramAfter: "",
  callClose: lit(close("call")),
  // Forced from the start of the reply, the grammar first closes the section
  // the generation prompt opened: think (then an empty response) or response.
  // Under tool_choice auto it waits for the tools tag (the trigger).
  block: (calls) =>
    seq(
      repeat(
        { kind: "alt", alts: [lit(`${T.thinkClose}${T.responseOpen}${T.responseClose}`), lit(T.responseClose)] },
        0,
        1,
      ),
      lit(T.toolsOpen),
      calls,
      lit(`${T.toolsClose}${T.messageClose}`),
      repeat(lit(T.endOfMessage), 0, 1),
    ),
};

export const kimiK3: ToolDialect = {
  name: "kimi-k3",
  detect: (template) =>
    template.includes("<|open|>") && template.includes("<|close|>") && template.includes("<|end_of_msg|>"),
  parser: (opts) => new TaggedParamParser(WIRE, opts),
  forcedGrammar: (tools, parallel) => taggedCallsGrammar(tools, parallel, LAYOUT),
  // The response and tools tags are markup in every reply.
  alwaysParse: true,
  trigger: T.toolsOpen,
  openers: [T.toolsOpen],
};
