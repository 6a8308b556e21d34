// --public-metrics (docs/api/security.md): on a server with keys, GET
// /metrics answers a scrape that sends none (a router's metrics scraper, the
// Inference Extension's endpoint picker), without any key's name; a key still
// sees what it saw; every other route still needs a key.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useServer } from "../support.ts";

const dir = mkdtempSync(join(tmpdir(), "sf-public-metrics-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const policy = join(dir, "keys.json");
writeFileSync(policy, JSON.stringify({ keys: [{ name: "ops-team", key: "sk-public-metrics-ops", admin: true }] }));

const s = useServer({
  fixture: "tiny-chat",
  apiKey: "sk-public-metrics-ops",
  extraArgs: ["--key-policy", policy, "--public-metrics"],
});

test("a scrape without a key: 200, the router gauges, no key's name", async () => {
  for (const path of ["/metrics", "/v1/metrics"]) {
    const res = await fetch(`${s.url}${path}`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain("vllm:num_requests_running{");
    expect(text).toContain("superfluid_queue_depth");
    expect(text).not.toContain("superfluid_key_");
    expect(text).not.toContain("ops-team");
  }
});

test("the key's own scrape still has its series", async () => {
  const res = await fetch(`${s.url}/metrics`, { headers: { authorization: "Bearer sk-public-metrics-ops" } });
  expect(res.status).toBe(200);
  expect(await res.text()).toContain('superfluid_key_requests_total{key="ops-team"}');
});

test("every other route still needs the key; a POST to /metrics is not let in", async () => {
  expect((await fetch(`${s.url}/v1/models`)).status).toBe(401);
  expect((await fetch(`${s.url}/props`)).status).toBe(401);
  expect((await fetch(`${s.url}/metrics`, { method: "POST" })).status).toBe(401);
});
