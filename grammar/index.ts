// Public API of the grammar toolkit: GBNF parsing/printing/checking, the
// regex translator and the JSON Schema compiler. Nothing here depends on the
// rest of the project.

export type { CodeRange, Expr, Grammar, Rule, SourceLoc } from "./gbnf/ast.ts";
export { sourceLocation } from "./gbnf/ast.ts";
export { GbnfSyntaxError, parseGbnf } from "./gbnf/parse.ts";
export { printExpr, printGbnf } from "./gbnf/print.ts";
export { namespaceGrammar } from "./gbnf/namespace.ts";
export type { CheckOptions, GbnfProblem, GbnfProblemCode } from "./gbnf/check.ts";
export { checkGbnf, checkGbnfText, gbnfErrors } from "./gbnf/check.ts";
export type { GrammarLimits } from "./limits.ts";
export { DEFAULT_LIMITS } from "./limits.ts";
export { RegexError } from "./regex/parse.ts";
export { regexToGbnf } from "./regex/translate.ts";
export type { CompileOptions, CompileResult } from "./schema/compile.ts";
export { compileJsonSchema, jsonObjectGrammar } from "./schema/compile.ts";
export { CompileBudget } from "./schema/budget.ts";
export type { SchemaErrorKind } from "./schema/errors.ts";
export { SchemaError } from "./schema/errors.ts";
