// The --web listener's guard, and what the session API keeps across a
// restart (docs/api/sessions.md): who may call it (the token twice on HTTP,
// an allowed Origin plus the token on the WebSocket, loopback Hosts only, no
// CORS), that a SIGKILL mid-generation loses nothing a client saw, that
// --park restores a session's KV after a restart and resumes cold when the
// artifact does not match, and that a seeded session draws the same tokens
// whether or not its generation was cut.
// Each server is its own process (SIGKILL is part of the test); every wait is
// on a frame, a reply or a file, and timeouts are hang guards only.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fixturePath } from "../support/models.ts";
import { freePort, ROOT } from "../scenarios/support.ts";
import {
  counterTotal,
  HANG_GUARD_MS,
  rawRequest,
  SocketClient,
  WebServer,
  wsHandshake,
  type Frame,
} from "./support.ts";

const TEST_GUARD = HANG_GUARD_MS * 4;
const FOREIGN = "https://evil.example";
const LISTED = "https://app.example";

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "superfluid-web-auth-"));
  dirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Polls (a hang guard, not a timing bound) until `ok()` holds. */
async function until(what: string, ok: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = performance.now() + HANG_GUARD_MS;
  while (!(await ok())) {
    if (performance.now() > deadline) throw new Error(`never happened: ${what}`);
    await Bun.sleep(25);
  }
}

const noCors = (headers: Headers | Record<string, string>) => {
  const get = (name: string) => (headers instanceof Headers ? headers.get(name) : headers[name]) ?? null;
  expect(get("access-control-allow-origin")).toBeNull();
  expect(get("access-control-allow-credentials")).toBeNull();
};

describe("authentication of the --web listener", () => {
  let s: WebServer;

  beforeAll(async () => {
    s = await WebServer.start({ fixture: "tiny-chat", sessions: tempDir(), args: ["--web-origin", LISTED] });
  }, TEST_GUARD);
  afterAll(async () => {
    await s?.stop();
  });

  const rpc = (headers: Record<string, string>) =>
    fetch(`${s.base}/web/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify("List"),
    });

  test("/web/health answers without a token", async () => {
    const res = await fetch(`${s.base}/web/health`);
    expect(res.status).toBe(200);
    noCors(res.headers);
  });

  test("/web/rpc wants the token as bearer and as X-Superfluid-CSRF, and an allowed Origin", async () => {
    const bearer = { authorization: `Bearer ${s.token}` };
    const cases: [string, Record<string, string>, number][] = [
      ["no token", {}, 401],
      ["a wrong bearer", { authorization: "Bearer nope", "x-superfluid-csrf": s.token }, 401],
      ["bearer without CSRF", bearer, 403],
      ["a wrong CSRF", { ...bearer, "x-superfluid-csrf": "nope" }, 403],
      ["a foreign Origin with both", { ...bearer, "x-superfluid-csrf": s.token, origin: FOREIGN }, 403],
      ["a --web-origin Origin with both", { ...bearer, "x-superfluid-csrf": s.token, origin: LISTED }, 200],
      ["the listener's own Origin with both", { ...bearer, "x-superfluid-csrf": s.token, origin: s.base }, 200],
      ["both, no Origin", { ...bearer, "x-superfluid-csrf": s.token }, 200],
    ];
    for (const [what, headers, status] of cases) {
      const res = await rpc(headers);
      const body: any = await res.json();
      expect({ what, status: res.status }).toEqual({ what, status });
      noCors(res.headers);
      if (status === 200) expect(body.Sessions).toBeDefined();
      else expect(typeof body.Err?.message).toBe("string");
    }
  });

  test("/web/stream is guarded the same way", async () => {
    const post = (headers: Record<string, string>) =>
      fetch(`${s.base}/web/stream`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ session: 0, max_tokens: 1 }),
      });
    expect((await post({})).status).toBe(401);
    expect((await post({ authorization: `Bearer ${s.token}` })).status).toBe(403);
    expect(
      (await post({ authorization: `Bearer ${s.token}`, "x-superfluid-csrf": s.token, origin: FOREIGN })).status,
    ).toBe(403);
  });

  test("a Host that is not a loopback name is refused (DNS rebinding)", async () => {
    const auth = {
      authorization: `Bearer ${s.token}`,
      "x-superfluid-csrf": s.token,
      "content-type": "application/json",
    };
    const ok = await rawRequest(s.webPort, {
      method: "POST",
      path: "/web/rpc",
      headers: { host: `127.0.0.1:${s.webPort}`, ...auth },
      body: '"List"',
    });
    expect(ok.status).toBe(200);
    for (const host of [`evil.example:${s.webPort}`, "evil.example", "192.168.1.10"]) {
      const res = await rawRequest(s.webPort, {
        method: "POST",
        path: "/web/rpc",
        headers: { host, ...auth },
        body: '"List"',
      });
      expect({ host, status: res.status }).toEqual({ host, status: 403 });
      noCors(res.headers);
    }
    const health = await rawRequest(s.webPort, {
      method: "GET",
      path: "/web/health",
      headers: { host: "evil.example" },
    });
    expect(health.status).toBe(403);
    const ws = await wsHandshake(s.webPort, {
      host: "evil.example",
      origin: s.base,
      "sec-websocket-protocol": `superfluid.v1, superfluid.token.${s.token}`,
    });
    expect(ws.status).toBe(403);
  });

  test("/web/ws needs an allowed Origin and the token", async () => {
    const protocols = `superfluid.v1, superfluid.token.${s.token}`;
    const cases: [string, Record<string, string>, number][] = [
      ["no Origin", { "sec-websocket-protocol": protocols }, 403],
      ["a foreign Origin", { origin: FOREIGN, "sec-websocket-protocol": protocols }, 403],
      ["no token", { origin: s.base, "sec-websocket-protocol": "superfluid.v1" }, 401],
      ["a wrong token", { origin: s.base, "sec-websocket-protocol": "superfluid.v1, superfluid.token.nope" }, 401],
      ["the token as subprotocol", { origin: s.base, "sec-websocket-protocol": protocols }, 101],
      [
        "the token as bearer",
        { origin: s.base, "sec-websocket-protocol": "superfluid.v1", authorization: `Bearer ${s.token}` },
        101,
      ],
      ["a --web-origin Origin", { origin: LISTED, "sec-websocket-protocol": protocols }, 101],
    ];
    for (const [what, headers, status] of cases) {
      const res = await wsHandshake(s.webPort, headers);
      expect({ what, status: res.status }).toEqual({ what, status });
      noCors(res.headers);
      if (status === 101) expect(res.headers["sec-websocket-protocol"]).toBe("superfluid.v1");
    }
  });

  test("a WebSocket client: refused without an allowed Origin, superfluid.v1 negotiated with the token", async () => {
    const url = `ws://127.0.0.1:${s.webPort}/web/ws`;
    const protocols = ["superfluid.v1", `superfluid.token.${s.token}`];
    await expect(SocketClient.open(url, { origin: FOREIGN, protocols })).rejects.toThrow();
    await expect(SocketClient.open(url, { origin: s.base, protocols: ["superfluid.v1"] })).rejects.toThrow();

    const bySubprotocol = await SocketClient.open(url, { origin: s.base, protocols });
    expect(bySubprotocol.ws.protocol).toBe("superfluid.v1");
    expect((await bySubprotocol.call("List")).Sessions).toBeDefined();
    bySubprotocol.close();

    const byBearer = await SocketClient.open(url, {
      origin: s.base,
      protocols: ["superfluid.v1"],
      headers: { authorization: `Bearer ${s.token}` },
    });
    expect(byBearer.ws.protocol).toBe("superfluid.v1");
    expect((await byBearer.call("List")).Sessions).toBeDefined();
    byBearer.close();
  });

  test("<sessions>/web-token is private (0600)", () => {
    const file = join(s.sessions, "web-token");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, "utf8").trim()).toBe(s.token);
    expect(s.token.length).toBeGreaterThanOrEqual(32);
  });
});

test(
  "serve --web on a non-loopback address exits 2: the listener is loopback only",
  async () => {
    const port = await freePort();
    const proc = Bun.spawn(
      [
        process.execPath,
        join(ROOT, "src/main.ts"),
        "serve",
        await fixturePath("tiny-chat"),
        "--port",
        "0",
        "--sessions",
        tempDir(),
        "--web",
        `0.0.0.0:${port}`,
      ],
      { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, SUPERFLUID_QUIET: "1" } },
    );
    // A server that started anyway would never exit: that is a failure, not a hang.
    const guard = setTimeout(() => proc.kill("SIGKILL"), HANG_GUARD_MS);
    const [stderr] = await Promise.all([new Response(proc.stderr).text(), new Response(proc.stdout).text()]);
    await proc.exited;
    clearTimeout(guard);
    expect(proc.exitCode).toBe(2);
    expect(stderr).toMatch(/loopback only/);
  },
  TEST_GUARD,
);

/** Every event of a session from `cursor` on (Read over /web/rpc). */
async function read(s: WebServer, session: number, cursor = 0): Promise<Frame[]> {
  const reply = await s.rpc({ Read: { session, cursor } });
  if (!reply.Events) throw new Error(`Read failed: ${JSON.stringify(reply)}`);
  return reply.Events.events;
}

async function appendUser(s: WebServer, session: number, text: string): Promise<void> {
  const reply = await s.rpc({ AppendMessage: { session, role: 1, text } });
  if (!reply.Committed) throw new Error(`AppendMessage failed: ${JSON.stringify(reply)}`);
}

/** Generates on a fresh socket; the Generated summary (throws on anything else). */
async function generate(
  s: WebServer,
  session: number,
  maxTokens: number,
): Promise<{ deltas: Frame[]; summary: Frame }> {
  const ws = await s.socket();
  try {
    const { deltas, reply } = await ws.generate(session, maxTokens);
    if (!reply.Generated) throw new Error(`Generate failed: ${JSON.stringify(reply)}`);
    return { deltas, summary: reply.Generated };
  } finally {
    ws.close();
  }
}

/** The token ids of a session's Generated events, in order. */
const generatedSpan = (events: Frame[]) =>
  events.filter((e) => e.body?.Generated).flatMap((e) => e.body.Generated.span as number[]);
const generatedText = (events: Frame[]) =>
  events
    .filter((e) => e.body?.Generated)
    .map((e) => e.body.Generated.text)
    .join("");

test(
  "a SIGKILL mid-generation loses nothing the client saw; cursors resolve and Generate continues the open turn",
  async () => {
    const sessions = tempDir();
    const first = await WebServer.start({ fixture: "tiny-random", sessions });
    let session: number;
    let seen: Frame[];
    try {
      session = await first.create();
      await appendUser(first, session, "Tell me a long story.");
      const ws = await first.socket();
      // tiny-random has no scripted end: it runs to max_tokens, far past the frames awaited here.
      ws.send({ Generate: { session, max_tokens: 4000 } });
      seen = [];
      while (seen.filter((e) => e.body?.Generated).length < 8) {
        const f = await ws.next();
        if (!f.Delta) throw new Error(`expected Delta frames, got ${JSON.stringify(f)}`);
        seen.push(f.Delta.event);
      }
    } finally {
      await first.stop();
    }
    expect(seen[0].body.GenerationPrompt).toBeDefined();

    const second = await WebServer.start({ fixture: "tiny-random", sessions });
    try {
      // A new token at each start, still private; the old one opens nothing.
      expect(second.token).not.toBe(first.token);
      expect(statSync(join(sessions, "web-token")).mode & 0o777).toBe(0o600);
      const stale = await fetch(`${second.base}/web/rpc`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${first.token}`,
          "x-superfluid-csrf": first.token,
          "content-type": "application/json",
        },
        body: '"List"',
      });
      expect(stale.status).toBe(401);

      const log = await read(second, session);
      for (const e of seen) expect(log[e.event_id]).toEqual(e);
      // The kill cut the turn: no Generated event ended it.
      expect(log.filter((e) => e.body?.Generated).every((e) => e.body.Generated.finish === 0)).toBe(true);
      // The cursor the client held (its last event) resolves to that event.
      const last = seen[seen.length - 1];
      const from = await read(second, session, last.event_id);
      expect(from[0]).toEqual(last);
      expect(from.length).toBe(log.length - last.event_id);

      // The cut turn stays open: Generate continues it, with ids after the old ones.
      const { summary } = await generate(second, session, 6);
      const events = summary.events as Frame[];
      expect(events.length).toBeGreaterThan(0);
      expect(events.some((e) => e.body?.GenerationPrompt)).toBe(false);
      expect(events[0].event_id).toBe(log.length);
      events.forEach((e, i) => expect(e.event_id).toBe(log.length + i));
      expect(summary.tokens_generated).toBe(6);
      const after = await read(second, session);
      expect(after.length).toBe(log.length + events.length);
      expect(after.filter((e) => e.body?.GenerationPrompt).length).toBe(1);
    } finally {
      await second.stop();
    }
  },
  TEST_GUARD,
);

describe("parking (--park) across restarts", () => {
  // Sessions with the same input: A (the control, restarted without --park),
  // C (its artifact corrupted), E (its artifact replaced by B's, another
  // history). B resumes from its own artifact. Each check that needs a cold
  // prefix cache is the first generation of its server.
  const MESSAGE = "Describe the sea.";
  const OTHER = "Name three rivers in Europe.";
  const FOLLOW = "And then?";
  const N = 8;
  let dir: string;
  let ids: { A: number; B: number; C: number; E: number };
  let parksAtFirst = 0;
  let coldText = "";

  const park = (id: number) => join(dir, "park", `${id}.park`);
  const scrape = async (s: WebServer) => (await fetch(`${s.server.url}/metrics`)).text();

  beforeAll(async () => {
    dir = tempDir();
    const s = await WebServer.start({ fixture: "tiny-random", sessions: dir, args: ["--park"] });
    try {
      const A = await s.create();
      const B = await s.create();
      const C = await s.create();
      const E = await s.create();
      ids = { A, B, C, E };
      for (const [id, text] of [
        [A, MESSAGE],
        [B, OTHER],
        [C, MESSAGE],
        [E, MESSAGE],
      ] as const) {
        await appendUser(s, id, text);
        await generate(s, id, N);
        await until(`the park artifact of session ${id}`, () => existsSync(park(id)));
      }
      await until(
        "superfluid_parks_total counts the four parks",
        async () => counterTotal(await scrape(s), "superfluid_parks_total") >= 4,
      );
      parksAtFirst = counterTotal(await scrape(s), "superfluid_parks_total");
    } finally {
      await s.stop();
    }
  }, TEST_GUARD);

  test("a finished generation leaves <sessions>/park/<id>.park and counts in superfluid_parks_total", () => {
    for (const id of Object.values(ids)) expect(statSync(park(id)).size).toBeGreaterThan(0);
    expect(parksAtFirst).toBeGreaterThanOrEqual(4);
  });

  test(
    "without --park a restart prefills the session cold (warm_prefix 0)",
    async () => {
      const s = await WebServer.start({ fixture: "tiny-random", sessions: dir });
      try {
        await appendUser(s, ids.A, FOLLOW);
        const { summary } = await generate(s, ids.A, N);
        expect(summary.warm_prefix).toBe(0);
        expect(summary.tokens_generated).toBe(N);
        coldText = generatedText(summary.events);
        expect(counterTotal(await scrape(s), "superfluid_resumes_total")).toBe(0);
      } finally {
        await s.stop();
      }
    },
    TEST_GUARD,
  );

  test(
    "with --park a restart restores the session's KV; a corrupted artifact resumes cold with the same text",
    async () => {
      // Flip bytes in the middle of C's artifact (its KV blob).
      const bytes = readFileSync(park(ids.C));
      for (let i = 0; i < 16; i++) bytes[(bytes.length >> 1) + i]! ^= 0xff;
      writeFileSync(park(ids.C), bytes);
      const s = await WebServer.start({ fixture: "tiny-random", sessions: dir, args: ["--park"] });
      try {
        await appendUser(s, ids.C, FOLLOW);
        const cold = await generate(s, ids.C, N);
        expect(cold.summary.warm_prefix).toBe(0);
        expect(generatedText(cold.summary.events)).toBe(coldText);
        expect(counterTotal(await scrape(s), "superfluid_resumes_total")).toBe(0);

        // B's artifact covers its whole history before this append.
        const covered = (await read(s, ids.B)).flatMap((e) =>
          Object.values(e.body ?? {}).flatMap((b: any) => (Array.isArray(b?.span) ? b.span : [])),
        ).length;
        const parksBefore = counterTotal(await scrape(s), "superfluid_parks_total");
        await appendUser(s, ids.B, FOLLOW);
        const warm = await generate(s, ids.B, N);
        expect(warm.summary.warm_prefix).toBeGreaterThan(0);
        // More than any prefix it could share with C's history: it came from the artifact.
        expect(warm.summary.warm_prefix).toBeGreaterThanOrEqual(covered - 1);
        expect(counterTotal(await scrape(s), "superfluid_resumes_total")).toBe(1);
        await until(
          "the generations park again",
          async () => counterTotal(await scrape(s), "superfluid_parks_total") > parksBefore,
        );
      } finally {
        await s.stop();
      }
    },
    TEST_GUARD,
  );

  test(
    "an artifact of another history (B's, under E's id) resumes cold with the same text",
    async () => {
      copyFileSync(park(ids.B), park(ids.E));
      const s = await WebServer.start({ fixture: "tiny-random", sessions: dir, args: ["--park"] });
      try {
        await appendUser(s, ids.E, FOLLOW);
        const { summary } = await generate(s, ids.E, N);
        expect(summary.warm_prefix).toBe(0);
        expect(generatedText(summary.events)).toBe(coldText);
        expect(counterTotal(await scrape(s), "superfluid_resumes_total")).toBe(0);
      } finally {
        await s.stop();
      }
    },
    TEST_GUARD,
  );
});

test(
  "a seeded session draws the same tokens whether its generation is cut or not",
  async () => {
    const s = await WebServer.start({ fixture: "tiny-random", sessions: tempDir() });
    const N = 24;
    const K = 9;
    const outcomes: { seed: number; whole: number[]; cut: number[] }[] = [];
    try {
      for (const seed of [7, 1234, 99991]) {
        const params = { temperature: 1, top_p: 1, min_p: 0, top_k: 0, seed };
        const whole = await s.create(params);
        const cut = await s.create(params);
        for (const id of [whole, cut]) await appendUser(s, id, "Write something random.");
        const one = await generate(s, whole, N);
        expect(one.summary.tokens_generated).toBe(N);
        const a = await generate(s, cut, K);
        expect(a.summary.finish).toBe(2);
        const b = await generate(s, cut, N - K);
        expect((b.summary.events as Frame[]).some((e) => e.body?.GenerationPrompt)).toBe(false);
        outcomes.push({
          seed,
          whole: generatedSpan(one.summary.events),
          cut: generatedSpan([...a.summary.events, ...b.summary.events]),
        });
      }
    } finally {
      await s.stop();
    }
    for (const o of outcomes) {
      expect(o.whole.length).toBe(N);
      expect({ seed: o.seed, tokens: o.cut }).toEqual({ seed: o.seed, tokens: o.whole });
    }
    // Sampling at temperature 1 matters: the seeds do not all draw the same tokens.
    expect(new Set(outcomes.map((o) => o.whole.join(","))).size).toBeGreaterThan(1);
  },
  TEST_GUARD,
);
