// A reply's constraint (docs/api/openai.md#structured-output): a JSON object,
// a JSON Schema or a raw GBNF grammar becomes one GBNF grammar, compiled here
// in the daemon so anything that cannot be enforced is refused before
// generation.
import {
  checkGbnfText,
  compileJsonSchema,
  GbnfSyntaxError,
  jsonObjectGrammar,
  SchemaError,
} from "../../grammar/index.ts";
import { invalidRequest } from "../daemon/request-error.ts";

export type Constraint =
  | { type: "json_object" }
  /** `strict: false` lets the compiler skip keywords it cannot enforce. `field` names the schema in errors. */
  | { type: "json_schema"; schema: unknown; strict: boolean; field: string }
  | { type: "gbnf"; grammar: string; field: string };

/**
 * A raw GBNF grammar, checked (including what it would cost llama.cpp's
 * grammar engine: grammar/limits.ts) and printed canonically, so the worker
 * runs exactly the grammar the checks measured.
 */
function checkedGbnf(source: string, field: string): string {
  try {
    const { gbnf, errors } = checkGbnfText(source);
    if (errors.length > 0)
      throw invalidRequest(`constraint unsatisfiable: ${errors.map((p) => p.message).join("; ")}`, field);
    return gbnf;
  } catch (err) {
    if (err instanceof GbnfSyntaxError) throw invalidRequest(`constraint unsatisfiable: ${err.message}`, field);
    // A grammar nested deeper than the checker's recursion can follow.
    if (err instanceof RangeError)
      throw invalidRequest("constraint unsatisfiable: the grammar is nested too deeply", field);
    throw err;
  }
}

function schemaGrammar(schema: unknown, strict: boolean, field: string): string {
  try {
    return compileJsonSchema(schema, { strict }).gbnf;
  } catch (err) {
    if (err instanceof RangeError)
      throw invalidRequest("constraint unsatisfiable: the schema is nested too deeply", field);
    if (err instanceof SchemaError) throw invalidRequest(err.message, `${field}${err.path.replaceAll("/", ".")}`);
    throw err;
  }
}

/** The GBNF the reply must match. */
export function constraintGrammar(c: Constraint): string {
  if (c.type === "gbnf") return checkedGbnf(c.grammar, c.field);
  if (c.type === "json_object") return jsonObjectGrammar();
  return schemaGrammar(c.schema, c.strict, c.field);
}
