// What a chat request's `tools` and `tool_choice` mean for generation
// (api.md 5.3): whether calls are parsed out of the reply, and the grammar a
// forced choice ("required" or a named function) is held to.
import type { ToolDialect } from "../../codec/tool-dialects/index.ts";
import type { ToolSpec } from "../../codec/tool-grammar.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import { badRequest } from "../errors.ts";
import type { ChatRequest } from "./chat-schema.ts";

export interface ToolPlan {
  /** Parse the reply with this dialect; undefined when nothing is parsed out of it. */
  dialect?: ToolDialect;
  /** The grammar a forced choice holds the reply to. */
  grammar?: string;
  /** With tool_choice "auto": the grammar waits for this call opener (a lazy grammar). */
  trigger?: string;
}

function toolSpecs(req: ChatRequest): ToolSpec[] {
  return (req.tools ?? [])
    .filter((t) => t.type === "function" && t.function)
    .map((t) => ({ name: t.function!.name, parameters: (t.function as { parameters?: unknown }).parameters ?? { type: "object" } }));
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
  const parsed = dialect?.alwaysParse ? { dialect } : {};
  if (req.tool_choice === "none") return parsed;
  const forced = forcedChoice(req.tool_choice);
  // A forced call is never served unconstrained (api.md 5.3).
  if (forced && tools.length === 0) throw badRequest("tool_choice forces a call, but tools declares no function", "tool_choice");
  if (tools.length === 0) return parsed;
  const parallel = req.parallel_tool_calls !== false;
  if (!forced) {
    if (!dialect) return {};
    if (!dialect.trigger) return { dialect };
    // Under auto only a forced choice's grammar must compile: otherwise calls are parsed, not held.
    try {
      return { dialect, grammar: dialect.forcedGrammar(tools, parallel), trigger: dialect.trigger };
    } catch {
      return { dialect };
    }
  }
  if (!dialect) throw badRequest(`constraint unsatisfiable: model '${model.id}' has no tool-call format superfluid can constrain`, "tool_choice");
  const chosen = forced === "required" ? tools : tools.filter((t) => t.name === forced);
  return { dialect, grammar: compileCalls(dialect, chosen, parallel) };
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
