// --auth for the fuzz run (bench/fuzz/fuzz.ts): the server gets a key policy (a
// user key with limits, an admin key) and a global --api-key, and each
// request carries one of no key, a wrong key, the user key, the admin key or
// the global key, as `Authorization: Bearer` or `X-Api-Key`
// (docs/api/security.md#keys). What a key changes in the statuses a request
// may get is `authExpect`.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { pick, type KeyChoice, type Rng, type Spec } from "./fuzz-kit.ts";

export const KEYS = {
  user: "sk-fuzz-user-4c1f0e9a7b2d",
  admin: "sk-fuzz-admin-93e8d1a06c5b",
  global: "sk-fuzz-global-2a7f5c3e81d4",
} as const;

/** The user key's limits: at 16 requests in flight some meet them (429). */
export const USER_LIMITS = { rate_limit_rpm: 90, max_concurrent: 4 };

export function policyFile(): string {
  return JSON.stringify({
    keys: [
      { name: "fuzz-user", key: KEYS.user, ...USER_LIMITS },
      {
        name: "fuzz-admin",
        key: KEYS.admin,
        admin: true,
        class: "agent",
        max_class: "interactive",
        batch_invariant: false,
      },
    ],
  });
}

/** Whether this checkout's `serve` takes --key-policy (the flags land separately from this bench). */
export function authSupported(): boolean {
  const out = spawnSync(process.execPath, [join(import.meta.dir, "../../src/main.ts"), "serve", "--help"], {
    encoding: "utf8",
    timeout: 60_000,
  });
  return /--key-policy\b/.test(`${out.stdout}${out.stderr}`) && /--api-key\b/.test(`${out.stdout}${out.stderr}`);
}

/** The scope whose objects a key sees ("nobody" for no key or a wrong one: it never gets past the gate). */
export function scopeOfKey(key: KeyChoice | undefined): string {
  if (key === undefined) return "open";
  return key === "none" || key === "wrong" ? "nobody" : key;
}

/** The header a key goes in. */
export function keyHeader(
  key: Exclude<KeyChoice, "none" | "wrong">,
  style: "bearer" | "x-api-key" = "bearer",
): Record<string, string> {
  return style === "bearer" ? { authorization: `Bearer ${KEYS[key]}` } : { "x-api-key": KEYS[key] };
}

/** The spec with a key drawn for it (raw requests go without one). */
export function withKey(r: Rng, spec: Spec): Spec {
  if (spec.raw) return { ...spec, key: "none" };
  const key = pick<KeyChoice>(r, ["none", "wrong", "user", "user", "admin", "global", "global"]);
  const style = pick(r, ["bearer", "x-api-key"] as const);
  let header: Record<string, string> = {};
  if (key === "wrong")
    header =
      style === "bearer"
        ? { authorization: `Bearer ${pick(r, ["sk-wrong", KEYS.user.slice(0, -1), `${KEYS.admin}x`, "fuzz-user"])}` }
        : { "x-api-key": pick(r, ["sk-wrong", KEYS.global.toUpperCase(), " "]) };
  else if (key === "none")
    header = pick<Record<string, string>>(r, [
      {},
      {},
      { authorization: "Bearer" },
      { authorization: "Basic dXNlcjpwYXNz" },
      { authorization: "" },
    ]);
  else header = keyHeader(key, style);
  // The key replaces any Authorization the spec carried; other headers stay.
  const headers = {
    ...Object.fromEntries(
      Object.entries(spec.headers ?? {}).filter(([k]) => k !== "authorization" && k !== "x-api-key"),
    ),
    ...header,
  };
  return { ...spec, key, headers };
}

/** Statuses the listener or the Origin/Host check gives before a key is looked at. */
const BEFORE_THE_GATE = new Set([400, 403, 413, 414, 431, 505]);

/** The statuses a request with its key may get, from those it expects without keys. */
export function authExpect(spec: Spec, base: number[]): number[] {
  const union = (...xs: number[][]) => [...new Set(xs.flat())];
  const key = spec.key;
  if (key === undefined || spec.open) return base;
  if (spec.raw) return union(base, [401]);
  if (key === "none" || key === "wrong")
    return union(
      [401],
      base.filter((s) => BEFORE_THE_GATE.has(s)),
    );
  if (key === "admin" || key === "global") return base;
  // The user key: no admin routes, QoS headers held to its class, its rate and concurrency limits.
  if (spec.admin)
    return union(
      [403, 429],
      base.filter((s) => BEFORE_THE_GATE.has(s)),
    );
  const qos = Object.keys(spec.headers ?? {}).some((h) => h.toLowerCase() === "x-superfluid-qos");
  return union(base, [429], qos ? [403] : []);
}
