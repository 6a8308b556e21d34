// The error a chat template raises: it does not parse, it fails to render,
// or it refused the conversation itself with raise_exception.

/** An error from a chat template: a parse error, a render error, or the template's own raise_exception. */
export class TemplateError extends Error {
  /**
   * "raised": the template called raise_exception (message is the template's); "render"/"parse": the template failed.
   */
  readonly kind: "raised" | "render" | "parse";
  constructor(message: string, kind: "raised" | "render" | "parse", options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TemplateError";
    this.kind = kind;
  }
}
