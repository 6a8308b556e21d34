// Speculative decoding from the command line to the reply (docs/cli.md#speculative-decoding):
// a server started with --speculate answers the same greedy text as one
// without, its replies carry superfluid.spec when they drafted (and only
// then), /metrics counts the drafts, /v1/models and the startup log name the
// strategy. The built-in tiny-chat model repeats what it has said before
// token for token (its next token depends on the current one alone), so a
// reply that is already in the prompt, or its filler after `ignore_eos`,
// is what prompt lookup drafts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, type RunningServer } from "../../../src/cli/serve.ts";
import { parseServeOptions, type ServeOptions } from "../../../src/cli/serve-options.ts";
import { parseExposition } from "../../../src/cli/top-parse.ts";
import { fixturePath } from "../../support/models.ts";
import { getJson, post, postJson, readSse, useServer, type TestServer } from "../support.ts";

const SENTENCE = "Hello from superfluid's built-in test model.";
// The reply is already in the conversation: after its first tokens, the rest is drafted from the earlier turn.
const REPEATING_CHAT = [
  { role: "user", content: "Say it." },
  { role: "assistant", content: SENTENCE },
  { role: "user", content: "Again." },
];
// Drafting on every round it can (no gate turns it off mid-test): what is drafted then depends on the text alone.
const SPECULATE = ["--speculate", "prompt-lookup", "--no-spec-throughput-gate", "--spec-min-yield", "0"];

/** The spec counters of a server's /metrics, summed over its models. */
async function specCounters(s: TestServer): Promise<{ proposed: number; accepted: number }> {
  const samples = parseExposition(await (await fetch(`${s.url}/metrics`)).text());
  const sum = (name: string) => samples.filter((x) => x.name === name).reduce((n, x) => n + x.value, 0);
  return { proposed: sum("superfluid_spec_proposed_total"), accepted: sum("superfluid_spec_accepted_total") };
}

function expectSpec(spec: any): void {
  expect(spec).toBeDefined();
  expect(spec.proposed).toBeGreaterThan(0);
  expect(spec.accepted).toBeGreaterThanOrEqual(0);
  expect(spec.accepted).toBeLessThanOrEqual(spec.proposed);
  expect(spec.acceptance_rate).toBe(Math.round((spec.accepted / spec.proposed) * 1000) / 1000);
  expect(new Set(Object.keys(spec))).toEqual(new Set(["proposed", "accepted", "acceptance_rate"]));
}

describe("speculative decoding end to end (tiny-chat)", () => {
  const plain = useServer({ fixture: "tiny-chat", maxBatch: 2 });
  const spec = useServer({ fixture: "tiny-chat", maxBatch: 2, extraArgs: SPECULATE });

  test("a greedy chat that repeats its context: the same text as without speculation, with superfluid.spec", async () => {
    const body = (s: TestServer) => ({ model: s.model, messages: REPEATING_CHAT, max_tokens: 64, temperature: 0 });
    const [a, b] = await Promise.all([
      postJson(plain, "/v1/chat/completions", body(plain)),
      postJson(spec, "/v1/chat/completions", body(spec)),
    ]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(b.json.choices[0].message.content).toBe(SENTENCE);
    expect(b.json.choices[0].message.content).toBe(a.json.choices[0].message.content);
    expect(b.json.usage).toEqual(a.json.usage);
    expect(a.json.superfluid).toEqual({ warm: a.json.usage.prompt_tokens_details.cached_tokens });
    expectSpec(b.json.superfluid.spec);
    // The reply's 9 tokens: at most 8 of them can have been drafted (the first is looked up from).
    expect(b.json.superfluid.spec.accepted).toBeGreaterThan(0);
    expect(b.json.superfluid.warm).toBe(b.json.usage.prompt_tokens_details.cached_tokens);
  });

  test("streamed: the final chunk carries superfluid.spec beside warm; the text is the same", async () => {
    const stream = async (s: TestServer) =>
      readSse(
        await post(s, "/v1/chat/completions", {
          model: s.model,
          messages: REPEATING_CHAT,
          max_tokens: 64,
          temperature: 0,
          stream: true,
        }),
      );
    const [a, b] = await Promise.all([stream(plain), stream(spec)]);
    const text = (events: any[]) => events.map((e) => e.choices[0]?.delta?.content ?? "").join("");
    expect(text(b.events)).toBe(SENTENCE);
    expect(text(b.events)).toBe(text(a.events));
    const last = b.events.at(-1);
    expect(last.choices[0].finish_reason).toBe("stop");
    expectSpec(last.superfluid.spec);
    expect(last.superfluid.warm).toBe(last.usage.prompt_tokens_details.cached_tokens);
    // Only the terminal chunk carries the superfluid object; without speculation it has no spec.
    expect(b.events.slice(0, -1).some((e) => e.superfluid !== undefined)).toBe(false);
    expect(a.events.at(-1).superfluid.spec).toBeUndefined();
  });

  test("/v1/completions on a repeating continuation: same text, superfluid.spec, and /metrics counts exactly its drafts", async () => {
    const before = await specCounters(spec);
    // A prompt ending in a blank line gets the sentence; ignore_eos then fills to the cap with a repeating pattern.
    const body = (s: TestServer) => ({
      model: s.model,
      prompt: "Say it.\n\n",
      max_tokens: 96,
      temperature: 0,
      ignore_eos: true,
    });
    const [a, b] = await Promise.all([
      postJson(plain, "/v1/completions", body(plain)),
      postJson(spec, "/v1/completions", body(spec)),
    ]);
    expect(b.status).toBe(200);
    expect(b.json.choices[0].text).toStartWith(SENTENCE);
    expect(b.json.choices[0].text).toBe(a.json.choices[0].text);
    expect(b.json.usage.completion_tokens).toBe(96);
    expect(a.json.superfluid.spec).toBeUndefined();
    const s = b.json.superfluid.spec;
    expectSpec(s);
    // The filler repeats: its drafts are accepted (how many rounds draft is the engine's affair).
    expect(s.accepted).toBeGreaterThan(0);
    const after = await specCounters(spec);
    expect({ proposed: after.proposed - before.proposed, accepted: after.accepted - before.accepted }).toEqual({
      proposed: s.proposed,
      accepted: s.accepted,
    });
    expect(await specCounters(plain)).toEqual({ proposed: 0, accepted: 0 });
  });

  test("n choices: superfluid.spec sums them, as /metrics does", async () => {
    const before = await specCounters(spec);
    const res = await postJson(spec, "/v1/chat/completions", {
      model: spec.model,
      messages: REPEATING_CHAT,
      max_tokens: 64,
      temperature: 0,
      n: 2,
    });
    expect(res.status).toBe(200);
    expect(res.json.choices.map((c: any) => c.message.content)).toEqual([SENTENCE, SENTENCE]);
    const s = res.json.superfluid.spec;
    expectSpec(s);
    const after = await specCounters(spec);
    expect({ proposed: after.proposed - before.proposed, accepted: after.accepted - before.accepted }).toEqual({
      proposed: s.proposed,
      accepted: s.accepted,
    });
  });

  test("a request with logprobs never drafts: no superfluid.spec, the metrics unchanged", async () => {
    const before = await specCounters(spec);
    const res = await postJson(spec, "/v1/chat/completions", {
      model: spec.model,
      messages: REPEATING_CHAT,
      max_tokens: 64,
      temperature: 0,
      logprobs: true,
    });
    expect(res.status).toBe(200);
    expect(res.json.choices[0].message.content).toBe(SENTENCE);
    expect(res.json.superfluid.spec).toBeUndefined();
    expect(await specCounters(spec)).toEqual(before);
  });

  test("/v1/models names the strategy each model runs", async () => {
    expect((await getJson(spec, "/v1/models")).json.data[0].meta.speculation).toBe("prompt-lookup");
    expect((await getJson(plain, "/v1/models")).json.data[0].meta.speculation).toBe("off");
  });
});

describe("--speculate auto at startup", () => {
  let server: RunningServer | undefined;
  let sessions = "";
  const lines: string[] = [];
  beforeAll(async () => {
    sessions = mkdtempSync(join(tmpdir(), "superfluid-spec-test-"));
    const opts = parseServeOptions([
      await fixturePath("tiny-random"),
      "--port",
      "0",
      "--max-batch",
      "1",
      "--max-context",
      "1024",
      "--threads",
      "1",
      "--sessions",
      sessions,
      "--speculate",
      "auto",
    ]);
    server = await startServer(opts as ServeOptions, (line) => lines.push(line));
  });
  afterAll(async () => {
    await server?.close();
    if (sessions) rmSync(sessions, { recursive: true, force: true });
  });

  test("a model that can cut a draft off its KV runs prompt-lookup, named once in the startup log after its window line", () => {
    const named = lines.filter((l) => l.startsWith("superfluid: speculation:"));
    expect(named).toEqual(["superfluid: speculation: prompt-lookup"]);
    const at = lines.indexOf(named[0]!);
    expect(lines[at - 1]).toStartWith("superfluid: window ");
  });
});

describe("--speculate draft-model:PATH (tiny-random with its layer-skip draft fixture)", () => {
  let draftPath = "";
  // Before the servers' own beforeAll hooks (they run in order): the flag needs the file.
  beforeAll(async () => {
    draftPath = await fixturePath("tiny-random-draft");
  });
  const plain = useServer({ fixture: "tiny-random", maxBatch: 2 });
  const spec = useServer({
    fixture: "tiny-random",
    maxBatch: 2,
    get extraArgs() {
      return ["--speculate", `draft-model:${draftPath}`, "--no-spec-throughput-gate", "--spec-min-yield", "0"];
    },
  });

  test("greedy chat: the same text as without speculation, drafted by the draft model, named draft-model", async () => {
    const body = (s: TestServer) => ({
      model: s.model,
      messages: [{ role: "user", content: "tell me a story about a kite" }],
      max_tokens: 40,
      temperature: 0,
    });
    const [a, b] = await Promise.all([
      postJson(plain, "/v1/chat/completions", body(plain)),
      postJson(spec, "/v1/chat/completions", body(spec)),
    ]);
    expect(b.status).toBe(200);
    expect(b.json.choices[0].message.content).toBe(a.json.choices[0].message.content);
    expect(b.json.usage).toEqual(a.json.usage);
    expectSpec(b.json.superfluid.spec);
    expect((await getJson(spec, "/v1/models")).json.data[0].meta.speculation).toBe("draft-model");
  });
});
