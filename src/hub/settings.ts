// Where the Hugging Face Hub is and how to reach it, read from the environment
// the way huggingface_hub and llama.cpp read it (docs/cli.md#pulling-models):
// the endpoint (MODEL_ENDPOINT, else HF_ENDPOINT), the cache folder
// (HF_HUB_CACHE, else HF_HOME/hub), the token (HF_TOKEN, else the token file),
// offline mode (HF_HUB_OFFLINE) and the proxies (HTTPS_PROXY, HTTP_PROXY,
// NO_PROXY). Read once per pull, from an env a test can hand in.
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export type Env = Record<string, string | undefined>;

export const DEFAULT_ENDPOINT = "https://huggingface.co";

export interface HubSettings {
  /** The Hub's base URL, no trailing slash. */
  endpoint: string;
  /** The cache root that holds `models--{org}--{repo}` folders. */
  cacheDir: string;
  /** The bearer token, sent to the Hub's own host only. */
  token?: string;
  /** No request at all: references resolve through the cache's refs/ and snapshots/. */
  offline: boolean;
  /** The proxy a URL goes through, or undefined for a direct connection. */
  proxyFor(url: string): string | undefined;
}

/** huggingface_hub's truthy spellings of a boolean variable. */
export function envFlag(value: string | undefined): boolean {
  return ["1", "on", "yes", "true"].includes((value ?? "").trim().toLowerCase());
}

function hfHome(env: Env): string {
  return env.HF_HOME ?? join(env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "huggingface");
}

/** The cache root huggingface_hub uses. */
export function hubCacheDir(env: Env): string {
  return env.HF_HUB_CACHE ?? join(hfHome(env), "hub");
}

/** HF_TOKEN, else the token file (HF_TOKEN_PATH, else HF_HOME/token) when it can be read. */
export function hubToken(env: Env): string | undefined {
  const direct = env.HF_TOKEN?.trim();
  if (direct) return direct;
  try {
    const text = readFileSync(env.HF_TOKEN_PATH ?? join(hfHome(env), "token"), "utf8").trim();
    return text === "" ? undefined : text;
  } catch {
    return undefined;
  }
}

/**
 * NO_PROXY as curl reads it: `*` for every host, else a comma list of host names and domain suffixes
 * (`.example.com` and `example.com` both match `a.example.com`), each optionally with `:port`.
 */
export function bypassesProxy(url: URL, noProxy: string | undefined): boolean {
  if (!noProxy) return false;
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  for (const raw of noProxy.split(",")) {
    const entry = raw.trim().toLowerCase();
    if (entry === "") continue;
    if (entry === "*") return true;
    const m = /^(.*?)(?::(\d+))?$/.exec(entry)!;
    const name = m[1]!.replace(/^\*?\./, "").replace(/^\[|\]$/g, "");
    if (m[2] !== undefined && m[2] !== port) continue;
    if (host === name || host.endsWith(`.${name}`)) return true;
  }
  return false;
}

/** The proxy for a URL: HTTPS_PROXY for https, HTTP_PROXY for http (either spelling case), unless NO_PROXY says not. */
export function proxyFor(url: string, env: Env): string | undefined {
  const u = new URL(url);
  const pick = (...names: string[]) => names.map((n) => env[n]).find((v) => v !== undefined && v !== "");
  const proxy =
    u.protocol === "https:"
      ? pick("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
      : pick("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy");
  if (proxy === undefined) return undefined;
  if (bypassesProxy(u, pick("NO_PROXY", "no_proxy"))) return undefined;
  return proxy;
}

export function hubSettings(env: Env = process.env, overrides: { offline?: boolean } = {}): HubSettings {
  const endpoint = (env.MODEL_ENDPOINT || env.HF_ENDPOINT || DEFAULT_ENDPOINT).replace(/\/+$/, "");
  const token = hubToken(env);
  return {
    endpoint,
    cacheDir: hubCacheDir(env),
    ...(token === undefined ? {} : { token }),
    offline: overrides.offline === true || envFlag(env.HF_HUB_OFFLINE),
    proxyFor: (url) => proxyFor(url, env),
  };
}
