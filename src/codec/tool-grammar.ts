// The grammar of a forced tool call (tool_choice "required" or a named
// function) in the JSON-in-tags wire: `<tool_call>{"name": "f", "arguments":
// {...}}</tool_call>`, where the arguments match f's parameter schema. Every
// tool's schema is compiled by grammar/ and placed under its own rule prefix.
import { compileJsonSchema, namespaceGrammar, printGbnf, type Expr, type Grammar, type Rule } from "../../grammar/index.ts";

export interface ToolSpec {
  name: string;
  /** JSON Schema of the arguments (an empty object schema when the tool declares none). */
  parameters: unknown;
}

const ref = (name: string): Expr => ({ kind: "ref", name });
const lit = (value: string): Expr => ({ kind: "lit", value });
const seq = (...items: Expr[]): Expr => ({ kind: "seq", items });

/** GBNF for one or more calls (parallel) to the given tools, wrapped in the wire's tags. */
export function toolCallGrammar(tools: ToolSpec[], wire: { open: string; close: string }, parallel: boolean): string {
  if (tools.length === 0) throw new Error("a forced tool call needs at least one tool");
  const rules: Rule[] = [];
  // Whitespace between JSON tokens, bounded so a model cannot pad forever.
  rules.push({ name: "tc-ws", body: { kind: "repeat", body: { kind: "class", negated: false, ranges: [[32, 32], [10, 10]] }, min: 0, max: 4 } });
  const ws = ref("tc-ws");
  const calls: Expr[] = tools.map((tool, i) => {
    const compiled: Grammar = compileJsonSchema(tool.parameters ?? { type: "object" }).grammar;
    rules.push(...namespaceGrammar(compiled, `tc${i}`));
    const call = seq(lit("{"), ws, lit('"name"'), ws, lit(":"), ws, lit(JSON.stringify(tool.name)), ws, lit(","), ws, lit('"arguments"'), ws, lit(":"), ws, ref(`tc${i}-root`), ws, lit("}"));
    rules.push({ name: `tc${i}-call`, body: call });
    return ref(`tc${i}-call`);
  });
  rules.push({ name: "tc-call", body: calls.length === 1 ? calls[0]! : { kind: "alt", alts: calls } });
  const block = seq(lit(wire.open), ws, ref("tc-call"), ws, lit(wire.close));
  rules.push({ name: "tc-block", body: block });
  const root: Expr = parallel ? seq(ref("tc-block"), { kind: "repeat", body: seq(ws, ref("tc-block")), min: 0, max: null }) : ref("tc-block");
  return printGbnf({ rules: [{ name: "root", body: root }, ...rules] });
}
