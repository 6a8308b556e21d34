// Errors as the HTTP layer sees them: the request-size limit, and any thrown
// value as an error reply (src/pipeline/request-failure.ts maps it to a
// RequestError). Each API family renders a RequestError in its own envelope
// (families.ts picks one by route).
import { RequestError } from "../daemon/request-error.ts";
import { asRequestError } from "../pipeline/request-failure.ts";

export const MAX_BODY_BYTES = 100 * 1024 * 1024;

export const payloadTooLarge = () =>
  new RequestError(
    413,
    `request body is larger than the limit of ${MAX_BODY_BYTES} bytes (100 MiB)`,
    "payload_too_large",
  );

/** Any thrown value as an error reply, its body in an API family's envelope. */
export function errorReply(err: unknown, bodyOf: (err: RequestError) => unknown): Response {
  const e = asRequestError(err);
  return Response.json(bodyOf(e), { status: e.status, headers: e.headers });
}
