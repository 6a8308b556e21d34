// The page origins the main listener answers (docs/api/security.md#origin-and-host):
// one list that both the Origin check (origin-guard.ts) and CORS (cors.ts) ask, so
// an origin the check lets in is always answered with CORS headers and one it
// refuses never is. The --web listener keeps its own list (src/web/auth.ts).
//
// By default: pages on this machine (http(s) on a loopback name, any port) and the
// local desktop shells Ollama lets in by default (Electron and Tauri apps, VS Code
// webviews). No web site can send those shells' origins: a browser gives a page the
// origin of the site it came from, so only software already on this machine has them.
import { isLoopbackName } from "../runtime/loopback.ts";

/** The origins of local desktop shells, let in by default as Ollama does (OLLAMA_ORIGINS). */
export const DESKTOP_APP_ORIGINS = [
  "app://*",
  "file://*",
  "tauri://*",
  "vscode-webview://*",
  "vscode-file://*",
] as const;

/**
 * An origin as a browser serializes one (`scheme://host[:port]`, lowercase), custom schemes
 * (`chrome-extension://id`) included; a path, credentials or spaces never appear in one.
 */
const ORIGIN_SHAPE = /^[a-z][a-z0-9+.-]*:\/\/[^/?#@\s]*$/;

/** What a pattern's `*` stands for: any run of the characters an origin may hold after its scheme. */
const WILDCARD = "[^/?#@\\s]*";

function patternRegExp(pattern: string): RegExp {
  const parts = pattern.split("*").map((p) => p.replace(/[.+?^${}()|[\]\\/]/g, "\\$&"));
  return new RegExp(`^${parts.join(WILDCARD)}$`);
}

/**
 * A pattern as --allow-origin and SUPERFLUID_ALLOW_ORIGINS take it, checked and normalised:
 * `*`, or `scheme://host[:port]` where `*` stands for any run of characters
 * (`chrome-extension://*`, `https://*.example.com`, `http://192.168.1.20:*`). An http(s)
 * origin without a wildcard is kept as browsers send it (lowercase, no default port).
 * Throws an Error saying what is wrong.
 */
export function originPattern(raw: string): string {
  const pattern = raw.trim().toLowerCase().replace(/\/$/, "");
  if (pattern === "*") return pattern;
  if (!ORIGIN_SHAPE.test(pattern.replaceAll("*", "x"))) {
    throw new Error(
      `expects an origin such as https://app.example.com, chrome-extension://* or https://*.example.com ` +
        `(scheme://host[:port], no path), or *; got '${raw}'`,
    );
  }
  if (!pattern.includes("*") && /^https?:/.test(pattern)) return new URL(pattern).origin;
  return pattern;
}

/** Sites no pattern names on purpose: a pattern that matches both lets in pages from anywhere on the web. */
const UNRELATED_SITES = [
  ["https://superfluid-probe.example", "https://another-probe.test"],
  ["http://superfluid-probe.example", "http://another-probe.test"],
] as const;

/** Whether a pattern lets in pages from any web site (`*`, `https://*`, `*://*`): allowed only with a key. */
export function letsInAnySite(pattern: string): boolean {
  if (pattern === "*") return true;
  const re = patternRegExp(pattern);
  return UNRELATED_SITES.some((sites) => sites.every((site) => re.test(site)));
}

/** A page on this machine: http(s) on a loopback name, any port. */
function isLoopbackPage(origin: string): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  return (url.protocol === "http:" || url.protocol === "https:") && isLoopbackName(url.hostname);
}

export class AllowedOrigins {
  /** The patterns besides this machine's pages, the desktop shells first. */
  readonly patterns: readonly string[];
  private readonly matchers: readonly RegExp[];
  private readonly anyOrigin: boolean;

  /** `listed`: patterns as originPattern returns them (--allow-origin), and exact origins (--web-origin). */
  constructor(listed: readonly string[] = []) {
    this.patterns = [...new Set([...DESKTOP_APP_ORIGINS, ...listed])];
    this.anyOrigin = this.patterns.includes("*");
    this.matchers = this.patterns.filter((p) => p !== "*").map(patternRegExp);
  }

  /** The patterns given besides the defaults, in order. */
  get extra(): string[] {
    return this.patterns.filter((p) => !(DESKTOP_APP_ORIGINS as readonly string[]).includes(p));
  }

  /** Whether some pattern lets in pages from any web site (logged loudly at startup). */
  get anySite(): boolean {
    return this.patterns.some(letsInAnySite);
  }

  /** Whether a request whose `Origin` header is `origin` may be answered (`*` lets in `null` too). */
  allows(origin: string): boolean {
    if (this.anyOrigin || isLoopbackPage(origin)) return true;
    const o = origin.toLowerCase();
    return ORIGIN_SHAPE.test(o) && this.matchers.some((m) => m.test(o));
  }
}
