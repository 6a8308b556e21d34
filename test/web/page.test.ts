// The chat page on the --web listener, driven in a real browser: Debian's
// headless Chromium through puppeteer-core. The server runs as its own
// process on the built-in tiny-chat model; the page is opened with the token
// in the URL's fragment, as the server prints it. Every wait is on the page's
// DOM (a reply's state, the sidebar's entries); timeouts are hang guards.
// With SUPERFLUID_SCREENSHOT=1 the test also rewrites docs/web-chat.png.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "puppeteer-core";
import { CHROMIUM, launchChromium } from "../support/chromium.ts";
import { ROOT } from "../scenarios/support.ts";
import { WebServer } from "./support.ts";

// The callbacks handed to page.waitForFunction and $eval run in the browser;
// the project compiles without the DOM library, so they see the page's
// document through this loose declaration.
declare const document: any;

const REPLY = "Hello from superfluid's built-in test model.";
const HANG_GUARD = 60_000;

describe.skipIf(!CHROMIUM)("chat page in headless Chromium", () => {
  let server: WebServer;
  let webPort: number;
  let token: string;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    server = await WebServer.start({ fixture: "tiny-chat" });
    webPort = server.webPort;
    token = server.token;
    browser = await launchChromium();
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 800 });
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    page.on("console", (m) => {
      if (m.type() === "error") pageErrors.push(m.text());
    });
  }, HANG_GUARD * 2);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    if (server) rmSync(server.sessions, { recursive: true, force: true });
  });

  const web = () => `http://127.0.0.1:${webPort}`;
  /** Waits until no generation runs and the reply count reaches `n` (each done, with its figures). */
  const repliesDone = (n: number) =>
    page.waitForFunction(
      (want) => {
        const done: any[] = [...document.querySelectorAll('.reply[data-state="done"]')];
        return (
          !document.body.dataset.generating &&
          done.length >= want &&
          done.every((r) => r.querySelector(".stats")?.textContent)
        );
      },
      { timeout: HANG_GUARD },
      n,
    );

  test("serves the page with a strict policy, and no token is needed to fetch it", async () => {
    const res = await fetch(`${web()}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.headers.get("cache-control")).toBe("no-store");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(await res.text()).toContain('<script src="/app.js"');
    for (const [path, type] of [
      ["/app.js", "javascript"],
      ["/style.css", "text/css"],
    ] as const) {
      const r = await fetch(`${web()}${path}`);
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toContain(type);
    }
  });

  test("without a token the page asks for one", async () => {
    const other = await browser.newPage();
    try {
      await other.goto(`${web()}/`);
      await other.waitForSelector("#token-gate:not([hidden])", { timeout: HANG_GUARD });
    } finally {
      await other.close();
    }
  });

  test("loads with the token, sends a message and streams the reply", async () => {
    await page.goto(`${web()}/#token=${token}`);
    await page.waitForSelector("#log .empty", { timeout: HANG_GUARD });
    // The token left the address bar as soon as the page read it.
    expect(page.url()).toBe(`${web()}/`);
    // Records what the log showed while the reply ran: its streaming state and each text it grew through.
    await page.evaluate(() => {
      const seen = ((globalThis as any).__seen = { streaming: false, texts: [] as string[] });
      new (globalThis as any).MutationObserver(() => {
        const r = document.querySelector('.reply[data-state="streaming"]');
        if (!r) return;
        seen.streaming = true;
        const t = r.querySelector(".reply-body")?.textContent ?? "";
        if (t && seen.texts[seen.texts.length - 1] !== t) seen.texts.push(t);
      }).observe(document.querySelector("#log"), {
        subtree: true,
        childList: true,
        characterData: true,
        attributes: true,
      });
    });
    await page.type("#input", "Three facts about Oslo.");
    await page.click("#send");
    await repliesDone(1);
    const seen = await page.evaluate(() => (globalThis as any).__seen as { streaming: boolean; texts: string[] });
    expect(seen.streaming).toBe(true);
    // Each text the reply showed was a prefix of the final one.
    for (const t of seen.texts) expect(REPLY.startsWith(t)).toBe(true);
    const reply = await page.$eval(".reply .reply-body", (e) => e.textContent);
    expect(reply).toBe(REPLY);
    // The figures the Generated summary carried: warm prefix, tokens, rate.
    const stats = await page.$eval(".reply .stats", (e) => e.textContent ?? "");
    expect(stats).toMatch(/^\d+ warm · 9 tokens · \d+(\.\d)? tok\/s$/);
    const sidebar = await page.$$eval("#sessions li", (ls) => ls.map((l) => l.querySelector(".label")?.textContent));
    expect(sidebar).toEqual(["Three facts about Oslo."]);
  });

  test("forks at a message: the new session nests under its parent and takes the chat on", async () => {
    await page.click(".msg.user .fork");
    await page.waitForSelector("#sessions li li.selected", { timeout: HANG_GUARD });
    // The fork holds the user message, not the reply.
    expect(await page.$$eval("#log .msg.user", (ms) => ms.length)).toBe(1);
    expect(await page.$$eval("#log .reply", (ms) => ms.length)).toBe(0);
    await page.type("#input", "And two about Bergen?");
    await page.click("#send");
    await repliesDone(1);
    expect(await page.$$eval("#log .msg.user .text", (ts) => ts.map((t) => t.textContent))).toEqual([
      "Three facts about Oslo.",
      "And two about Bergen?",
    ]);
    expect(await page.$eval(".reply .reply-body", (e) => e.textContent)).toBe(REPLY);
  });

  test("edits a message: a rebased session with the new text and a new reply", async () => {
    const edits = await page.$$(".msg.user .edit");
    await edits[edits.length - 1]!.click();
    const editor = await page.waitForSelector(".editor textarea", { timeout: HANG_GUARD });
    await editor!.evaluate((e) => {
      (e as unknown as { value: string }).value = "Two facts about Trondheim.";
    });
    await page.click(".editor .save");
    await page.waitForFunction(() => document.querySelectorAll("#sessions li").length === 3, { timeout: HANG_GUARD });
    await repliesDone(1);
    expect(await page.$$eval("#log .msg.user .text", (ts) => ts.map((t) => t.textContent))).toEqual([
      "Three facts about Oslo.",
      "Two facts about Trondheim.",
    ]);
    expect(await page.$eval(".reply .reply-body", (e) => e.textContent)).toBe(REPLY);
    expect(await page.$$eval("#sessions li li li.selected", (ls) => ls.length)).toBe(1);
  });

  test("sets the session's QoS class", async () => {
    await page.select("#qos", "3");
    await page.waitForFunction(
      () => [...document.querySelectorAll(".qos-note")].some((n: any) => n.textContent === "QoS: background"),
      { timeout: HANG_GUARD },
    );
    // What the page showed is what the log holds: a reload reads it back.
    await page.reload();
    await page.waitForFunction(
      () => document.querySelector("#qos")?.value === "3" && document.querySelector(".reply"),
      { timeout: HANG_GUARD },
    );
  });

  test("the page logged no errors (and, with SUPERFLUID_SCREENSHOT=1, takes the docs screenshot)", async () => {
    if (process.env.SUPERFLUID_SCREENSHOT === "1") {
      // The screenshot for docs/api/web-page.md: the fork, which took the chat on with a warm reply, in the tree of all
      // three.
      await page.click("#sessions li li .open");
      await page.waitForFunction(
        () =>
          document.querySelector("#sessions li li")?.classList.contains("selected") &&
          document.querySelectorAll("#log .msg.user").length === 2,
        { timeout: HANG_GUARD },
      );
      await repliesDone(1);
      await page.mouse.move(640, 600); // no hover state in the picture
      await page.screenshot({ path: join(ROOT, "docs", "web-chat.png") as `${string}.png` });
    }
    expect(pageErrors).toEqual([]);
  });

  test("a forced tool call shows as a card; its result is sent from the card and the model answers", async () => {
    await page.click("#settings-toggle");
    await page.waitForSelector("#settings:not([hidden])", { timeout: HANG_GUARD });
    const tools = [
      {
        type: "function",
        function: {
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      },
    ];
    await page.$eval("#p-tools", (e, text) => ((e as any).value = text), JSON.stringify(tools));
    await page.select("#p-tool_choice", "required");
    await page.click("#new-chat");
    await page.waitForSelector("#log .empty", { timeout: HANG_GUARD });
    await page.type("#input", "Weather in Oslo?");
    await page.click("#send");
    const card = await page.waitForSelector(".tool-card .tool-answer textarea", { timeout: HANG_GUARD });
    expect(await page.$eval(".tool-card .tool-name", (e) => e.textContent)).toBe("tool call · get_weather");
    expect(JSON.parse((await page.$eval(".tool-card .tool-args", (e) => e.textContent)) ?? "")).toEqual({
      city: "hello",
    });
    // The answer is generated with the same settings: back to auto, so the model answers in text.
    await page.select("#p-tool_choice", "auto");
    await card!.type("12 C, rain");
    await page.click(".tool-card .tool-answer button");
    await page.waitForFunction(
      () => document.querySelector(".tool-card .tool-result:not(.pending)")?.textContent === "12 C, rain",
      { timeout: HANG_GUARD },
    );
    await page.waitForFunction(
      (reply) =>
        [...document.querySelectorAll('.reply[data-state="done"] .reply-body')].some(
          (b: any) => b.textContent === reply,
        ) && !document.body.dataset.generating,
      { timeout: HANG_GUARD },
      REPLY,
    );
    expect(pageErrors).toEqual([]);
  });
});

// Cancel and continue need a reply long enough to cut: tiny-random's random
// weights run to max_tokens (seeded, so the same every run), where tiny-chat
// ends its turn after nine tokens.
describe.skipIf(!CHROMIUM)("chat page: cancel and continue", () => {
  let server: WebServer;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    server = await WebServer.start({ fixture: "tiny-random" });
    browser = await launchChromium();
    page = await browser.newPage();
    await page.goto(`${server.base}/#token=${server.token}`);
    await page.waitForSelector("#log .empty", { timeout: HANG_GUARD });
  }, HANG_GUARD * 2);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    if (server) rmSync(server.sessions, { recursive: true, force: true });
  });

  /** The text of the reply being shown, once it has more than `chars` characters while streaming. */
  const streamedPast = (chars: number) =>
    page.waitForFunction(
      (n) => {
        const r = document.querySelector('.reply[data-state="streaming"] .reply-body');
        return (r?.textContent?.length ?? 0) > n;
      },
      { timeout: HANG_GUARD },
      chars,
    );
  const stopped = () =>
    page.waitForFunction(
      () =>
        !document.body.dataset.generating && document.querySelector('.reply[data-state="done"] .stats')?.textContent,
      { timeout: HANG_GUARD },
    );

  test("cancels a streaming reply, then continues the same reply", async () => {
    await page.click("#settings-toggle");
    for (const [field, value] of [
      ["#p-seed", "7"],
      ["#p-max_tokens", "4000"],
    ] as const) {
      await page.$eval(
        field,
        (e, v) => {
          (e as unknown as { value: string }).value = v;
        },
        value,
      );
    }
    await page.type("#input", "Go on for a while.");
    await page.click("#send");
    await streamedPast(0);
    await page.click("#cancel");
    await stopped();
    expect(await page.$eval(".reply .stats", (e) => e.textContent ?? "")).toEndWith(" · cancelled");
    const cut = await page.$eval(".reply .reply-body", (e) => e.textContent ?? "");
    // The cut turn is open: Continue generates into the same reply.
    await page.waitForSelector("#continue:not([hidden])", { timeout: HANG_GUARD });
    await page.click("#continue");
    await streamedPast(cut.length);
    await page.click("#cancel");
    await stopped();
    expect(await page.$$eval("#log .reply", (rs) => rs.length)).toBe(1);
    expect((await page.$eval(".reply .reply-body", (e) => e.textContent ?? "")).startsWith(cut)).toBe(true);
  });
});
