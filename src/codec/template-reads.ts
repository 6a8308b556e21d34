// Which top-level variables a chat template reads: used to report whether a
// model supports enable_thinking / reasoning_effort.
import { parse, tokenize as lexJinja } from "@huggingface/jinja";

/**
 * Whether the template source reads the top-level variable `name`, e.g.
 * `templateReads(src, "enable_thinking")`. Looks at the parsed template, so
 * `message.enable_thinking` or a filter of that name do not count; a source
 * that does not parse is scanned as text instead.
 */
export function templateReads(source: string, name: string): boolean {
  let program: unknown;
  try {
    program = parse(lexJinja(source, { lstrip_blocks: true, trim_blocks: true }));
  } catch {
    return new RegExp(`\\b${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\b`).test(source);
  }
  return identifierRead(program, name);
}

type Node = { type?: unknown; [key: string]: unknown };

/** Walks the jinja AST for an Identifier `name` in a position that reads a variable. */
export function identifierRead(root: unknown, name: string): boolean {
  const seen = new Set<unknown>();
  const visit = (value: unknown): boolean => {
    if (value === null || typeof value !== "object" || seen.has(value)) return false;
    seen.add(value);
    if (Array.isArray(value)) return value.some(visit);
    if (value instanceof Map) {
      for (const [k, v] of value) if (visit(k) || visit(v)) return true;
      return false;
    }
    const node = value as Node;
    if (node.type === "Identifier") return node.value === name;
    if (
      (node.type === "FilterExpression" || node.type === "FilterStatement") &&
      isNode(node.filter, "CallExpression")
    ) {
      // `x | tojson(indent=4)`: the callee names a filter; its arguments are expressions.
      if (visit(node.filter.args)) return true;
    }
    for (const [key, child] of Object.entries(node)) {
      if (skipsChild(node, key)) continue;
      if (visit(child)) return true;
    }
    return false;
  };
  return visit(root);
}

function isNode(value: unknown, type: string): value is Node {
  return value !== null && typeof value === "object" && (value as Node).type === type;
}

/** Identifiers that name something other than a variable: attributes, filters, tests, keyword names, macro names. */
function skipsChild(node: Node, key: string): boolean {
  switch (node.type) {
    case "MemberExpression":
      return key === "property" && node.computed !== true;
    case "FilterExpression":
    case "FilterStatement":
      return key === "filter";
    case "TestExpression":
      return key === "test";
    case "KeywordArgumentExpression":
      return key === "key";
    case "Macro":
      return key === "name";
    default:
      return false;
  }
}
