// The chat page's three files, embedded in the module graph as text so that
// `bun build --compile` carries them inside the binary (no files on disk to
// find at run time). The listener serves them at `/`, `/app.js` and
// `/style.css` (docs/api/web-page.md).
import html from "./index.html" with { type: "text" };
import script from "./app.js" with { type: "text" };
import css from "./style.css" with { type: "text" };

// The page's own scripts and styles only, connections back to its own origin
// (CSP 3 lets 'self' match the ws: scheme of the same host and port), no
// framing, no forms posting elsewhere: an injected string can neither run
// nor carry the token off the page.
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const FILES: Record<string, { body: string; type: string }> = {
  "/": { body: html as unknown as string, type: "text/html; charset=utf-8" },
  "/index.html": { body: html as unknown as string, type: "text/html; charset=utf-8" },
  "/app.js": { body: script as unknown as string, type: "text/javascript; charset=utf-8" },
  "/style.css": { body: css as unknown as string, type: "text/css; charset=utf-8" },
};

/** The page's file at this path, or undefined for any other path. */
export function pageAsset(pathname: string): Response | undefined {
  const file = FILES[pathname];
  if (!file) return undefined;
  return new Response(file.body, {
    headers: {
      "content-type": file.type,
      // A new build's page must never mix with an old build's cached script.
      "cache-control": "no-store",
      "content-security-policy": CSP,
      "x-content-type-options": "nosniff",
      "x-frame-options": "DENY",
      // The token lives in the fragment, which no Referer carries; this keeps the path out of them too.
      "referrer-policy": "no-referrer",
    },
  });
}
