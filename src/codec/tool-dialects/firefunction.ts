// FireFunction v2 tool calls: ` functools[{"name": "f", "arguments": {...}}, ...]`
// after any content (the template appends ' functools[' + the calls joined by
// ', ' + ']'; "no closing marker required"). `functools` is ordinary text, not
// a special token, so a ` functools` no list follows is content.
//
// The template reads its tool list from a `functions` variable (JSON text),
// not `tools`, and `datetime`; both have to be given for it to render.
import { jsonObjectCall, lit } from "../tool-grammar.ts";
import { JsonListToolParser, callListGrammar, type JsonListWire } from "./json-list.ts";
import type { ToolDialect } from "./types.ts";

const OPEN = " functools[";

const WIRE: JsonListWire = {
  // The template puts a space before the marker; a reply may start without it.
  openers: [OPEN, OPEN.trimStart()],
  plainOpeners: true,
  shape: { kind: "keyed", name: "name", args: "arguments" },
};

export const fireFunction: ToolDialect = {
  name: "firefunction",
  detect: (template) => template.includes("functools["),
  parser: (opts) => new JsonListToolParser(WIRE, opts?.newId),
  forcedGrammar: (tools, parallel) =>
    callListGrammar(tools, jsonObjectCall(), { open: OPEN, sep: lit(", "), close: "]" }, parallel),
  // Plain text: no token of its own to keep out of a reply that may not call.
  trigger: OPEN,
};
