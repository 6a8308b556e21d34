// Off loopback (docs/api/security.md, docs/api/openai.md#request-checks): the
// Host table by bind address and key, the Origin check with --web-origin,
// and what the startup log says about authentication. Servers run as their
// own processes (the startup lines are read off stderr), bound to 0.0.0.0 or
// loopback and reached on 127.0.0.1 with explicit Host headers (Bun's fetch
// sends the Host it is given).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { ServerProcess } from "../../scenarios/support.ts";
import { envelope } from "../support.ts";

const WARNING =
  "superfluid: WARNING --api-key not set. Authentication is OFF — anyone who can reach this port can use the API. Bind loopback or set --api-key.";
const SECRETS = { global: "sk-hosts-global-5d6e7f", chat: "sk-hosts-chat-1a2b3c", ops: "sk-hosts-ops-9f8e7d" };
const MACHINE = hostname();

const dir = mkdtempSync(join(tmpdir(), "superfluid-auth-hosts-"));
const policy = join(dir, "keys.json");
writeFileSync(
  policy,
  JSON.stringify({
    keys: [
      { name: "chat-ui", key: SECRETS.chat },
      { name: "ops", key_env: "SUPERFLUID_TEST_OPS_KEY", admin: true },
    ],
  }),
);

// The ops key comes from the environment (key_env), which the server processes inherit.
process.env.SUPERFLUID_TEST_OPS_KEY = SECRETS.ops;

const servers: ServerProcess[] = [];
/** A server as its own process, on its own sessions folder; killed in afterAll. */
async function spawn(name: string, args: string[]): Promise<ServerProcess> {
  const sessions = join(dir, `sessions-${name}`);
  const p = await ServerProcess.spawn(["--sessions", sessions, "--max-batch", "1", ...args], undefined, "tiny-chat");
  servers.push(p);
  const state = await p.waitHealthy(60_000);
  if (state !== "healthy") throw new Error(`the ${name} server is ${state}: ${p.stderr}`);
  return p;
}

let open: ServerProcess; // 0.0.0.0, no key, --web-origin https://app.example
let keyed: ServerProcess; // 0.0.0.0, --key-policy and --api-key
let loopback: ServerProcess; // 127.0.0.1, no key
let loopbackKeyed: ServerProcess; // 127.0.0.1, --api-key

beforeAll(async () => {
  open = await spawn("open", ["--host", "0.0.0.0", "--web-origin", "https://app.example"]);
  keyed = await spawn("keyed", ["--host", "0.0.0.0", "--key-policy", policy, "--api-key", SECRETS.global]);
  loopback = await spawn("loopback", []);
  loopbackKeyed = await spawn("loopback-keyed", ["--api-key", SECRETS.global]);
});

afterAll(async () => {
  for (const p of servers) await p.killHard();
  delete process.env.SUPERFLUID_TEST_OPS_KEY;
  rmSync(dir, { recursive: true, force: true });
});

/** GET `path` on 127.0.0.1 with the given headers (host, origin, authorization...). */
async function get(
  p: ServerProcess,
  headers: Record<string, string>,
  path = "/v1/models",
): Promise<{ status: number; json: any }> {
  const res = await fetch(`${p.url}${path}`, { headers });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, json };
}

/** What the server wrote to stderr, by line (the auth line comes before /health answers). */
const lines = (p: ServerProcess) => p.stderr.split("\n");

describe("the startup lines", () => {
  test("bound to 0.0.0.0 without a key: the exact warning", () => {
    expect(lines(open)).toContain(WARNING);
  });

  test("on loopback without a key: the informational line, no warning", () => {
    expect(lines(loopback)).toContain("superfluid: authentication is off (listening on loopback only)");
    expect(loopback.stderr).not.toContain("WARNING");
  });

  test("with keys: the line names the policy keys and never a secret", () => {
    const line = lines(keyed).find((l) => l.startsWith("superfluid: authentication is on"));
    expect(line).toBeDefined();
    expect(line).toContain("2 policy keys (chat-ui, ops)");
    expect(keyed.stderr).not.toContain("WARNING");
    for (const secret of Object.values(SECRETS)) expect(keyed.stderr).not.toContain(secret);

    const globalOnly = lines(loopbackKeyed).find((l) => l.startsWith("superfluid: authentication is on"));
    expect(globalOnly).toBeDefined();
    expect(loopbackKeyed.stderr).not.toContain(SECRETS.global);
  });
});

describe("Host off loopback", () => {
  const port = () => open.port;

  test("without a key: IP literals, localhost, this machine's name and <name>.local pass", async () => {
    const accepted = [
      `127.0.0.1:${port()}`,
      "127.0.0.1",
      "10.20.30.40",
      `192.168.1.7:${port()}`,
      "[::1]",
      `[fe80::1]:${port()}`,
      "localhost",
      `localhost:${port()}`,
      MACHINE,
      `${MACHINE}:${port()}`,
      MACHINE.toUpperCase(),
      `${MACHINE}.local`,
      `${MACHINE}.local:${port()}`,
    ];
    const refused: string[] = [];
    for (const host of accepted) {
      const r = await get(open, { host });
      if (r.status !== 200) refused.push(`${host}: ${r.status} ${JSON.stringify(r.json).slice(0, 160)}`);
    }
    expect(refused).toEqual([]);
  });

  test("without a key: any other name is 403 origin_refused, in the path's family envelope", async () => {
    for (const host of [
      "evil.example",
      `evil.example:${port()}`,
      `${MACHINE}.evil.example`,
      `evil-${MACHINE}`,
      "localhost.evil.example",
    ]) {
      const r = await get(open, { host });
      expect(r.status).toBe(403);
      const e = envelope(r.json);
      expect(e.code).toBe("origin_refused");
      expect(e.message).toContain(host);
    }
    const ollama = await get(open, { host: "evil.example" }, "/api/tags");
    expect(ollama.status).toBe(403);
    expect(Object.keys(ollama.json)).toEqual(["error"]);
    // /health too: the check runs before any route.
    expect((await get(open, { host: "evil.example" }, "/health")).status).toBe(403);
  });

  test("with a key: any Host passes the Host check; then the key decides (401 without it, 200 with it)", async () => {
    for (const host of ["evil.example", `evil.example:${keyed.port}`, "10.20.30.40", MACHINE]) {
      const without = await get(keyed, { host });
      expect(without.status).toBe(401);
      expect(envelope(without.json).code).toBe("invalid_api_key");
      expect((await get(keyed, { host, authorization: `Bearer ${SECRETS.chat}` })).status).toBe(200);
      expect((await get(keyed, { host, "x-api-key": SECRETS.global })).status).toBe(200);
      expect((await get(keyed, { host, authorization: `Bearer ${SECRETS.ops}` })).status).toBe(200);
      expect((await get(keyed, { host }, "/health")).status).toBe(200);
    }
  });

  test("requests without Origin (curl, SDKs) work", async () => {
    expect((await get(open, {})).status).toBe(200);
    const client = new OpenAI({ baseURL: `${keyed.url}/v1`, apiKey: SECRETS.chat, maxRetries: 0, timeout: 60_000 });
    const models = await client.models.list();
    expect(models.data.length).toBe(1);
  });
});

describe("Origin and --web-origin", () => {
  test("--web-origin lets that page origin in; another origin is 403 origin_refused", async () => {
    expect((await get(open, { origin: "https://app.example" })).status).toBe(200);
    // Pages on this machine, any port.
    expect((await get(open, { origin: "http://localhost:5173" })).status).toBe(200);
    for (const origin of [
      "https://evil.example",
      "http://app.example",
      "https://app.example:8443",
      "https://sub.app.example",
      "null",
    ]) {
      const r = await get(open, { origin });
      expect(r.status).toBe(403);
      expect(envelope(r.json).code).toBe("origin_refused");
    }
  });

  test("a key does not lift the Origin check", async () => {
    const r = await get(keyed, { origin: "https://evil.example", authorization: `Bearer ${SECRETS.global}` });
    expect(r.status).toBe(403);
    expect(envelope(r.json).code).toBe("origin_refused");
  });
});

describe("Host on loopback", () => {
  test("loopback names only, with or without a key", async () => {
    for (const p of [loopback, loopbackKeyed]) {
      const key: Record<string, string> = p === loopbackKeyed ? { authorization: `Bearer ${SECRETS.global}` } : {};
      for (const host of ["localhost", `127.0.0.1:${p.port}`, "127.8.9.10", "[::1]"])
        expect((await get(p, { host, ...key })).status).toBe(200);
      // This machine's name is no loopback name (unless it is "localhost").
      const names = MACHINE.toLowerCase() === "localhost" ? [] : [MACHINE];
      for (const host of ["evil.example", ...names, "10.20.30.40"]) {
        const r = await get(p, { host, ...key });
        expect(r.status).toBe(403);
        expect(envelope(r.json).code).toBe("origin_refused");
      }
    }
  });
});
