// A request the server refuses, in no API family's terms: the HTTP status,
// a message for people, a machine code and the field at fault. Everything
// below the HTTP layer throws this; each API family renders it in its own
// envelope (src/http/openai/envelope.ts).

export class RequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** A stable code clients can branch on (`context_length_exceeded`), or null. */
    readonly code: string | null = null,
    /** The request field at fault, as a dotted path (`response_format.json_schema.schema.properties.x`), or null. */
    readonly field: string | null = null,
    /** Headers the reply must carry (`retry-after`). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "RequestError";
  }
}

/** A 400: the request itself is at fault. */
export const invalidRequest = (message: string, field: string | null = null, code: string | null = null) =>
  new RequestError(400, message, code, field);

/** A 400 for media content (images, audio, files) on a runtime that reads text only. */
export const unsupportedMedia = (kind: string, field: string) =>
  new RequestError(
    400,
    `this server's llamacpp runtime does not accept ${kind}: it has no media path`,
    "unsupported_input",
    field,
  );
