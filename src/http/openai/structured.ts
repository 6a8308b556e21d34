// Structured output (features.md 6): `response_format` json_object / json_schema
// and a raw GBNF `grammar` become one GBNF grammar, compiled here in the daemon
// so anything that cannot be enforced is a 400 before generation.
import { checkGbnfText, compileJsonSchema, GbnfSyntaxError, jsonObjectGrammar, SchemaError } from "../../../grammar/index.ts";
import { ApiError, badRequest } from "../errors.ts";

export interface StructuredFields {
  response_format?: { type: string; json_schema?: unknown } | null;
  grammar?: string | null;
}

/**
 * A raw GBNF grammar, checked (including what it would cost llama.cpp's
 * grammar engine: grammar/limits.ts) and printed canonically, so the worker
 * runs exactly the grammar the checks measured.
 */
function checkedGbnf(source: string): string {
  try {
    const { gbnf, errors } = checkGbnfText(source);
    if (errors.length > 0) throw badRequest(`constraint unsatisfiable: ${errors.map((p) => p.message).join("; ")}`, "grammar");
    return gbnf;
  } catch (err) {
    if (err instanceof GbnfSyntaxError) throw badRequest(`constraint unsatisfiable: ${err.message}`, "grammar");
    // A grammar nested deeper than the checker's recursion can follow.
    if (err instanceof RangeError) throw badRequest("constraint unsatisfiable: the grammar is nested too deeply", "grammar");
    throw err;
  }
}

function schemaGrammar(jsonSchema: unknown): string {
  if (typeof jsonSchema !== "object" || jsonSchema === null) {
    throw badRequest("response_format.json_schema must be an object with a schema", "response_format.json_schema");
  }
  const { schema, strict } = jsonSchema as { schema?: unknown; strict?: unknown };
  if (strict !== undefined && strict !== null && typeof strict !== "boolean") {
    throw badRequest("response_format.json_schema.strict must be true or false", "response_format.json_schema.strict");
  }
  if (schema === undefined || schema === null) {
    throw badRequest("response_format of type json_schema needs json_schema.schema", "response_format.json_schema.schema");
  }
  try {
    // Only an explicit strict: false lets the compiler skip keywords it cannot enforce.
    return compileJsonSchema(schema, { strict: strict !== false }).gbnf;
  } catch (err) {
    if (err instanceof RangeError) throw badRequest("constraint unsatisfiable: the schema is nested too deeply", "response_format.json_schema.schema");
    if (err instanceof SchemaError) {
      throw new ApiError(400, err.message, null, `response_format.json_schema.schema${err.path.replaceAll("/", ".")}`);
    }
    throw err;
  }
}

/** The GBNF a request's reply must match, or undefined when it is unconstrained. */
export function grammarOf(req: StructuredFields): string | undefined {
  if (req.grammar !== undefined && req.grammar !== null) return checkedGbnf(req.grammar);
  const format = req.response_format;
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return jsonObjectGrammar();
  if (format.type === "json_schema") return schemaGrammar(format.json_schema);
  throw badRequest(`response_format.type must be text, json_object or json_schema, not '${format.type}'`, "response_format.type");
}
