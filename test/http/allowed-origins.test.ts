// The page origins the main listener lets in (docs/api/security.md#cors): this
// machine's pages and the desktop shells by default, --allow-origin patterns with
// `*` wildcards, and the one list the Origin check and CORS both read.
import { describe, expect, test } from "bun:test";
import { AllowedOrigins, letsInAnySite, originPattern } from "../../src/http/allowed-origins.ts";
import { allowedOrigins, foreignRequestRefusal } from "../../src/http/origin-guard.ts";

const EXTENSION = "chrome-extension://abcdefghijklmnopabcdefghijklmnop";

describe("the default list", () => {
  const origins = new AllowedOrigins();

  test("pages on this machine, any port, http or https", () => {
    for (const origin of [
      "http://localhost",
      "http://localhost:3000",
      "https://localhost:8443",
      "http://127.0.0.1:5173",
      "http://127.8.9.10",
      "http://[::1]:8080",
      "HTTP://LOCALHOST:3000",
    ])
      expect(origins.allows(origin)).toBe(true);
  });

  test("the desktop shells Ollama lets in: Electron, Tauri, VS Code webviews", () => {
    for (const origin of [
      "app://obsidian.md",
      "app://-",
      "file://",
      "tauri://localhost",
      "vscode-webview://1f2e3d4c5b6a",
      "vscode-file://vscode-app",
    ])
      expect(origins.allows(origin)).toBe(true);
  });

  test("web sites, extensions, sandboxed pages and anything not an origin are refused", () => {
    for (const origin of [
      "https://evil.example",
      "http://localhost.evil.example",
      "http://10.0.0.1:8453",
      "http://0.0.0.0:3000",
      EXTENSION,
      "moz-extension://0a1b2c3d",
      "null",
      "",
      "localhost:3000",
      "app://x/path",
      "app://user@x",
      "tauri://x y",
    ])
      expect(origins.allows(origin)).toBe(false);
  });
});

describe("--allow-origin patterns", () => {
  test("an extension's scheme with a wildcard lets in every extension of that browser, and only those", () => {
    const origins = new AllowedOrigins([originPattern("chrome-extension://*")]);
    expect(origins.allows(EXTENSION)).toBe(true);
    expect(origins.allows("moz-extension://0a1b2c3d")).toBe(false);
    expect(origins.allows("https://evil.example")).toBe(false);
  });

  test("a wildcard subdomain: any depth below the domain, not the domain itself nor a look-alike", () => {
    const origins = new AllowedOrigins([originPattern("https://*.example.com")]);
    for (const origin of ["https://app.example.com", "https://a.b.example.com"])
      expect(origins.allows(origin)).toBe(true);
    for (const origin of [
      "https://example.com",
      "http://app.example.com",
      "https://app.example.com:8443",
      "https://app.example.com.evil.test",
      "https://evilexample.com",
    ])
      expect(origins.allows(origin)).toBe(false);
  });

  test("an exact origin is kept as browsers send it: lowercase, no default port, no trailing slash", () => {
    expect(originPattern("HTTPS://App.Example.com:443/")).toBe("https://app.example.com");
    expect(originPattern(" http://app.example:8080 ")).toBe("http://app.example:8080");
    expect(originPattern("Chrome-Extension://ABC")).toBe("chrome-extension://abc");
    expect(originPattern("*")).toBe("*");
    const origins = new AllowedOrigins([originPattern("https://App.Example.com:443")]);
    expect(origins.allows("https://app.example.com")).toBe(true);
    expect(origins.allows("https://app.example.com:8443")).toBe(false);
  });

  test("a port wildcard", () => {
    const origins = new AllowedOrigins([originPattern("http://192.168.1.20:*")]);
    expect(origins.allows("http://192.168.1.20:3000")).toBe(true);
    expect(origins.allows("http://192.168.1.21:3000")).toBe(false);
  });

  test("what is not an origin is refused, saying what is expected", () => {
    for (const bad of ["app.example.com", "https://app.example.com/path", "https://user@app.example", "a b", ""])
      expect(() => originPattern(bad)).toThrow("expects an origin such as");
  });

  test("`*` lets in every origin, `null` included; patterns that match any web site are told apart", () => {
    const any = new AllowedOrigins(["*"]);
    for (const origin of ["https://evil.example", "null", EXTENSION]) expect(any.allows(origin)).toBe(true);
    expect(any.anySite).toBe(true);
    for (const open of ["*", "https://*", "http://*", "*://*", "http*://*"]) expect(letsInAnySite(open)).toBe(true);
    for (const narrow of ["https://*.example.com", "chrome-extension://*", "http://192.168.1.20:*", "app://*"])
      expect(letsInAnySite(narrow)).toBe(false);
    expect(new AllowedOrigins().anySite).toBe(false);
    expect(new AllowedOrigins(["https://*.example.com"]).extra).toEqual(["https://*.example.com"]);
  });
});

describe("one list for the Origin check and CORS", () => {
  test("the Origin check refuses exactly the origins the list does not allow", () => {
    const origins = new AllowedOrigins([originPattern("chrome-extension://*")]);
    const policy = { bind: "127.0.0.1", authenticated: false, origins };
    expect(allowedOrigins(policy)).toBe(origins);
    for (const origin of [EXTENSION, "http://localhost:3000", "tauri://localhost", "https://evil.example", "null"]) {
      const refusal = foreignRequestRefusal(new Request("http://x/v1/models", { headers: { origin } }), policy);
      expect(refusal === undefined).toBe(origins.allows(origin));
      if (refusal) expect(refusal.code).toBe("origin_refused");
    }
  });
});
