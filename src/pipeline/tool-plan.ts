// What a job's tools and tool choice mean for generation
// (docs/api/openai.md#tools): whether calls are parsed out of the reply, and
// the grammar a forced choice ("required" or a named function) is held to.
import type { ToolDialect } from "../codec/tool-dialects/index.ts";
import type { ToolSpec } from "../codec/tool-grammar.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import { SchemaError } from "../../grammar/index.ts";
import { contentKey, Lru } from "./lru.ts";
import { invalidRequest } from "../daemon/request-error.ts";

/** none: no call; auto: the model decides; required: at least one call; {name}: a call to that function. */
export type ToolChoice = "none" | "auto" | "required" | { name: string };

export interface ToolPlan {
  /** Parse the reply with this dialect; undefined when nothing is parsed out of it. */
  dialect?: ToolDialect;
  /** The grammar a forced choice holds the reply to. */
  grammar?: string;
  /** With tool_choice "auto": the grammar waits for this call opener (a lazy grammar). */
  trigger?: string;
  /**
   * Whether the reply may make calls. When not (no tools, or tool_choice
   * "none") the wire's call openers are never sampled, and calls a parsed wire
   * still finds are dropped: neither a call nor its markup reaches the reply.
   */
  callsAllowed: boolean;
}

export function toolPlan(model: ServedModel, tools: ToolSpec[], choice: ToolChoice, parallel: boolean): ToolPlan {
  const dialect = model.toolDialect;
  // Wires that carry reasoning and content channels are parsed whatever the tools.
  const parsed = dialect?.alwaysParse ? { dialect, callsAllowed: false } : { callsAllowed: false };
  if (choice === "none") return parsed;
  const forced = choice === "required" ? "required" : typeof choice === "object" ? choice.name : undefined;
  // A forced call is never served unconstrained.
  if (forced && tools.length === 0)
    throw invalidRequest("tool_choice forces a call, but tools declares no function", "tool_choice");
  if (tools.length === 0) return parsed;
  if (!forced) {
    if (!dialect) return { callsAllowed: true };
    if (!dialect.trigger) return { dialect, callsAllowed: true };
    // Under auto a schema the compiler cannot enforce is tolerated (calls are then
    // parsed, not held); one over the compile budget is refused.
    try {
      return { dialect, grammar: callGrammar(dialect, tools, parallel), trigger: dialect.trigger, callsAllowed: true };
    } catch (err) {
      if (err instanceof SchemaError && err.kind === "limit") throw invalidRequest(err.message, "tools");
      return { dialect, callsAllowed: true };
    }
  }
  if (!dialect)
    throw invalidRequest(
      `constraint unsatisfiable: model '${model.id}' has no tool-call format superfluid can constrain`,
      "tool_choice",
    );
  const chosen = forced === "required" ? tools : tools.filter((t) => t.name === forced);
  return { dialect, grammar: compileCalls(dialect, chosen, parallel), callsAllowed: true };
}

/**
 * Call grammars already compiled, by dialect, tools and parallelism. Agents
 * send the same tools every turn, and compiling a coding agent's dozen tool
 * schemas takes 25-50 ms (120 ms cold) on the event loop; a repeat is a
 * lookup. Least recently used first out; a failed compile is not kept.
 */
const compiledGrammars = new Lru<string>(32);

function callGrammar(dialect: ToolDialect, tools: ToolSpec[], parallel: boolean): string {
  const key = contentKey([dialect.name, parallel, tools.map((t) => [t.name, t.parameters])]);
  const hit = compiledGrammars.get(key);
  if (hit !== undefined) return hit;
  const grammar = dialect.forcedGrammar(tools, parallel);
  compiledGrammars.set(key, grammar);
  return grammar;
}

/** The dialect's grammar for calls to these tools; a schema it cannot honour is a 400. */
function compileCalls(dialect: ToolDialect, tools: ToolSpec[], parallel: boolean): string {
  try {
    return callGrammar(dialect, tools, parallel);
  } catch (err) {
    const message = (err as Error).message;
    throw invalidRequest(
      message.startsWith("constraint unsatisfiable") ? message : `constraint unsatisfiable: ${message}`,
      "tools",
    );
  }
}
