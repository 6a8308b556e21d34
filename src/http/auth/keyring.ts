// The keys a server accepts (docs/api/security.md#keys): the global --api-key
// values and the --key-policy entries, each kept only as a SHA-256 digest.
// A presented key is hashed and compared with every digest in constant time,
// so neither the comparison nor the number of keys tried tells a caller how
// close a guess came.
import { createHash, timingSafeEqual } from "node:crypto";
import type { PolicyKey } from "./key-policy.ts";
import type { Principal } from "./principal.ts";

/** The name a global --api-key has in logs and metrics. */
export const GLOBAL_KEY_NAME = "api-key";

const digest = (secret: string) => createHash("sha256").update(secret, "utf8").digest();

/**
 * The keys a request carries: `Authorization: Bearer <key>` and `X-Api-Key: <key>` (Anthropic's clients send the
 * latter).
 */
export function presentedKeys(headers: Headers): string[] {
  const keys: string[] = [];
  const bearer = /^bearer[ \t]+(\S.*)$/i.exec(headers.get("authorization")?.trim() ?? "");
  if (bearer) keys.push(bearer[1]!.trim());
  const apiKey = headers.get("x-api-key")?.trim();
  if (apiKey) keys.push(apiKey);
  return keys;
}

export class KeyRing {
  private readonly entries: { digest: Buffer; principal: Principal }[];

  constructor(apiKeys: readonly string[], policy: readonly PolicyKey[]) {
    // A global key is the operator's: admin, no limits of its own, sharing the stored objects of a keyless server.
    const global = (secret: string) => ({
      digest: digest(secret),
      principal: {
        name: GLOBAL_KEY_NAME,
        fromPolicy: false,
        scope: undefined,
        admin: true,
        rateLimitRpm: 0,
        maxConcurrent: 0,
      },
    });
    const listed = (k: PolicyKey) => ({
      digest: digest(k.secret),
      principal: {
        name: k.name,
        fromPolicy: true,
        scope: k.name,
        admin: k.admin,
        qosClass: k.qosClass,
        maxClass: k.maxClass,
        batchInvariant: k.batchInvariant,
        rateLimitRpm: k.rateLimitRpm,
        maxConcurrent: k.maxConcurrent,
      },
    });
    this.entries = [...apiKeys.map(global), ...policy.map(listed)];
  }

  /** Requests need a key (some key is configured). */
  get enabled(): boolean {
    return this.entries.length > 0;
  }

  /** The policy keys' names, for metrics that list every key. */
  get policyNames(): string[] {
    return this.entries.filter((e) => e.principal.fromPolicy).map((e) => e.principal.name);
  }

  /** Whose key the request presents; undefined when it presents none that matches. */
  identify(headers: Headers): Principal | undefined {
    let found: Principal | undefined;
    for (const key of presentedKeys(headers)) {
      const presented = digest(key);
      // Every digest is compared, a match or not: the time taken does not depend on which key matched.
      for (const entry of this.entries) {
        if (timingSafeEqual(presented, entry.digest) && found === undefined) found = entry.principal;
      }
    }
    return found;
  }
}
