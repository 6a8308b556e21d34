// The --key-policy file (docs/api/key-policy.md): reads the JSON list of API
// keys and checks it whole, so a bad file stops the server at startup instead
// of leaving a key that silently never matches or grants more than meant.
// Every refusal names the entry by index (and by name when that name is not
// itself a secret) and never quotes a secret: these messages reach the
// terminal and service logs.
import { readFileSync } from "node:fs";
import { DEFAULT_QOS, QOS_NAMES, type QosClass } from "../../engine/scheduler.ts";
import { parseQos } from "../qos.ts";

export interface PolicyKey {
  /** [A-Za-z0-9._-]+, unique: what logs and metrics show. */
  name: string;
  /** From `key` or from env[key_env]. */
  secret: string;
  /** `class`, default agent (2). */
  qosClass: QosClass;
  /** `max_class`, default = qosClass. */
  maxClass: QosClass;
  batchInvariant: boolean;
  /** Whole number >= 0; 0 = no bucket of its own. */
  rateLimitRpm: number;
  /** Whole number >= 0; 0 = unlimited. */
  maxConcurrent: number;
  admin: boolean;
}

/** A policy file the server refuses to start with; the message is the reason, for people. */
export class KeyPolicyError extends Error {
  override name = "KeyPolicyError";
}

export interface KeyPolicyOptions {
  /** Where `key_env` variables are looked up (process.env in the server). */
  env: Record<string, string | undefined>;
  /** The global --api-key values: no policy secret or name may equal one. */
  apiKeys: readonly string[];
}

const TOP_FIELDS = new Set(["keys"]);
const ENTRY_FIELDS = new Set([
  "name",
  "key",
  "key_env",
  "class",
  "max_class",
  "batch_invariant",
  "rate_limit_rpm",
  "max_concurrent",
  "admin",
]);
const NAME = /^[A-Za-z0-9._-]+$/;
/** The name logs and metrics give a global --api-key (src/http/auth/principal.ts); an entry may not take it. */
const RESERVED_NAME = "api-key";
const CLASSES = `${QOS_NAMES.map((n, i) => `${n} (${i})`).join(", ")}, or an alias (interactive-chat, inline-completion, foreground, foreground-agent, background-agent)`;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Entry = { [k: string]: Json };

const isObject = (v: Json | undefined): v is Entry => typeof v === "object" && v !== null && !Array.isArray(v);

/** The JSON type of a value, for "must be X, got Y" reasons (never the value itself). */
function kind(v: Json): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object") return "an object";
  return `a ${typeof v}`;
}

/**
 * Every string that is or may be a secret, gathered before any entry is
 * checked: a refusal about entry 0 must not quote entry 0's name (or a field
 * name, or a class value) when that text is entry 5's key or an --api-key.
 */
function candidateSecrets(keys: Json[], opts: KeyPolicyOptions): Set<string> {
  const out = new Set(opts.apiKeys.filter((k) => k !== ""));
  for (const e of keys) {
    if (!isObject(e)) continue;
    if (typeof e.key === "string" && e.key !== "") out.add(e.key);
    if (typeof e.key_env === "string") {
      const v = opts.env[e.key_env];
      if (v) out.add(v);
    }
  }
  return out;
}

/** Parses and validates a policy file's text. `apiKeys` are the global --api-key values. */
export function parseKeyPolicy(text: string, opts: KeyPolicyOptions): PolicyKey[] {
  let doc: Json;
  try {
    // Editors on Windows may save a byte-order mark, which JSON.parse refuses.
    doc = JSON.parse(text.replace(/^\uFEFF/, "")) as Json;
  } catch (err) {
    // The parser's message can quote the text it stopped at ("Unexpected
    // identifier "sk"…"), which may be a secret: keep its words, drop its quotes.
    const why = String((err as Error).message ?? err).replace(/"[^"]*"?|'[^']*'?/g, "(…)");
    throw new KeyPolicyError(`the file is not valid JSON: ${why}`);
  }
  if (!isObject(doc)) throw new KeyPolicyError(`the top level must be an object {"keys": [...]}, got ${kind(doc)}`);
  const keys = doc.keys;
  const secrets = candidateSecrets(Array.isArray(keys) ? keys : [], opts);
  // Text from the file may be quoted in a reason unless it is (or may be) a secret.
  const quote = (s: string) => (secrets.has(s) ? "(a value equal to a secret, not shown)" : JSON.stringify(s));

  for (const field of Object.keys(doc)) {
    if (!TOP_FIELDS.has(field))
      throw new KeyPolicyError(`unknown top-level field ${quote(field)}: the file holds only "keys"`);
  }
  if (keys === undefined) throw new KeyPolicyError(`"keys" is missing: the file must list at least one key`);
  if (!Array.isArray(keys)) throw new KeyPolicyError(`"keys" must be an array of key entries, got ${kind(keys)}`);
  if (keys.length === 0)
    throw new KeyPolicyError(`"keys" is empty: list at least one key (an empty policy would lock every client out)`);

  const out: PolicyKey[] = [];
  const labels: string[] = [];
  for (let i = 0; i < keys.length; i++) {
    const e = keys[i]!;
    if (!isObject(e)) throw new KeyPolicyError(`keys[${i}] must be an object, got ${kind(e)}`);
    // The name identifies the entry in every later reason, unless it is a secret itself.
    const rawName = typeof e.name === "string" && NAME.test(e.name) && !secrets.has(e.name) ? e.name : undefined;
    const at = rawName === undefined ? `keys[${i}]` : `keys[${i}] (${JSON.stringify(rawName)})`;
    labels.push(at);
    out.push(parseEntry(e, at, opts, quote));
  }

  // Checks across entries and against --api-key, once every entry is well formed.
  const names = new Map<string, number>();
  const secretOwner = new Map<string, number>();
  const apiKeys = new Set(opts.apiKeys.filter((k) => k !== ""));
  out.forEach((k, i) => {
    const first = names.get(k.name);
    if (first !== undefined)
      throw new KeyPolicyError(`${labels[i]}: the name is already used by keys[${first}]; names must be unique`);
    names.set(k.name, i);
  });
  out.forEach((k, i) => {
    if (apiKeys.has(k.secret)) {
      throw new KeyPolicyError(
        `${labels[i]}: its secret equals an --api-key value; a policy key must have a secret of its own`,
      );
    }
    const first = secretOwner.get(k.secret);
    if (first !== undefined) {
      throw new KeyPolicyError(
        `${labels[i]}: its secret is the same as ${labels[first]}'s; each key needs its own secret (the server could not tell them apart)`,
      );
    }
    secretOwner.set(k.secret, i);
  });
  out.forEach((k, i) => {
    if (apiKeys.has(k.name)) {
      throw new KeyPolicyError(
        `${labels[i]}: its name equals an --api-key value; names are printed in logs and metrics, so a name must not be a secret`,
      );
    }
    const owner = secretOwner.get(k.name);
    if (owner !== undefined) {
      const whose = owner === i ? "its own secret" : `the secret of ${labels[owner]}`;
      throw new KeyPolicyError(
        `${labels[i]}: its name equals ${whose}; names are printed in logs and metrics, so a name must not be a secret`,
      );
    }
  });
  return out;
}

/** One entry's fields, each checked for type and range; `at` names the entry. */
function parseEntry(e: Entry, at: string, opts: KeyPolicyOptions, quote: (s: string) => string): PolicyKey {
  for (const field of Object.keys(e)) {
    if (!ENTRY_FIELDS.has(field)) {
      throw new KeyPolicyError(
        `${at}: unknown field ${quote(field)}; an entry may have ${[...ENTRY_FIELDS].join(", ")}`,
      );
    }
  }

  const name = e.name;
  if (name === undefined)
    throw new KeyPolicyError(`${at}: "name" is missing; every key needs a public name for logs and metrics`);
  if (typeof name !== "string") throw new KeyPolicyError(`${at}: "name" must be a string, got ${kind(name)}`);
  if (!NAME.test(name)) {
    throw new KeyPolicyError(
      `${at}: "name" ${quote(name)} may use only letters, digits, '.', '_' and '-' (and not be empty)`,
    );
  }
  if (name === RESERVED_NAME) {
    throw new KeyPolicyError(
      `${at}: the name "${RESERVED_NAME}" is reserved for the global --api-key in logs and metrics; choose another`,
    );
  }

  const secret = readSecret(e, at, opts);

  const qosClass = e.class === undefined ? DEFAULT_QOS : readClass(e.class, `${at}: "class"`, quote);
  const maxClass = e.max_class === undefined ? qosClass : readClass(e.max_class, `${at}: "max_class"`, quote);
  if (maxClass > qosClass) {
    throw new KeyPolicyError(
      `${at}: "max_class" ${QOS_NAMES[maxClass]} is worse than "class" ${QOS_NAMES[qosClass]}: the key could not even ask for its own class; ` +
        `set "max_class" to ${QOS_NAMES[qosClass]} or better (a lower number), or leave it out to cap the key at its class`,
    );
  }

  return {
    name,
    secret,
    qosClass,
    maxClass,
    batchInvariant: readBool(e.batch_invariant, `${at}: "batch_invariant"`),
    rateLimitRpm: readCount(e.rate_limit_rpm, `${at}: "rate_limit_rpm"`),
    maxConcurrent: readCount(e.max_concurrent, `${at}: "max_concurrent"`),
    admin: readBool(e.admin, `${at}: "admin"`),
  };
}

/** The secret from `key` or from the variable `key_env` names: exactly one of them. */
function readSecret(e: Entry, at: string, opts: KeyPolicyOptions): string {
  const hasKey = e.key !== undefined;
  const hasEnv = e.key_env !== undefined;
  if (hasKey && hasEnv) throw new KeyPolicyError(`${at}: has both "key" and "key_env"; give exactly one`);
  if (!hasKey && !hasEnv)
    throw new KeyPolicyError(
      `${at}: needs a secret: "key" (inline) or "key_env" (the environment variable holding it)`,
    );
  let secret: string;
  if (hasKey) {
    if (typeof e.key !== "string") throw new KeyPolicyError(`${at}: "key" must be a string, got ${kind(e.key!)}`);
    if (e.key === "") throw new KeyPolicyError(`${at}: "key" is empty`);
    secret = e.key;
  } else {
    const env = e.key_env!;
    if (typeof env !== "string" || env === "") {
      throw new KeyPolicyError(
        `${at}: "key_env" must name an environment variable, got ${typeof env === "string" ? "an empty string" : kind(env)}`,
      );
    }
    const value = opts.env[env];
    if (value === undefined)
      throw new KeyPolicyError(`${at}: "key_env" names ${JSON.stringify(env)}, which is not set`);
    if (value === "") throw new KeyPolicyError(`${at}: "key_env" names ${JSON.stringify(env)}, which is empty`);
    secret = value;
  }
  // HTTP trims header values, so a secret with whitespace at either end could
  // never be presented (a trailing newline from `$(cat file)` is the usual cause).
  if (secret.trim() !== secret) {
    throw new KeyPolicyError(
      `${at}: the secret ${hasKey ? 'in "key"' : 'from "key_env"'} begins or ends with whitespace, which HTTP headers drop; no client could present it`,
    );
  }
  if (!isHeaderSafeSecret(secret)) {
    throw new KeyPolicyError(
      `${at}: the secret ${hasKey ? 'in "key"' : 'from "key_env"'} holds a space or a character outside printable ASCII; ${SECRET_CHARACTERS}`,
    );
  }
  return secret;
}

/**
 * Printable ASCII without spaces: what every client sends byte for byte in a
 * header. A non-ASCII key is encoded by one client as UTF-8 and read by the
 * server's parser as latin1, so it would never match.
 */
export function isHeaderSafeSecret(secret: string): boolean {
  return /^[\x21-\x7e]+$/.test(secret);
}

/** Why a secret was refused for its characters. */
export const SECRET_CHARACTERS =
  "keys must be printable ASCII without spaces (characters ! to ~), which every client sends unchanged in a header";

/** A QoS class as parseQos reads it: a name, an alias, or 0-3 as a JSON number or a string. */
function readClass(v: Json, what: string, quote: (s: string) => string): QosClass {
  const raw = typeof v === "string" ? v : typeof v === "number" && Number.isInteger(v) ? String(v) : undefined;
  const qos = raw === undefined ? undefined : parseQos(raw);
  if (qos === undefined) {
    const shown = typeof v === "string" ? quote(v) : typeof v === "number" ? String(v) : kind(v);
    throw new KeyPolicyError(`${what} ${shown} is not a QoS class; accepted: ${CLASSES}`);
  }
  return qos;
}

function readBool(v: Json | undefined, what: string): boolean {
  if (v === undefined) return false;
  if (typeof v !== "boolean") throw new KeyPolicyError(`${what} must be true or false, got ${kind(v)}`);
  return v;
}

/** A whole number >= 0 (0 = no limit); absent = 0. */
function readCount(v: Json | undefined, what: string): number {
  if (v === undefined) return 0;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    const shown = typeof v === "number" ? String(v) : kind(v);
    throw new KeyPolicyError(`${what} must be a whole number >= 0 (0 = no limit), got ${shown}`);
  }
  return v + 0; // -0 reads as 0
}

/** Reads `path` (a missing/unreadable file is a KeyPolicyError naming it) and parses it. */
export function readKeyPolicy(path: string, opts: KeyPolicyOptions): PolicyKey[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT"
        ? "no such file"
        : code === "EACCES"
          ? "permission denied"
          : code === "EISDIR"
            ? "it is a folder"
            : (code ?? String(err));
    throw new KeyPolicyError(`${path}: cannot read the file (${why})`);
  }
  try {
    return parseKeyPolicy(text, opts);
  } catch (err) {
    // The caller adds the flag's name; the path tells which file.
    if (err instanceof KeyPolicyError) throw new KeyPolicyError(`${path}: ${err.message}`);
    throw err;
  }
}
