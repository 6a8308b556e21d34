// The API families served, and whose error envelope a reply carries: the
// family that owns the path's prefix, else OpenAI's (the server's own
// routes, /health and the like, answer in it too). A new family is one
// folder under src/http/ and one entry here.
import { errorReply } from "./errors.ts";
import type { ApiFamily } from "./family.ts";
import { anthropicFamily } from "./anthropic/family.ts";
import { ollamaFamily } from "./ollama/family.ts";
import { openaiFamily } from "./openai/family.ts";

export const FAMILIES: readonly ApiFamily[] = [openaiFamily, anthropicFamily, ollamaFamily];

const DEFAULT_FAMILY = openaiFamily;

export function familyOf(path: string): ApiFamily {
  let best: ApiFamily | undefined;
  let bestLength = -1;
  for (const family of FAMILIES) {
    for (const prefix of family.prefixes) {
      if (path.startsWith(prefix) && prefix.length > bestLength) [best, bestLength] = [family, prefix.length];
    }
  }
  return best ?? DEFAULT_FAMILY;
}

/** Any thrown value as the error reply of the family that owns `path`. */
export function errorResponse(path: string, err: unknown): Response {
  return errorReply(err, familyOf(path).errorBody);
}
