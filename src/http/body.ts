// Reads a JSON request body with a size cap that is enforced while streaming,
// so a 100 MiB+ body is refused (413) without being buffered whole.
import { ApiError, MAX_BODY_BYTES, badRequest, payloadTooLarge } from "./errors.ts";

export async function readJsonBody(request: Request, limit = MAX_BODY_BYTES): Promise<unknown> {
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared > limit) throw payloadTooLarge();
  if (!request.body) throw badRequest("request body is empty; expected a JSON object");
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      reader.cancel().catch(() => {});
      throw payloadTooLarge();
    }
    chunks.push(value);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") throw badRequest("request body is empty; expected a JSON object");
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ApiError(400, `request body is not valid JSON: ${(err as Error).message}`);
  }
}
