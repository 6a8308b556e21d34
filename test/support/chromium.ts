// Headless Chromium for the tests that drive a real browser (the chat page, CORS):
// Debian's chromium through puppeteer-core. Nothing is downloaded: with no binary
// found, those tests are skipped.
import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import puppeteer, { type Browser } from "puppeteer-core";

/** A Chromium (or Chrome) binary: $CHROME_PATH, else the usual names on PATH. */
export function findChromium(): string | undefined {
  const fromEnv = process.env.CHROME_PATH;
  if (fromEnv && existsSync(fromEnv)) return fromEnv;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    for (const name of ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]) {
      const p = join(dir, name);
      if (dir && existsSync(p)) return p;
    }
  }
  return undefined;
}

export const CHROMIUM = findChromium();

/** A headless browser; `args` are Chromium's own switches. */
export function launchChromium(args: string[] = []): Promise<Browser> {
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Chromium's sandbox refuses to start as root (CI containers).
    args: [...(process.getuid?.() === 0 ? ["--no-sandbox"] : []), ...args],
  });
}
