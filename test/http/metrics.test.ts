// GET /metrics (docs/api/metrics.md), read as a monitoring stack reads it:
// parsed by a Prometheus text-format parser, names and types checked, request
// and token counters against the replies' usage, the TTFT histogram's
// buckets, and counters across a worker killed mid-life.
import { describe, expect, test } from "bun:test";
import parse, { type ParsedFamily } from "parse-prometheus-text-format";
import { postJson, readSse, useServer } from "./support.ts";

const s = useServer();
const user = (content: string) => [{ role: "user" as const, content }];

async function scrape(path = "/metrics"): Promise<ParsedFamily[]> {
  const res = await fetch(`${s.url}${path}`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
  return parse(await res.text());
}

/** Every sample of a counter or gauge as "name{labels}" -> value. */
function values(families: ParsedFamily[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const f of families) {
    if (f.type !== "COUNTER" && f.type !== "GAUGE") continue;
    for (const m of f.metrics) out.set(`${f.name}${JSON.stringify(m.labels ?? {})}`, Number(m.value));
  }
  return out;
}

/** The sum of one family's samples whose labels include `match`. */
function total(families: ParsedFamily[], name: string, match: Record<string, string> = {}): number {
  const family = families.find((f) => f.name === name);
  if (!family) return 0;
  return family.metrics
    .filter((m) => Object.entries(match).every(([k, v]) => m.labels?.[k] === v))
    .reduce((n, m) => n + Number(m.value), 0);
}

describe("/metrics", () => {
  test("every name has the superfluid_ prefix, counters end in _total, /v1/metrics is the same exposition", async () => {
    const families = await scrape();
    expect(families.length).toBeGreaterThan(10);
    for (const f of families) {
      // Besides ours: the routers' gauges under vLLM's names (docs/api/metrics.md#router-gauges).
      if (f.name.startsWith("vllm:")) {
        expect(f.type).toBe("GAUGE");
        continue;
      }
      expect(f.name).toStartWith("superfluid_");
      if (f.type === "COUNTER") expect(f.name).toEndWith("_total");
    }
    const names = families.map((f) => f.name);
    for (const name of [
      "superfluid_ticks_total",
      "superfluid_prefill_tokens_total",
      "superfluid_decode_tokens_total",
      "superfluid_decode_steps_total",
      "superfluid_warm_prefix_tokens_total",
      "superfluid_cold_admissions_total",
      "superfluid_preemptions_total",
      "superfluid_worker_respawns_total",
      "superfluid_fim_completions_total",
      "superfluid_lanes_active",
      "superfluid_pool_blocks_used",
      "superfluid_pool_blocks_total",
      "superfluid_prefill_budget_tokens",
      "superfluid_queue_depth",
      "superfluid_node_info",
      "superfluid_ttft_seconds",
    ])
      expect(names).toContain(name);
    expect(families.find((f) => f.name === "superfluid_ttft_seconds")!.type).toBe("HISTOGRAM");
    // Engine series carry the model; the queue one class per QoS class.
    expect(total(families, "superfluid_pool_blocks_total", { model: s.model })).toBeGreaterThan(0);
    const classes = families.find((f) => f.name === "superfluid_queue_depth")!.metrics.map((m) => m.labels!.class);
    expect(classes.sort()).toEqual(["agent", "background", "completion", "interactive"]);
    expect(families.find((f) => f.name === "superfluid_node_info")!.metrics[0]!.labels!.host).toBeTruthy();
    expect((await scrape("/v1/metrics")).map((f) => f.name)).toEqual(names);
  });

  test("after N requests the request and token counters moved by exactly the replies' usage", async () => {
    const before = await scrape();
    const chat = "/v1/chat/completions";
    const usage = { prompt: 0, completion: 0, requests: 0 };
    const add = (u: { prompt_tokens: number; completion_tokens: number }) => {
      usage.prompt += u.prompt_tokens;
      usage.completion += u.completion_tokens;
      usage.requests++;
    };
    for (let i = 0; i < 3; i++) {
      const reply = await s.client.chat.completions.create({
        model: s.model,
        messages: user(`count ${i}`),
        max_tokens: 6 + i,
        temperature: 0,
      });
      add(reply.usage!);
    }
    const streamed = await fetch(`${s.url}${chat}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: s.model, messages: user("a stream"), max_tokens: 5, stream: true }),
    });
    add((await readSse(streamed)).events.find((f) => f.usage)!.usage);
    const completion = await s.client.completions.create({ model: s.model, prompt: "Once upon", max_tokens: 4 });
    const after = await scrape();

    const moved = (name: string, match: Record<string, string>) =>
      total(after, name, match) - total(before, name, match);
    const chatLabels = { route: chat, model: s.model };
    expect(moved("superfluid_requests_total", chatLabels)).toBe(usage.requests);
    expect(moved("superfluid_prompt_tokens_total", chatLabels)).toBe(usage.prompt);
    expect(moved("superfluid_completion_tokens_total", chatLabels)).toBe(usage.completion);
    const cmpl = { route: "/v1/completions", model: s.model };
    expect(moved("superfluid_requests_total", cmpl)).toBe(1);
    expect(moved("superfluid_prompt_tokens_total", cmpl)).toBe(completion.usage!.prompt_tokens);
    expect(moved("superfluid_completion_tokens_total", cmpl)).toBe(completion.usage!.completion_tokens);
    // The decode counter counts generated tokens, as usage does (issue #34:
    // it moved by one less a reply, the last token never being fed back);
    // decode steps have their own counter and trail it by at most one a reply.
    const generated = usage.completion + completion.usage!.completion_tokens;
    expect(moved("superfluid_decode_tokens_total", { model: s.model })).toBe(generated);
    const steps = moved("superfluid_decode_steps_total", { model: s.model });
    expect(steps).toBeLessThanOrEqual(generated);
    expect(steps).toBeGreaterThanOrEqual(generated - usage.requests - 1);
    expect(moved("superfluid_ticks_total", { model: s.model })).toBeGreaterThan(0);
  });

  test("the TTFT histogram's buckets are cumulative and hold each first token", async () => {
    const buckets = async () => {
      const ttft = (await scrape()).find((f) => f.name === "superfluid_ttft_seconds")!;
      // One model: one series (the parser merges a labelled histogram's buckets and drops its sum and count).
      return Object.entries(ttft.metrics[0]?.buckets ?? {})
        .map(([le, n]) => [le === "+Inf" ? Infinity : Number(le), Number(n)] as const)
        .sort((a, b) => a[0] - b[0]);
    };
    const before = await buckets();
    const count = before.at(-1)?.[1] ?? 0;
    const reply = await s.client.chat.completions.create({
      model: s.model,
      messages: user("ttft"),
      max_tokens: 3,
      ignore_eos: true,
    } as any);
    expect(reply.usage!.completion_tokens).toBe(3);
    const after = await buckets();
    expect(after.length).toBe(14);
    expect(after.at(0)![0]).toBe(0.005);
    expect(after.at(-2)![0]).toBe(40);
    for (let i = 1; i < after.length; i++) expect(after[i]![1]).toBeGreaterThanOrEqual(after[i - 1]![1]);
    // One request, one first token.
    expect(after.at(-1)![1]).toBe(count + 1);
  });

  test("counters only grow across a worker kill", async () => {
    // Four tokens each, whatever is sampled (an end-of-turn first token would decode nothing).
    const fourTokens = (text: string) =>
      postJson(s, "/v1/chat/completions", {
        model: s.model,
        messages: user(text),
        max_tokens: 4,
        temperature: 0,
        ignore_eos: true,
      });
    expect((await fourTokens("before the kill")).json.usage.completion_tokens).toBe(4);
    const before = await scrape();
    const worker = s.server.registry.default!.worker;
    const pid = worker.pid!;
    process.kill(pid, "SIGKILL");
    // The next request waits for the replacement worker.
    while (worker.pid === pid) await Bun.sleep(20);
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
    expect((await fourTokens("after the kill")).json.usage.completion_tokens).toBe(4);
    const after = await scrape();

    const counters = new Set(before.filter((f) => f.type === "COUNTER").map((f) => f.name));
    const was = values(before);
    const now = values(after);
    let compared = 0;
    for (const [key, value] of was) {
      if (!counters.has(key.slice(0, key.indexOf("{")))) continue;
      expect({ key, value: now.get(key) ?? -1 }).toEqual({ key, value: Math.max(value, now.get(key) ?? -1) });
      compared++;
    }
    expect(compared).toBeGreaterThan(10);
    const model = { model: s.model };
    expect(total(after, "superfluid_worker_respawns_total", model)).toBe(
      total(before, "superfluid_worker_respawns_total", model) + 1,
    );
    // What the dead worker had counted is still there, and the new worker's work is added.
    expect(total(after, "superfluid_ticks_total", model)).toBeGreaterThan(
      total(before, "superfluid_ticks_total", model),
    );
    expect(total(after, "superfluid_decode_tokens_total", model)).toBeGreaterThan(
      total(before, "superfluid_decode_tokens_total", model),
    );
  });
});
