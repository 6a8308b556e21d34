// Every tool-call dialect driving the random-weight fixture: its forced-call
// grammar, enforced by llama.cpp's grammar sampler, yields replies that its
// own parser reads back as calls whose arguments validate against the tool's
// schema, for many seeds; parsing the reply token by token gives the same
// calls as parsing it whole; parallel calls get distinct ids and indexes.
import Ajv2020 from "ajv/dist/2020";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { IncrementalDecoder } from "../../src/codec/index.ts";
import { TOOL_DIALECTS, type ToolCallEvent, type ToolDialect } from "../../src/codec/tool-dialects/index.ts";
import { Engine, type FinishEvent } from "../../src/engine/engine.ts";
import { LlamaModel } from "../../src/engine/model.ts";
import { GREEDY } from "../../src/engine/sampling.ts";
import { fixturePath } from "../support/models.ts";

const TOOLS = [
  {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 8 }, unit: { enum: ["c", "f"] } },
      required: ["city", "unit"],
      additionalProperties: false,
    },
  },
  {
    name: "get_time",
    parameters: {
      type: "object",
      properties: { zone: { type: "integer", minimum: -12, maximum: 14 } },
      required: ["zone"],
    },
  },
];
const SEEDS = [1, 2, 3, 4, 5, 6];
const ajv = new Ajv2020({ strict: false });

let model: LlamaModel;
let engine: Engine;
let prompt: number[];

beforeAll(async () => {
  model = LlamaModel.load(await fixturePath("tiny-random"));
  engine = new Engine(model, { lanes: 8, cellsPerSequence: 1024, threads: 2, prefillBudget: 512 });
  prompt = model.tokenize("<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n", {
    addSpecial: true,
    parseSpecial: true,
  });
});
afterAll(() => {
  engine.close();
  model.free();
});

/** Generates one reply per seed under `grammar`; returns each reply's tokens and finish. */
function generate(grammar: string, tag: string): { tokens: number[]; finish: FinishEvent }[] {
  const out = new Map<string, number[]>();
  const done = new Map<string, FinishEvent>();
  for (const seed of SEEDS) {
    const id = `${tag}-${seed}`;
    out.set(id, []);
    // Nudge the model to end once the grammar allows it; validity comes from the grammar alone.
    const logitBias = Object.fromEntries(model.vocabInfo.eog.map((t) => [t, 6]));
    engine.submit({
      id,
      prompt,
      sampling: { ...GREEDY, temperature: 1, topK: 40, seed, logitBias },
      maxTokens: 400,
      ignoreEos: false,
      grammar,
    });
  }
  while (engine.hasWork()) {
    const events = engine.tick();
    for (const [id, t] of events.tokens) out.get(id)!.push(t);
    for (const f of events.finished) done.set(f.id, f);
  }
  return SEEDS.map((seed) => ({ tokens: out.get(`${tag}-${seed}`)!, finish: done.get(`${tag}-${seed}`)! }));
}

const text = (tokens: number[]) => Buffer.concat(tokens.map((t) => model.tokenBytes(t))).toString("utf8");

interface Call {
  index: number;
  id: string;
  name: string;
  arguments: string;
}

function calls(events: ToolCallEvent[]): Call[] {
  const found: Call[] = [];
  for (const e of events) {
    if (e.type === "call-start") found[e.index] = { index: e.index, id: e.id, name: e.name, arguments: "" };
    if (e.type === "call-end") found[e.index]!.arguments = e.arguments;
  }
  return found;
}

/** Parses a reply whole, and token by token; both must give the same calls (ids aside). */
function parseBothWays(dialect: ToolDialect, tokens: number[]): Call[] {
  const whole = dialect.parser({ tools: TOOLS });
  const wholeCalls = calls([...whole.push(text(tokens)), ...whole.flush()]);
  // Token by token, as the server streams: through the incremental decoder, so a
  // character whose bytes span several byte-fallback tokens arrives whole.
  const decoder = new IncrementalDecoder(model);
  const streamed = dialect.parser({ tools: TOOLS });
  const events: ToolCallEvent[] = [];
  for (const t of tokens) events.push(...streamed.push(decoder.push([t])));
  events.push(...streamed.push(decoder.flush()), ...streamed.flush());
  const streamedCalls = calls(events);
  const strip = (cs: Call[]) => cs.map(({ id: _, ...rest }) => rest);
  expect(strip(streamedCalls)).toEqual(strip(wholeCalls));
  return wholeCalls;
}

function checkArguments(call: Call): void {
  const tool = TOOLS.find((t) => t.name === call.name);
  expect(tool).toBeDefined();
  expect(ajv.validate(tool!.parameters, JSON.parse(call.arguments))).toBe(true);
}

describe("tool-call dialects on the engine", () => {
  for (const dialect of TOOL_DIALECTS) {
    test(`${dialect.name}: forced calls parse and validate for ${SEEDS.length} seeds`, () => {
      const replies = generate(dialect.forcedGrammar(TOOLS, false), `${dialect.name}-one`);
      let finished = 0;
      for (const r of replies) {
        expect(r.finish.reason === "error" ? r.finish.error : "ok").toBe("ok");
        if (r.finish.reason !== "stop") continue;
        finished++;
        const found = parseBothWays(dialect, r.tokens);
        expect(found).toHaveLength(1);
        checkArguments(found[0]!);
      }
      expect(finished).toBeGreaterThanOrEqual(SEEDS.length / 2);
    });

    test(`${dialect.name}: parallel calls get distinct ids and increasing indexes`, () => {
      const replies = generate(dialect.forcedGrammar(TOOLS, true), `${dialect.name}-many`);
      for (const r of replies) {
        expect(r.finish.reason === "error" ? r.finish.error : "ok").toBe("ok");
        const found = parseBothWays(dialect, r.tokens);
        if (r.finish.reason === "stop") expect(found.length).toBeGreaterThanOrEqual(1);
        expect(found.map((c) => c.index)).toEqual(found.map((_, i) => i));
        expect(new Set(found.map((c) => c.id)).size).toBe(found.length);
        for (const c of found.filter((x) => x.arguments !== "")) if (r.finish.reason === "stop") checkArguments(c);
      }
    });
  }
});
