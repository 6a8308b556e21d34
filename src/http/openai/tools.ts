// What a chat request's `tools` and `tool_choice` mean for generation
// (api.md 5.3): whether calls are parsed out of the reply, and the grammar a
// forced choice ("required" or a named function) is held to.
import type { ToolDialect } from "../../codec/tool-dialects/index.ts";
import type { ToolSpec } from "../../codec/tool-grammar.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import { SchemaError } from "../../../grammar/index.ts";
import { badRequest } from "../errors.ts";
import type { ChatRequest } from "./chat-schema.ts";

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

function toolSpecs(req: ChatRequest): ToolSpec[] {
  return (req.tools ?? []).flatMap((t, i) => {
    if (t.type !== "function" || !t.function) return [];
    const parameters = (t.function as { parameters?: unknown }).parameters ?? { type: "object" };
    if (typeof parameters !== "boolean" && (typeof parameters !== "object" || parameters === null || Array.isArray(parameters))) {
      throw badRequest("tool parameters must be a JSON Schema (an object)", `tools[${i}].function.parameters`);
    }
    return [{ name: t.function.name, parameters }];
  });
}

/** The forced function's name, "required" for any, or undefined (auto; unknown values fall back to it). */
function forcedChoice(choice: unknown): string | undefined {
  if (choice === "required") return "required";
  const named = choice as { type?: unknown; function?: { name?: unknown } } | null | undefined;
  return named?.type === "function" && typeof named.function?.name === "string" ? named.function.name : undefined;
}

export function toolPlan(model: ServedModel, req: ChatRequest): ToolPlan {
  const dialect = model.toolDialect;
  const tools = toolSpecs(req);
  // Wires that carry reasoning and content channels are parsed whatever the tools.
  const parsed = dialect?.alwaysParse ? { dialect, callsAllowed: false } : { callsAllowed: false };
  if (req.tool_choice === "none") return parsed;
  const forced = forcedChoice(req.tool_choice);
  // A forced call is never served unconstrained (api.md 5.3).
  if (forced && tools.length === 0) throw badRequest("tool_choice forces a call, but tools declares no function", "tool_choice");
  if (tools.length === 0) return parsed;
  const parallel = req.parallel_tool_calls !== false;
  if (!forced) {
    if (!dialect) return { callsAllowed: true };
    if (!dialect.trigger) return { dialect, callsAllowed: true };
    // Under auto a schema the compiler cannot enforce is tolerated (calls are then
    // parsed, not held); one that is no schema at all, or over the compile budget, is refused.
    try {
      return { dialect, grammar: dialect.forcedGrammar(tools, parallel), trigger: dialect.trigger, callsAllowed: true };
    } catch (err) {
      if (err instanceof SchemaError && err.kind === "limit") throw badRequest(err.message, "tools");
      return { dialect, callsAllowed: true };
    }
  }
  if (!dialect) throw badRequest(`constraint unsatisfiable: model '${model.id}' has no tool-call format superfluid can constrain`, "tool_choice");
  const chosen = forced === "required" ? tools : tools.filter((t) => t.name === forced);
  return { dialect, grammar: compileCalls(dialect, chosen, parallel), callsAllowed: true };
}

/** The dialect's grammar for calls to these tools; a schema it cannot honour is a 400. */
function compileCalls(dialect: ToolDialect, tools: ToolSpec[], parallel: boolean): string {
  try {
    return dialect.forcedGrammar(tools, parallel);
  } catch (err) {
    const message = (err as Error).message;
    throw badRequest(message.startsWith("constraint unsatisfiable") ? message : `constraint unsatisfiable: ${message}`, "tools");
  }
}
