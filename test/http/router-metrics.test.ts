// The routers' gauges (docs/api/metrics.md#router-gauges) under load: with 2
// lanes and 4 long requests, a scrape shows 2 running and 2 waiting, KV usage
// equal to our own pool gauges' ratio, and all of it back to 0 once the
// requests are gone. Events, not clocks: scrapes are polled until the state
// shows, with a hang guard only.
import { describe, expect, test } from "bun:test";
import { useServer, user } from "./support.ts";

const LANES = 2;
const s = useServer({ maxBatch: LANES });

/** One scrape's samples: `name{labels}` → value. */
async function scrape(): Promise<Map<string, number>> {
  const text = await (await fetch(`${s.url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || line.trim() === "") continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** The first scrape that satisfies `ok` (the hang guard is no bound on the wait). */
async function scrapeUntil(ok: (m: Map<string, number>) => boolean, hangGuardMs = 120_000) {
  const started = performance.now();
  for (;;) {
    const m = await scrape();
    if (ok(m)) return m;
    if (performance.now() - started > hangGuardMs) throw new Error(`never: ${JSON.stringify([...m].slice(0, 40))}`);
    await Bun.sleep(10);
  }
}

describe("router gauges under vLLM's names", () => {
  test("running, waiting and KV usage move with the traffic and match our own gauges", async () => {
    const id = `{model_name="${s.model}"}`;
    const ours = `{model="${s.model}"}`;
    const idle = await scrapeUntil((m) => m.get(`vllm:num_requests_running${id}`) === 0);
    expect(idle.get(`vllm:num_requests_waiting${id}`)).toBe(0);
    const cells = idle.get(`superfluid_pool_blocks_total${ours}`)!;
    expect(cells).toBeGreaterThan(0);
    expect(idle.get(`vllm:cache_config_info{model_name="${s.model}",block_size="1",num_gpu_blocks="${cells}"}`)).toBe(
      1,
    );
    const lora = [...idle].find(([k]) => k.startsWith("vllm:lora_requests_info{"));
    expect(lora?.[0]).toBe(
      `vllm:lora_requests_info{model_name="${s.model}",max_lora="0",running_lora_adapters="",waiting_lora_adapters=""}`,
    );

    const aborts = Array.from({ length: 2 * LANES }, () => new AbortController());
    const requests = aborts.map((a, i) =>
      fetch(`${s.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: s.model,
          messages: user(`story ${i}`),
          max_tokens: 100_000,
          ignore_eos: true,
          stream: true,
        }),
        signal: a.signal,
      }).then(
        async (r) => {
          // Read until aborted: the stream stays open while the request runs.
          try {
            for await (const _ of r.body!);
          } catch {}
        },
        () => {},
      ),
    );
    const busy = await scrapeUntil(
      (m) => m.get(`vllm:num_requests_running${id}`) === LANES && m.get(`vllm:num_requests_waiting${id}`) === LANES,
    );
    const usage = busy.get(`vllm:kv_cache_usage_perc${id}`)!;
    expect(usage).toBeGreaterThan(0);
    expect(usage).toBeLessThanOrEqual(1);
    expect(usage).toBeCloseTo(
      busy.get(`superfluid_pool_blocks_used${ours}`)! / busy.get(`superfluid_pool_blocks_total${ours}`)!,
      12,
    );
    // Waiting is our queue depth over every class.
    const queued = [...busy].filter(([k]) => k.startsWith(`superfluid_queue_depth{model="${s.model}"`));
    expect(queued.reduce((n, [, v]) => n + v, 0)).toBe(LANES);

    for (const a of aborts) a.abort();
    await Promise.all(requests);
    await scrapeUntil(
      (m) => m.get(`vllm:num_requests_running${id}`) === 0 && m.get(`vllm:num_requests_waiting${id}`) === 0,
    );
  }, 300_000);
});
