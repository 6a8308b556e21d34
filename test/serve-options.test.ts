// `superfluid serve` flags: defaults, both value spellings, the closest-flag
// hint, and the startup refusals llama.cpp's runtime must give (features.md 2.3).
import { describe, expect, test } from "bun:test";
import { parseServeOptions, UsageError, type ServeOptions } from "../src/cli/serve-options.ts";

const parse = (...argv: string[]) => parseServeOptions(argv, { HOME: "/home/u" }) as ServeOptions;

describe("serve options", () => {
  test("defaults", () => {
    const o = parse();
    expect(o).toMatchObject({ models: [], host: "127.0.0.1", port: 8453, maxBatch: 8, maxContext: 8192, prefillBudget: 512, tui: false });
    expect(o.maxTokens).toBeUndefined();
    expect(o.threads).toBeGreaterThan(0);
  });

  test("--flag value and --flag=value; --http wins over --host/--port; aliases; the max-context floor", () => {
    const o = parse("m.gguf", "--http=0.0.0.0:9000", "--port", "1", "--max-batch-size", "4", "--max-context=100", "--no-tui", "--speculate", "off");
    expect(o).toMatchObject({ models: ["m.gguf"], host: "0.0.0.0", port: 9000, maxBatch: 4, maxContext: 512, tui: false });
    expect(parse("--http", "[::1]:8080")).toMatchObject({ host: "::1", port: 8080 });
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
  });

  test("sessions default under SUPERFLUID_HOME", () => {
    expect(parseServeOptions([], { SUPERFLUID_HOME: "/srv/sf" }) as ServeOptions).toMatchObject({ sessions: "/srv/sf/sessions" });
  });
});
