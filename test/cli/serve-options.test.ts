// `superfluid serve` flags: defaults, both value spellings, the closest-flag
// hint, and the startup refusals llama.cpp's runtime must give (docs/cli.md#accepted-and-refused-flags).
import { describe, expect, test } from "bun:test";
import { parseServeOptions, UsageError, type ServeOptions } from "../../src/cli/serve-options.ts";
import { SPECULATION_DEFAULTS } from "../../src/engine/speculation.ts";
import { speculationFlags } from "../../src/engine/speculation-directive.ts";
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";

const parse = (...argv: string[]) => parseServeOptions(argv, { HOME: "/home/u" }) as ServeOptions;

describe("serve options", () => {
  test("defaults", () => {
    const o = parse();
    expect(o).toMatchObject({
      models: [],
      host: "127.0.0.1",
      port: 8453,
      maxBatch: 8,
      prefillBudget: 4096,
      tui: false,
    });
    expect(o.maxTokens).toBeUndefined();
    // No sizing flag: a shared KV pool sized from memory (the worker decides).
    expect(o.maxContext).toBeUndefined();
    expect(o.kvPool).toBeUndefined();
    expect(o.threads).toBeGreaterThan(0);
  });

  test("--flag value and --flag=value; --http wins over --host/--port; aliases; the max-context floor", () => {
    const o = parse(
      "m.gguf",
      "--http=0.0.0.0:9000",
      "--port",
      "1",
      "--max-batch-size",
      "4",
      "--max-context=100",
      "--no-tui",
      "--speculate",
      "off",
    );
    expect(o).toMatchObject({
      models: ["m.gguf"],
      host: "0.0.0.0",
      port: 9000,
      maxBatch: 4,
      maxContext: 512,
      tui: false,
    });
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
    expect(parse("--temperature", "0.7", "--top-k", "20", "--repeat-penalty", "1.1").sampling).toMatchObject({
      temperature: 0.7,
      topK: 20,
      repeatPenalty: 1.1,
    });
  });

  test("an unknown flag names the closest valid one; a bad value names the flag and what it expected", () => {
    expect(() => parse("--max-batc", "4")).toThrow("unknown flag --max-batc; did you mean --max-batch?");
    expect(() => parse("--max-batch", "lots")).toThrow(
      "--max-batch expects a whole number between 1 and 256, got 'lots'",
    );
    expect(() => parse("--temperature", "5")).toThrow(UsageError);
    expect(() => parse("--http", "nowhere")).toThrow("--http expects ADDR:PORT");
  });

  test("llama.cpp's startup refusals, in the spec's words", () => {
    expect(() => parse("--park-lossy")).toThrow("the llamacpp runtime exports no lossy encoding");
    expect(() => parse("--speculate", "eagle3:/x")).toThrow(UsageError);
    expect(parse("--speculate", "auto").port).toBe(8453);
    expect(() => parse("--prefix-blob-budget-mb", "64")).toThrow("no prefix blob store");
  });

  test("key and limit flags: --api-key repeatable and printable ASCII, --rate-limit whole, --web-origin an http(s) origin", () => {
    const o = parse(
      "--api-key",
      "sk-one",
      "--api-key",
      "sk-two",
      "--rate-limit",
      "60",
      "--web-origin",
      "https://app.example:8443/path",
    );
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
    expect(() => parse("--web-origin", "ftp://app.example")).toThrow(
      "--web-origin expects an http:// or https:// origin",
    );
  });

  test("--allow-origin: repeatable patterns, or SUPERFLUID_ALLOW_ORIGINS; a pattern open to any site needs a key", () => {
    expect(parse().allowOrigins).toEqual([]);
    const o = parse("--allow-origin", "chrome-extension://*", "--allow-origin", "HTTPS://App.Example.com:443/");
    expect(o.allowOrigins).toEqual(["chrome-extension://*", "https://app.example.com"]);
    const fromEnv = (env: Record<string, string>, ...argv: string[]) =>
      (parseServeOptions(argv, { HOME: "/home/u", ...env }) as ServeOptions).allowOrigins;
    const env = { SUPERFLUID_ALLOW_ORIGINS: " https://*.example.com, ,tauri://localhost " };
    expect(fromEnv(env)).toEqual(["https://*.example.com", "tauri://localhost"]);
    // The flag wins over the variable, as for every flag.
    expect(fromEnv(env, "--allow-origin", "app://x")).toEqual(["app://x"]);
    expect(() => parse("--allow-origin", "app.example.com")).toThrow("--allow-origin expects an origin such as");
    expect(() => parse("--allow-origin", "https://app.example.com/chat")).toThrow("--allow-origin expects");
    for (const open of ["*", "https://*"]) {
      expect(() => parse("--allow-origin", open)).toThrow(
        `--allow-origin '${open}' lets any web site's pages call this server: it needs a key`,
      );
      expect(() => fromEnv({ SUPERFLUID_ALLOW_ORIGINS: open })).toThrow("it needs a key");
      expect(parse("--allow-origin", open, "--api-key", "sk-one").allowOrigins).toEqual([open]);
    }
  });

  test("--kv-bits and llama-server's -ctk/-ctv: the KV's types, each part overridable", () => {
    expect(parse().kvTypes).toEqual({ k: "f16", v: "f16" });
    expect(parse("--kv-bits", "0").kvTypes).toEqual({ k: "f16", v: "f16" });
    expect(parse("--kv-bits", "8").kvTypes).toEqual({ k: "q8_0", v: "q8_0" });
    expect(parse("--kv-bits", "4").kvTypes).toEqual({ k: "q4_0", v: "q4_0" });
    expect(parse("--kv-bits", "84").kvTypes).toEqual({ k: "q8_0", v: "q4_0" });
    expect(parse("--kv-bits", "16").kvTypes).toEqual({ k: "f16", v: "f16" });
    expect(parse("-ctk", "q8_0", "-ctv", "Q4_0").kvTypes).toEqual({ k: "q8_0", v: "q4_0" });
    expect(parse("--kv-bits", "4", "--cache-type-v", "f16").kvTypes).toEqual({ k: "q4_0", v: "f16" });
    expect(() => parse("--kv-bits", "6")).toThrow("--kv-bits takes 0 (auto), 16, 8, 4 or 84, got '6'");
    expect(() => parse("-ctk", "q3_k")).toThrow("--cache-type-k takes one of f32, f16, bf16, q8_0, q4_0");
    expect(() => parse("-ctv")).toThrow("-ctv needs a value");
  });

  test("session and prefix-cache flags", () => {
    expect(parse()).toMatchObject({ sessionsCache: false, pressureHigh: 85, pressureLow: 70 });
    expect(parse().hostCacheMb).toBeUndefined();
    expect(
      parse("--sessions-cache", "--host-cache-mb", "0", "--pressure-high", "90", "--pressure-low", "50"),
    ).toMatchObject({
      sessionsCache: true,
      hostCacheMb: 0,
      pressureHigh: 90,
      pressureLow: 50,
    });
    expect(() => parse("--pressure-high", "60", "--pressure-low", "70")).toThrow(
      "--pressure-low (70) cannot be above --pressure-high (60)",
    );
  });

  test("parking flags: off by default, a 20 GB budget per park directory, refused beside --sessions-cache", () => {
    expect(parse()).toMatchObject({ park: false, parkBudgetGb: 20 });
    expect(parse("--park", "--park-budget-gb", "0.5")).toMatchObject({ park: true, parkBudgetGb: 0.5 });
    expect(parse("--no-park", "--park-budget-gb=0")).toMatchObject({ park: false, parkBudgetGb: 0 });
    expect(() => parse("--park-budget-gb", "-1")).toThrow("--park-budget-gb expects a number of at least 0");
    expect(() => parse("--park", "--no-park")).toThrow("--park and --no-park contradict each other");
    expect(() => parse("--park", "--sessions-cache")).toThrow("--park cannot be combined with --sessions-cache");
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
    for (const bad of ["63", "4097", "-1", "1.5", "x"])
      expect(() => parse("--prefill-budget", bad)).toThrow(
        "--prefill-budget expects 0 (adaptive) or a whole number between 64 and 4096",
      );
    expect(parse("--starvation-ticks", "0").starvationTicks).toBe(0);
    expect(() => parse("--starvation-ticks", "-1")).toThrow(UsageError);
    expect(parse("--max-batch", "4", "--class-lanes", "background=2,foreground=4").classLanes).toEqual({
      background: 2,
      agent: 4,
    });
    expect(() => parse("--max-batch", "4", "--class-lanes", "background=5")).toThrow(UsageError);
    expect(() => parse("--class-lanes", "urgent=1")).toThrow(UsageError);
    expect(() => parse("--class-lanes", "agent")).toThrow(UsageError);
    expect(parse("--http-default-qos", "interactive-chat").defaultQos).toBe(0);
    expect(parse("--http-default-qos", "3").defaultQos).toBe(3);
    expect(() => parse("--http-default-qos", "urgent")).toThrow(
      "--http-default-qos expects one of interactive, completion, agent, background",
    );
    expect(parse("--no-http-qos-header", "--http-allow-batch-invariant")).toMatchObject({
      qosHeader: false,
      allowBatchInvariant: true,
    });
    expect(parse("--nonstream-keepalive", "0.5").nonstreamKeepalive).toBe(0.5);
    expect(() => parse("--nonstream-keepalive", "-1")).toThrow(UsageError);
    expect(parse("--fim-model", "coder.gguf", "--fim-max-context", "4096", "--fim-max-batch", "3")).toMatchObject({
      fimModel: "coder.gguf",
      fimMaxContext: 4096,
      fimMaxBatch: 3,
    });
    expect(parse("--completion-deadline-ms", "250").completionDeadlineMs).toBe(250);
    expect(parse("--request-timeout", "100").completionDeadlineMs).toBe(100);
    expect(parse("--completion-rate", "0", "--completion-burst", "1")).toMatchObject({
      completionRate: 0,
      completionBurst: 1,
    });
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
    for (const bad of ["claude", "=x", "x=", "="])
      expect(() => parse("--alias", bad)).toThrow(/--alias expects NAME=ID/);
    expect(parse().pinBudgetPct).toBe(50);
    expect(parse("--pin-budget-pct", "0").pinBudgetPct).toBe(0);
    expect(() => parse("--pin-budget-pct", "101")).toThrow(UsageError);
  });

  test("--speculate: off by default; auto and prompt-lookup with the --spec-* tuning at SPECULATION_DEFAULTS", () => {
    expect(parse().speculation).toBeUndefined();
    expect(parse("--speculate", "off").speculation).toBeUndefined();
    expect(parse("--speculate", "auto").speculation).toEqual({ directive: "auto", ...SPECULATION_DEFAULTS });
    expect(parse("--speculate=prompt-lookup").speculation).toEqual({
      directive: "prompt-lookup",
      draftTokens: 4,
      minYield: 0.75,
      yieldRounds: 24,
      throughputGate: true,
      adaptive: true,
      minSpeedup: 1.08,
      probeTokens: 16,
      reprobe: 32,
      reprobeMax: 1024,
    });
    const tuned = parse(
      "--speculate",
      "prompt-lookup",
      "--spec-draft-tokens",
      "15",
      "--spec-min-yield",
      "0",
      "--spec-yield-rounds",
      "1",
      "--no-spec-throughput-gate",
      "--no-spec-adaptive",
      "--spec-min-speedup",
      "0.5",
      "--spec-gate-probe-tokens",
      "1",
      "--spec-gate-reprobe",
      "0",
      "--spec-gate-reprobe-max",
      "8",
    ).speculation;
    expect(tuned).toEqual({
      directive: "prompt-lookup",
      draftTokens: 15,
      minYield: 0,
      yieldRounds: 1,
      throughputGate: false,
      adaptive: false,
      minSpeedup: 0.5,
      probeTokens: 1,
      reprobe: 0,
      reprobeMax: 8,
    });
    expect(parse("--speculate", "auto", "--spec-throughput-gate").speculation?.throughputGate).toBe(true);
    // Each tuning flag falls back to its environment variable, then the default.
    const fromEnv = parseServeOptions(["--speculate", "auto"], {
      HOME: "/home/u",
      SUPERFLUID_SPEC_MIN_YIELD: "0.5",
      SUPERFLUID_SPEC_LANE_YIELD_ROUNDS: "12",
      SUPERFLUID_SPEC_GATE: "0",
      SUPERFLUID_SPEC_ADAPTIVE: "0",
      SUPERFLUID_SPEC_MIN_SPEEDUP: "1.2",
      SUPERFLUID_SPEC_GATE_PROBE: "8",
      SUPERFLUID_SPEC_GATE_REPROBE: "4",
      SUPERFLUID_SPEC_GATE_REPROBE_MAX: "64",
    }) as ServeOptions;
    expect(fromEnv.speculation).toEqual({
      directive: "auto",
      draftTokens: 4,
      minYield: 0.5,
      yieldRounds: 12,
      throughputGate: false,
      adaptive: false,
      minSpeedup: 1.2,
      probeTokens: 8,
      reprobe: 4,
      reprobeMax: 64,
    });
    // The flag wins over the variable.
    expect(
      (
        parseServeOptions(["--speculate", "auto", "--spec-adaptive", "--spec-min-yield", "0.9"], {
          HOME: "/h",
          SUPERFLUID_SPEC_ADAPTIVE: "0",
          SUPERFLUID_SPEC_MIN_YIELD: "0.5",
        }) as ServeOptions
      ).speculation,
    ).toMatchObject({ adaptive: true, minYield: 0.9 });
    expect(() => parseServeOptions(["--speculate", "auto"], { HOME: "/h", SUPERFLUID_SPEC_GATE: "yes" })).toThrow(
      "SUPERFLUID_SPEC_GATE expects 1 or 0, got 'yes'",
    );
    expect(() => parse("--speculate", "auto", "--spec-bitexact")).toThrow(
      "--spec-bitexact: llama.cpp has no batch-invariant kernels",
    );
    expect(parse("--speculate", "auto", "--no-spec-bitexact").speculation).toMatchObject({ directive: "auto" });
    // A re-probe period above the default ceiling raises the ceiling with it.
    expect(parse("--speculate", "auto", "--spec-gate-reprobe", "2000").speculation).toMatchObject({
      reprobe: 2000,
      reprobeMax: 2000,
    });
  });

  test("--spec-* values out of range exit 2 with the reason, even with speculation off", () => {
    const bad: [string[], string][] = [
      [["--spec-draft-tokens", "0"], "--spec-draft-tokens expects a whole number between 1 and 15, got '0'"],
      [["--spec-draft-tokens", "16"], "--spec-draft-tokens expects a whole number between 1 and 15, got '16'"],
      [["--spec-draft-tokens", "2.5"], "--spec-draft-tokens expects a whole number"],
      [["--spec-min-yield", "-0.1"], "--spec-min-yield expects a number of at least 0, got '-0.1'"],
      [["--spec-yield-rounds", "0"], "--spec-yield-rounds expects a whole number of at least 1"],
      [["--spec-min-speedup", "0"], "--spec-min-speedup expects a number above 0, got '0'"],
      [["--spec-min-speedup", "fast"], "--spec-min-speedup expects a number"],
      [["--spec-gate-probe-tokens", "0"], "--spec-gate-probe-tokens expects a whole number of at least 1"],
      [["--spec-gate-reprobe", "-1"], "--spec-gate-reprobe expects a whole number of at least 0"],
      [["--spec-gate-reprobe-max", "0"], "--spec-gate-reprobe-max expects a whole number of at least 1"],
      [
        ["--spec-gate-reprobe", "64", "--spec-gate-reprobe-max", "32"],
        "--spec-gate-reprobe (64) cannot be above --spec-gate-reprobe-max (32)",
      ],
      [
        ["--spec-throughput-gate", "--no-spec-throughput-gate"],
        "--spec-throughput-gate and --no-spec-throughput-gate contradict each other",
      ],
      [["--spec-adaptive", "--no-spec-adaptive"], "--spec-adaptive and --no-spec-adaptive contradict each other"],
      [["--spec-throughput-gate=on"], "--spec-throughput-gate takes no value"],
    ];
    for (const [argv, message] of bad) {
      expect(() => parse(...argv)).toThrow(message);
      expect(() => parse("--speculate", "auto", ...argv)).toThrow(UsageError);
    }
  });

  test("--speculate refuses what llama.cpp cannot run, naming what is available", () => {
    const available = "available: off, auto, prompt-lookup, draft-model:<path or org/repo[:tag]>";
    for (const drafter of ["mtp-head", "dflash:/m/d.gguf", "dspark:/m/d.gguf", "eagle3:/m/e.gguf"]) {
      expect(() => parse("--speculate", drafter)).toThrow(
        `--speculate ${drafter}: the llamacpp runtime cannot run this drafter; ${available}`,
      );
    }
    for (const path of ["/models/drafter.gguf", "./drafter", "drafter.gguf"]) {
      expect(() => parse("--speculate", path)).toThrow(
        `--speculate ${path}: the llamacpp runtime cannot run a drafter named by its path; ${available}`,
      );
    }
    expect(() => parse("--speculate", "draft-model:/m/small.gguf")).toThrow(
      "--speculate draft-model:/m/small.gguf: no such file",
    );
    expect(() => parse("--speculate", "draft-model:")).toThrow("needs the draft model's file");
    expect(() => parse("--speculate", "ngram")).toThrow(`--speculate expects a strategy, got 'ngram'; ${available}`);
    expect(() => parse("--speculate", "")).toThrow(UsageError);
  });

  test("--speculate draft-model:PATH names an existing file, kept as an absolute path", () => {
    const file = `${tmpdir()}/sf-draft-${process.pid}.gguf`;
    writeFileSync(file, "");
    try {
      const o = parse("--speculate", `draft-model:${file}`);
      expect(o.speculation).toMatchObject({ directive: "draft-model", draftModel: file, draftTokens: 4 });
      expect(speculationFlags(o.speculation!)).toContain(`draft-model:${file}`);
    } finally {
      rmSync(file, { force: true });
    }
  });

  test("--speculate draft-model:org/repo[:TAG] is kept as a reference (found or pulled at start); a missing path is refused", () => {
    for (const ref of ["org/tiny-draft-GGUF", "org/tiny-draft-GGUF:Q8_0", "org/tiny-draft-GGUF:draft-Q8_0.gguf"]) {
      const o = parse("--speculate", `draft-model:${ref}`);
      expect(o.speculation).toMatchObject({ directive: "draft-model", draftModel: ref });
    }
    for (const path of ["./m/draft.gguf", "m/draft.gguf", "/m/draft", "~/m/draft.gguf"]) {
      expect(() => parse("--speculate", `draft-model:${path}`)).toThrow(
        `--speculate draft-model:${path}: no such file`,
      );
    }
  });

  test("sessions default under SUPERFLUID_HOME", () => {
    expect(parseServeOptions([], { SUPERFLUID_HOME: "/srv/sf" }) as ServeOptions).toMatchObject({
      sessions: "/srv/sf/sessions",
    });
  });
});
