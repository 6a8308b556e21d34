// CORS in a real browser (docs/api/security.md#cors): headless Chromium, as the
// chat page's test drives it, loads a page from another loopback port, whose code
// (cors-page/clients.ts, bundled for the browser here) streams a chat through the
// official `openai` package and makes a Messages call through `@anthropic-ai/sdk`,
// both with their browser flags, against servers on the built-in tiny-chat model:
// one without a key, one with. The page is also opened as http://app.test (mapped
// to 127.0.0.1 inside Chromium), an origin only the keyless server lists: refused
// by the other, the browser then fails the call before any reply reaches the page.
// Nothing is timed; the waits are hang guards. Skipped where no Chromium is found.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "puppeteer-core";
import { CHROMIUM, launchChromium } from "../support/chromium.ts";
import { startTestServer, type TestServer } from "./support.ts";
import type { Outcome, Target } from "./cors-page/clients.ts";

const KEY = "sk-cors-browser-5e6f7a";
const REPLY = "Hello from superfluid's built-in test model.";
const LISTED_SITE = "app.test";
const HANG_GUARD = 60_000;

/** The page: an empty document and the bundled clients. */
async function pageServer(): Promise<{ port: number; stop: () => void }> {
  const built = await Bun.build({ entrypoints: [join(import.meta.dir, "cors-page/clients.ts")], target: "browser" });
  if (!built.success) throw new Error(`the page's clients did not bundle: ${built.logs.join("\n")}`);
  const clients = await built.outputs[0]!.text();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(request) {
      if (new URL(request.url).pathname === "/clients.js")
        return new Response(clients, { headers: { "content-type": "text/javascript" } });
      return new Response('<!doctype html><title>CORS</title><script type="module" src="/clients.js"></script>', {
        headers: { "content-type": "text/html" },
      });
    },
  });
  return { port: server.port!, stop: () => server.stop(true) };
}

describe.skipIf(!CHROMIUM)("a page on another origin calls the API through the official clients", () => {
  let open: TestServer & { sessions: string };
  let keyed: TestServer & { sessions: string };
  let page: { port: number; stop: () => void };
  let browser: Browser;
  const pages = new Map<string, Page>();
  /** What Chromium's console said on each page: its CORS refusals. */
  const consoleLines: string[] = [];

  beforeAll(async () => {
    open = await startTestServer({
      fixture: "tiny-chat",
      maxBatch: 1,
      extraArgs: ["--allow-origin", `http://${LISTED_SITE}:*`],
    });
    keyed = await startTestServer({ fixture: "tiny-chat", maxBatch: 1, apiKey: KEY, extraArgs: ["--api-key", KEY] });
    page = await pageServer();
    browser = await launchChromium([`--host-resolver-rules=MAP ${LISTED_SITE} 127.0.0.1`]);
  }, HANG_GUARD * 2);

  afterAll(async () => {
    await browser?.close();
    page?.stop();
    for (const s of [open, keyed]) {
      await s?.server.close();
      if (s) rmSync(s.sessions, { recursive: true, force: true });
    }
  });

  /** The page on `host`, loaded once, its clients ready. */
  async function pageOn(host: string): Promise<Page> {
    const known = pages.get(host);
    if (known) return known;
    const p = await browser.newPage();
    p.on("console", (m) => consoleLines.push(`${host}: ${m.text()}`));
    await p.goto(`http://${host}:${page.port}/`);
    await p.waitForFunction(() => (globalThis as Record<string, unknown>).corsClients !== undefined, {
      timeout: HANG_GUARD,
    });
    pages.set(host, p);
    return p;
  }

  /** Runs one client call in the page on `host`; prints what the page saw (the test's output shows the run). */
  async function run(
    host: string,
    call: "openaiStream" | "anthropicMessage",
    server: TestServer,
    apiKey: string,
  ): Promise<Outcome> {
    const p = await pageOn(host);
    const target: Target = { baseURL: server.url, apiKey, model: server.model };
    const outcome = (await p.evaluate(
      (name, t) => (globalThis as any).corsClients[name](t),
      call,
      target as unknown as Record<string, string>,
    )) as Outcome;
    const seen = outcome.ok
      ? `${JSON.stringify(outcome.text)} in ${outcome.chunks} chunk(s); x-superfluid-warm=${outcome.warm} x-superfluid-replica=${outcome.replica}`
      : `${outcome.error} (status ${outcome.status})`;
    console.log(`[browser] page http://${host}:${page.port} -> ${server.url} ${call} key=${apiKey}: ${seen}`);
    return outcome;
  }

  test("without a key: a page on another loopback port streams a chat and makes a Messages call", async () => {
    const chat = await run("localhost", "openaiStream", open, "unused");
    expect(chat).toMatchObject({ ok: true, text: REPLY });
    if (chat.ok) {
      expect(chat.chunks).toBeGreaterThan(1);
      // A header the server sets is readable: it is exposed.
      expect(chat.replica).not.toBeNull();
    }
    const message = await run("localhost", "anthropicMessage", open, "unused");
    expect(message).toMatchObject({ ok: true, text: REPLY });
    if (message.ok) expect(message.warm).not.toBeNull();
  });

  test("with a key: the same calls pass with it; with a wrong one the page reads the 401 (errors carry CORS too)", async () => {
    expect(await run("localhost", "openaiStream", keyed, KEY)).toMatchObject({ ok: true, text: REPLY });
    expect(await run("localhost", "anthropicMessage", keyed, KEY)).toMatchObject({ ok: true, text: REPLY });
    expect(await run("localhost", "openaiStream", keyed, "sk-wrong")).toEqual({
      ok: false,
      error: "AuthenticationError",
      status: 401,
    });
    expect(await run("localhost", "anthropicMessage", keyed, "sk-wrong")).toEqual({
      ok: false,
      error: "AuthenticationError",
      status: 401,
    });
  });

  test("a web origin works where --allow-origin lists it, and is refused by the browser where it does not", async () => {
    expect(await run(LISTED_SITE, "openaiStream", open, "unused")).toMatchObject({ ok: true, text: REPLY });
    expect(await run(LISTED_SITE, "anthropicMessage", open, "unused")).toMatchObject({ ok: true, text: REPLY });
    // The keyed server refuses the origin: no CORS header, so the browser hides the reply and the client sees
    // no response at all.
    const before = consoleLines.length;
    for (const call of ["openaiStream", "anthropicMessage"] as const)
      expect(await run(LISTED_SITE, call, keyed, KEY)).toEqual({
        ok: false,
        error: "APIConnectionError",
        status: null,
      });
    const refusals = consoleLines.slice(before).filter((l) => l.includes("CORS policy"));
    for (const line of refusals) console.log(`[browser console] ${line}`);
    expect(refusals.length).toBeGreaterThan(0);
  });
});
