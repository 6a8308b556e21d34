// `superfluid serve` flags: defaults, both value spellings, the closest-flag
// hint, and the startup refusals llama.cpp's runtime must give (docs/cli.md#accepted-and-refused-flags).
import { describe, expect, test } from "bun:test";
import { parseServeOptions, UsageError, type ServeOptions } from "../src/cli/serve-options.ts";

const parse = (...argv: string[]) => parseServeOptions(argv, { HOME: "/home/u" }) as ServeOptions;

describe("serve options", () => {
  test("defaults", () => {
    const o = parse();
    expect(o).toMatchObject({ models: [], host: "127.0.0.1", port: 8453, maxBatch: 8, prefillBudget: 4096, tui: false });
    expect(o.maxTokens).toBeUndefined();
    // No sizing flag: a shared KV pool sized from memory (the worker decides).
    expect(o.maxContext).toBeUndefined();
    expect(o.kvPool).toBeUndefined();
    expect(o.threads).toBeGreaterThan(0);
  });

  test("--flag value and --flag=value; --http wins over --host/--port; aliases; the max-context floor", () => {
    const o = parse("m.gguf", "--http=0.0.0.0:9000", "--port", "1", "--max-batch-size", "4", "--max-context=100", "--no-tui", "--speculate", "off");
    expect(o).toMatchObject({ models: ["m.gguf"], host: "0.0.0.0", port: 9000, maxBatch: 4, maxContext: 512, tui: false });
    expect(parse("--http", "[::1]:8080")).toMatchObject({ host: "::1", port: 8080 });
  });

  test("--max-context N|auto and --kv-pool N", () => {
    expect(parse("--max-context", "16384").maxContext).toBe(16384);
    expect(parse("--max-context", "auto").maxContext).toBeUndefined();
    expect(parse("--max-context", "AUTO").maxContext).toBeUndefined();
    expect(parse("--kv-pool", "100000")).toMatchObject({ kvPool: 100000 });
    expect(parse("--kv-pool", "100").kvPool).toBe(512);
    expect(parse("--kv-pool", "65536", "--max-context", "8192")).toMatchObject({ kvPool: 65536, maxContext: 8192 });
    expect(() => parse("--max-context", "lots")).toThrow("--max-context expects a whole number or auto, got 'lots'");
    expect(() => parse("--kv-pool", "0")).toThrow("--kv-pool expects a whole number of at least 1");
  });

  test("operator sampling flags", () => {
    expect(parse("--temperature", "0.7", "--top-k", "20", "--repeat-penalty", "1.1").sampling).toMatchObject({ temperature: 0.7, topK: 20, repeatPenalty: 1.1 });
  });

  test("an unknown flag names the closest valid one; a bad value names the flag and what it expected", () => {
    expect(() => parse("--max-batc", "4")).toThrow("unknown flag --max-batc; did you mean --max-batch?");
    expect(() => parse("--max-batch", "lots")).toThrow("--max-batch expects a whole number between 1 and 256, got 'lots'");
    expect(() => parse("--temperature", "5")).toThrow(UsageError);
    expect(() => parse("--http", "nowhere")).toThrow("--http expects ADDR:PORT");
  });

  test("llama.cpp's startup refusals, in the spec's words", () => {
    expect(() => parse("--kv-bits", "8")).toThrow("the llamacpp runtime keeps its KV type per context and exposes no such knob");
    expect(parse("--kv-bits", "0").port).toBe(8453);
    expect(() => parse("--park-lossy")).toThrow("the llamacpp runtime exports no lossy encoding");
    expect(() => parse("--speculate", "eagle3:/x")).toThrow(UsageError);
    expect(parse("--speculate", "auto").port).toBe(8453);
    expect(() => parse("--prefix-blob-budget-mb", "64")).toThrow("no prefix blob store");
  });

  test("key and limit flags: --api-key repeatable and printable ASCII, --rate-limit whole, --web-origin an http(s) origin", () => {
    const o = parse("--api-key", "sk-one", "--api-key", "sk-two", "--rate-limit", "60", "--web-origin", "https://app.example:8443/path");
    expect(o.apiKeys).toEqual(["sk-one", "sk-two"]);
    expect(o.policyKeys).toEqual([]);
    expect(o.rateLimitRpm).toBe(60);
    expect(o.webOrigins).toEqual(["https://app.example:8443"]);
    expect(parse().rateLimitRpm).toBe(0);
    expect(() => parse("--api-key", "")).toThrow("--api-key expects a key");
    expect(() => parse("--api-key", " sk-padded ")).toThrow("printable ASCII");
    expect(() => parse("--api-key", "sk-café")).toThrow("printable ASCII");
    // A bucket of half a request a minute would never hold a whole one.
    expect(() => parse("--rate-limit", "0.5")).toThrow("--rate-limit expects a whole number");
    expect(() => parse("--web-origin", "app.example")).toThrow("--web-origin expects an http:// or https:// origin");
    expect(() => parse("--web-origin", "ftp://app.example")).toThrow("--web-origin expects an http:// or https:// origin");
  });

  test("session and prefix-cache flags", () => {
    expect(parse()).toMatchObject({ sessionsCache: false, pressureHigh: 85, pressureLow: 70 });
    expect(parse().hostCacheMb).toBeUndefined();
    expect(parse("--sessions-cache", "--host-cache-mb", "0", "--pressure-high", "90", "--pressure-low", "50")).toMatchObject({
      sessionsCache: true,
      hostCacheMb: 0,
      pressureHigh: 90,
      pressureLow: 50,
    });
    expect(() => parse("--pressure-high", "60", "--pressure-low", "70")).toThrow("--pressure-low (70) cannot be above --pressure-high (60)");
  });

  test("scheduling and QoS flags: defaults", () => {
    const o = parse();
    expect(o).toMatchObject({
      starvationTicks: 8,
      defaultQos: 2,
      qosHeader: true,
      allowBatchInvariant: false,
      nonstreamKeepalive: 0,
      fimMaxBatch: 2,
      completionDeadlineMs: 0,
      completionRate: 10,
      completionBurst: 20,
    });
    expect(o.classLanes).toBeUndefined();
    expect(o.fimModel).toBeUndefined();
    expect(o.fimMaxContext).toBeUndefined();
  });

  test("scheduling and QoS flags: values, aliases, validation", () => {
    expect(parse("--prefill-budget", "0").prefillBudget).toBe(0);
    expect(parse("--prefill-budget", "64").prefillBudget).toBe(64);
    for (const bad of ["63", "4097", "-1", "1.5", "x"]) expect(() => parse("--prefill-budget", bad)).toThrow("--prefill-budget expects 0 (adaptive) or a whole number between 64 and 4096");
    expect(parse("--starvation-ticks", "0").starvationTicks).toBe(0);
    expect(() => parse("--starvation-ticks", "-1")).toThrow(UsageError);
    expect(parse("--max-batch", "4", "--class-lanes", "background=2,foreground=4").classLanes).toEqual({ background: 2, agent: 4 });
    expect(() => parse("--max-batch", "4", "--class-lanes", "background=5")).toThrow(UsageError);
    expect(() => parse("--class-lanes", "urgent=1")).toThrow(UsageError);
    expect(() => parse("--class-lanes", "agent")).toThrow(UsageError);
    expect(parse("--http-default-qos", "interactive-chat").defaultQos).toBe(0);
    expect(parse("--http-default-qos", "3").defaultQos).toBe(3);
    expect(() => parse("--http-default-qos", "urgent")).toThrow("--http-default-qos expects one of interactive, completion, agent, background");
    expect(parse("--no-http-qos-header", "--http-allow-batch-invariant")).toMatchObject({ qosHeader: false, allowBatchInvariant: true });
    expect(parse("--nonstream-keepalive", "0.5").nonstreamKeepalive).toBe(0.5);
    expect(() => parse("--nonstream-keepalive", "-1")).toThrow(UsageError);
    expect(parse("--fim-model", "coder.gguf", "--fim-max-context", "4096", "--fim-max-batch", "3")).toMatchObject({ fimModel: "coder.gguf", fimMaxContext: 4096, fimMaxBatch: 3 });
    expect(parse("--completion-deadline-ms", "250").completionDeadlineMs).toBe(250);
    expect(parse("--request-timeout", "100").completionDeadlineMs).toBe(100);
    expect(parse("--completion-rate", "0", "--completion-burst", "1")).toMatchObject({ completionRate: 0, completionBurst: 1 });
    expect(parse("--completion-rate", "2.5").completionRate).toBe(2.5);
    expect(() => parse("--completion-burst", "0")).toThrow(UsageError);
    expect(() => parse("--completion-rate", "-1")).toThrow(UsageError);
  });

  test("--alias NAME=ID (repeatable, wildcards kept as written) and --pin-budget-pct", () => {
    expect(parse().aliases).toEqual([]);
    expect(parse("--alias", "claude-*=tiny-chat", "--alias=gpt=m").aliases).toEqual([
      { name: "claude-*", target: "tiny-chat" },
      { name: "gpt", target: "m" },
    ]);
    for (const bad of ["claude", "=x", "x=", "="]) expect(() => parse("--alias", bad)).toThrow(/--alias expects NAME=ID/);
    expect(parse().pinBudgetPct).toBe(50);
    expect(parse("--pin-budget-pct", "0").pinBudgetPct).toBe(0);
    expect(() => parse("--pin-budget-pct", "101")).toThrow(UsageError);
  });

  test("sessions default under SUPERFLUID_HOME", () => {
    expect(parseServeOptions([], { SUPERFLUID_HOME: "/srv/sf" }) as ServeOptions).toMatchObject({ sessions: "/srv/sf/sessions" });
  });
});
