// The neutral chat job (src/pipeline/chat-job.ts) driven directly, with no
// HTTP in between: a ChatJob through prepareChat, startChat and choiceText on
// real served models. What an API family maps its request to must come out
// the same whatever the family, so the pipeline's own decisions are checked
// here on the objects it hands the engine (the GenerateRequest, the
// ChoiceEnd) rather than through one family's wire. Also the one stream
// writer (src/http/stream.ts) every family frames its stream with.
//
// Two models, each in its own worker with one thread and two lanes:
// tiny-chat (scripted, its replies fixed: src/fixtures/scripted-chat.ts) for
// how choices end, tiny-random (random weights) for seeded sampling.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ChatTemplate } from "../../src/codec/index.ts";
import type { ToolCallEvent } from "../../src/codec/tool-dialects/index.ts";
import { ServedModel } from "../../src/daemon/served-model.ts";
import type { Generation } from "../../src/daemon/worker-client.ts";
import type { GenerateRequest } from "../../src/engine/jobs.ts";
import { drawSeed } from "../../src/engine/sampling.ts";
import { choiceSeed } from "../../src/pipeline/engine-request.ts";
import { SCRIPTED_REASONING, SCRIPTED_REPLY } from "../../src/fixtures/index.ts";
import { ndjsonFraming, sseFraming, streamResponse } from "../../src/http/stream.ts";
import { renderChatPrompt, type ChatJob, type ChatTool } from "../../src/pipeline/chat-job.ts";
import { choiceText, type ChoiceEnd } from "../../src/pipeline/choice-stream.ts";
import { prepareChat, startChat, type PreparedChat } from "../../src/pipeline/prepare-chat.ts";
import type { GenerationDefaults } from "../../src/pipeline/engine-request.ts";
import { RequestError } from "../../src/daemon/request-error.ts";
import { fixturePath } from "../support/models.ts";

const WINDOW = 2048;
const DEFAULTS: GenerationDefaults = { operatorSampling: {} };

let chat: ServedModel;
let random: ServedModel;

beforeAll(async () => {
  const load = async (kind: "tiny-chat" | "tiny-random") =>
    ServedModel.load({ id: kind, model: await fixturePath(kind), maxBatch: 2, maxContext: WINDOW, threads: 1 });
  // One after the other: the box has two cores and other work on it.
  chat = await load("tiny-chat");
  random = await load("tiny-random");
});

afterAll(async () => {
  await Promise.all([chat?.close(), random?.close()]);
});

const WEATHER_PARAMS = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
const WEATHER: ChatTool = {
  name: "get_weather",
  parameters: WEATHER_PARAMS,
  template: {
    type: "function",
    function: { name: "get_weather", description: "Current weather in a city", parameters: WEATHER_PARAMS },
  },
};

/** A job as a family would map a plain one-turn request: no tools, no constraint, one choice. */
function job(over: Partial<ChatJob> = {}): ChatJob {
  return {
    messages: [{ role: "user", content: "Hi there, who are you?" }],
    tools: [],
    toolChoice: "auto",
    parallelToolCalls: true,
    sampling: {},
    ignoreEos: false,
    stop: [],
    n: 1,
    templateKwargs: {},
    durable: false,
    ...over,
  };
}

/** The rejection of a promise, which must be a RequestError. */
async function refusal(p: Promise<unknown>): Promise<RequestError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(RequestError);
    return err as RequestError;
  }
  throw new Error("expected a RequestError, but the promise resolved");
}

interface ReadChoice {
  content: string;
  reasoning: string;
  calls: ToolCallEvent[];
  end: ChoiceEnd;
}

/** Reads one choice to its end. */
async function read(p: PreparedChat, generation: Generation): Promise<ReadChoice> {
  const out: ReadChoice = { content: "", reasoning: "", calls: [], end: undefined as unknown as ChoiceEnd };
  const stream = choiceText(p.model.tokenizer, generation, p.choice);
  let step = await stream.next();
  while (!step.done) {
    out.content += step.value.content;
    out.reasoning += step.value.reasoning;
    out.calls.push(...(step.value.calls ?? []));
    step = await stream.next();
  }
  out.end = step.value;
  return out;
}

/** Prepares a job, starts its choices and reads them all. */
async function runJob(model: ServedModel, j: ChatJob): Promise<{ p: PreparedChat; choices: ReadChoice[] }> {
  const p = await prepareChat(DEFAULTS, model, j);
  const generations = startChat(p).generations;
  return { p, choices: await Promise.all(generations.map(async (g) => read(p, await g))) };
}

/** Token ids back to text, control tokens spelled out. */
function detokenize(model: ServedModel, tokens: number[]): string {
  return Buffer.concat(tokens.map((t) => model.tokenizer.tokenBytes(t, true))).toString("utf8");
}

describe("prompt building", () => {
  /**
   * The template rendered here and the text tokenized whole, as llama.cpp's server does for content without control
   * text.
   */
  const reference = (model: ServedModel, j: ChatJob, withTools: boolean) => {
    const template = new ChatTemplate(model.info.chatTemplate!);
    const { text } = template.render({
      messages: j.messages,
      ...(withTools ? { tools: j.tools.map((t) => t.template) } : {}),
      addGenerationPrompt: true,
      kwargs: j.templateKwargs,
    });
    return { text, tokens: model.tokenizer.tokenize(text, { addSpecial: true, parseSpecial: true }) };
  };

  test("the tokens are the template's text tokenized, with and without thinking and tools", async () => {
    const jobs = [
      job(),
      job({ templateKwargs: { enable_thinking: true } }),
      job({
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Weather in Oslo?" },
        ],
        tools: [WEATHER],
      }),
    ];
    for (const j of jobs) {
      const rendered = await renderChatPrompt(chat, j);
      expect(rendered.tokens).toEqual(reference(chat, j, j.tools.length > 0).tokens);
    }
  });

  test("enable_thinking changes how the prompt ends", async () => {
    const off = detokenize(chat, (await renderChatPrompt(chat, job())).tokens);
    const on = detokenize(
      chat,
      (await renderChatPrompt(chat, job({ templateKwargs: { enable_thinking: true } }))).tokens,
    );
    // tiny-chat thinks only when asked: otherwise its prompt closes an empty think block.
    expect(off.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(true);
    expect(on.endsWith("<|im_start|>assistant\n")).toBe(true);
    expect(on).not.toContain("<think>");
  });

  test("tools reach the prompt only when the tool choice is not none", async () => {
    const plain = await renderChatPrompt(chat, job());
    const auto = await renderChatPrompt(chat, job({ tools: [WEATHER] }));
    const none = await renderChatPrompt(chat, job({ tools: [WEATHER], toolChoice: "none" }));
    const required = await renderChatPrompt(chat, job({ tools: [WEATHER], toolChoice: "required" }));
    expect(detokenize(chat, auto.tokens)).toContain('"name": "get_weather"');
    expect(required.tokens).toEqual(auto.tokens);
    expect(none.tokens).toEqual(plain.tokens);
    expect(detokenize(chat, none.tokens)).not.toContain("get_weather");
  });

  test("a template's refusal is a RequestError 400", async () => {
    // chat_template_kwargs may not replace the renderer's own variables.
    const err = await refusal(renderChatPrompt(chat, job({ templateKwargs: { messages: [] } })));
    expect(err.status).toBe(400);
    expect(err.message).toStartWith("the chat template refused this request: ");
    const viaPrepare = await refusal(
      prepareChat(DEFAULTS, chat, job({ templateKwargs: { add_generation_prompt: false } })),
    );
    expect(viaPrepare.status).toBe(400);
  });
});

describe("grammar precedence", () => {
  const openerId = () => chat.tokenizer.tokenize("<tool_call>", { addSpecial: false, parseSpecial: true });

  test("the fixture's wire is Hermes, with a trigger and a one-token call opener", () => {
    expect(chat.toolDialect?.trigger).toBe("<tool_call>");
    expect(openerId()).toHaveLength(1);
    expect(chat.callOpenerTokens).toEqual(openerId());
  });

  test("a forced tool choice beats a constraint: the tool grammar, not lazy", async () => {
    const forcedOnly = await prepareChat(DEFAULTS, chat, job({ tools: [WEATHER], toolChoice: "required" }));
    const p = await prepareChat(
      DEFAULTS,
      chat,
      job({ tools: [WEATHER], toolChoice: "required", constraint: { type: "json_object" } }),
    );
    expect(p.request.grammar).toBeDefined();
    expect(p.request.grammar).toBe(forcedOnly.request.grammar!);
    expect(p.request.grammar).toContain("<tool_call>");
    expect(p.request.grammarTrigger).toBeUndefined();
    expect(p.request.bannedTokens).toBeUndefined();
    // A named function is forced the same way.
    const named = await prepareChat(
      DEFAULTS,
      chat,
      job({ tools: [WEATHER], toolChoice: { name: "get_weather" }, constraint: { type: "json_object" } }),
    );
    expect(named.request.grammar).toContain("<tool_call>");
    expect(named.request.grammarTrigger).toBeUndefined();
  });

  test("with auto, a constraint holds the reply and nothing waits for a trigger", async () => {
    const constrainedOnly = await prepareChat(DEFAULTS, chat, job({ constraint: { type: "json_object" } }));
    const p = await prepareChat(
      DEFAULTS,
      chat,
      job({ tools: [WEATHER], toolChoice: "auto", constraint: { type: "json_object" } }),
    );
    expect(p.request.grammar).toBe(constrainedOnly.request.grammar!);
    expect(p.request.grammar).not.toContain("<tool_call>");
    expect(p.request.grammarTrigger).toBeUndefined();
  });

  test("with auto and no constraint, the tool grammar is lazy", async () => {
    const p = await prepareChat(DEFAULTS, chat, job({ tools: [WEATHER], toolChoice: "auto" }));
    expect(p.request.grammar).toContain("<tool_call>");
    expect(p.request.grammarTrigger).toBe("<tool_call>");
    expect(p.request.bannedTokens).toBeUndefined();
  });

  test("tool choice none, or no tools, bans the call opener", async () => {
    for (const j of [job({ tools: [WEATHER], toolChoice: "none" }), job()]) {
      const p = await prepareChat(DEFAULTS, chat, j);
      expect(p.request.bannedTokens).toEqual(openerId());
      expect(p.request.grammar).toBeUndefined();
      expect(p.request.grammarTrigger).toBeUndefined();
    }
  });

  test("a forced choice with no tools is refused on tool_choice", async () => {
    for (const toolChoice of ["required", { name: "get_weather" }] as const) {
      const err = await refusal(prepareChat(DEFAULTS, chat, job({ toolChoice })));
      expect(err.status).toBe(400);
      expect(err.field).toBe("tool_choice");
    }
  });

  test("a schema strict mode cannot enforce is refused naming its path", async () => {
    const schema = { type: "object", properties: { n: { type: "integer", multipleOf: 3 } } };
    const field = "response_format.json_schema.schema";
    const err = await refusal(
      prepareChat(DEFAULTS, chat, job({ constraint: { type: "json_schema", schema, strict: true, field } })),
    );
    expect(err.status).toBe(400);
    expect(err.field).toBe(`${field}.properties.n.multipleOf`);
    expect(err.message).toStartWith("constraint unsatisfiable: ");
    // Not strict: the keyword is skipped and the job prepares.
    const lax = await prepareChat(
      DEFAULTS,
      chat,
      job({ constraint: { type: "json_schema", schema, strict: false, field } }),
    );
    expect(lax.request.grammar).toBeDefined();
  });
});

describe("context and cap", () => {
  test("a prompt longer than the window is context_length_exceeded", async () => {
    const long = "many words in a row ".repeat(2000);
    const err = await refusal(prepareChat(DEFAULTS, chat, job({ messages: [{ role: "user", content: long }] })));
    expect(err.status).toBe(400);
    expect(err.code).toBe("context_length_exceeded");
    expect(err.field).toBe("messages");
  });

  test("a cap beyond the window is cut to what the prompt leaves; one within it stands", async () => {
    expect(chat.contextWindow).toBe(WINDOW);
    const p = await prepareChat(DEFAULTS, chat, job({ maxTokens: 10 * WINDOW }));
    expect(p.request.maxTokens).toBe(WINDOW - p.prompt.length);
    const small = await prepareChat(DEFAULTS, chat, job({ maxTokens: 7 }));
    expect(small.request.maxTokens).toBe(7);
    // No cap asked: the operator's, else the rest of the window.
    const operator = await prepareChat({ ...DEFAULTS, maxTokens: 5 }, chat, job());
    expect(operator.request.maxTokens).toBe(5);
    const rest = await prepareChat(DEFAULTS, chat, job());
    expect(rest.request.maxTokens).toBe(WINDOW - rest.prompt.length);
  });
});

describe("how a choice ends (scripted model)", () => {
  test("no stop string: the whole reply, eos", async () => {
    const { choices } = await runJob(chat, job({ maxTokens: 64 }));
    const c = choices[0]!;
    expect(c.content).toBe(SCRIPTED_REPLY);
    expect(c.end.reason).toBe("eos");
    expect(c.end.finishReason).toBe("stop");
    expect(c.end.stopSequence).toBeUndefined();
    expect(c.end.expired).toBe(false);
  });

  test("a stop string ends it as stop_sequence, naming the string, the match left out", async () => {
    const { choices } = await runJob(chat, job({ maxTokens: 64, stop: ["superfluid"] }));
    const c = choices[0]!;
    expect(c.content).toBe("Hello from ");
    expect(c.end.reason).toBe("stop_sequence");
    expect(c.end.stopSequence).toBe("superfluid");
    expect(c.end.finishReason).toBe("stop");
  });

  test("the cap ends it as length", async () => {
    const { choices } = await runJob(chat, job({ maxTokens: 3 }));
    const c = choices[0]!;
    expect(c.end.reason).toBe("length");
    expect(c.end.finishReason).toBe("length");
    expect(c.end.completionTokens).toBe(3);
    expect(SCRIPTED_REPLY.startsWith(c.content)).toBe(true);
  });

  test("with thinking on, the reasoning is split from the reply", async () => {
    const { choices } = await runJob(chat, job({ maxTokens: 64, templateKwargs: { enable_thinking: true } }));
    expect(choices[0]!.reasoning).toBe(SCRIPTED_REASONING);
    expect(choices[0]!.content).toBe(SCRIPTED_REPLY);
    expect(choices[0]!.end.reason).toBe("eos");
  });

  test("a forced tool call ends as tool_calls, its arguments valid JSON", async () => {
    const { choices } = await runJob(chat, job({ maxTokens: 128, tools: [WEATHER], toolChoice: "required" }));
    const c = choices[0]!;
    expect(c.end.reason).toBe("tool_calls");
    expect(c.end.finishReason).toBe("tool_calls");
    const start = c.calls.find((e) => e.type === "call-start");
    const end = c.calls.find((e) => e.type === "call-end");
    expect(start && start.type === "call-start" && start.name).toBe("get_weather");
    const args = JSON.parse(end && end.type === "call-end" ? end.arguments : "null");
    expect(typeof args.city).toBe("string");
  });
});

describe("n choices and their seeds", () => {
  /** Runs fn with every GenerateRequest the model's worker is sent recorded. */
  async function recording<T>(
    model: ServedModel,
    fn: () => Promise<T>,
  ): Promise<{ result: T; sent: GenerateRequest[] }> {
    const sent: GenerateRequest[] = [];
    const worker = model.worker;
    const original = worker.generate;
    worker.generate = (req, opts) => {
      sent.push(req);
      return original.call(worker, req, opts);
    };
    try {
      return { result: await fn(), sent };
    } finally {
      // The own property shadowed the prototype's method; removing it restores that.
      delete (worker as { generate?: unknown }).generate;
    }
  }

  test("n=3 starts three generations seeded seed, seed+1, seed+2", async () => {
    const seed = 1234;
    const { result, sent } = await recording(chat, () =>
      runJob(chat, job({ n: 3, maxTokens: 16, sampling: { seed, temperature: 1 } })),
    );
    expect(sent).toHaveLength(3);
    expect(sent.map((r) => r.sampling.seed)).toEqual([seed, drawSeed(seed + 1), drawSeed(seed + 2)]);
    // Apart from the seed, the three run the same request.
    for (const r of sent)
      expect({ ...r, sampling: { ...r.sampling, seed: 0 } }).toEqual({
        ...sent[0]!,
        sampling: { ...sent[0]!.sampling, seed: 0 },
      });
    expect(result.choices.map((c) => c.content)).toEqual([SCRIPTED_REPLY, SCRIPTED_REPLY, SCRIPTED_REPLY]);
  });

  test("a seed at the top of the range still gives every choice its own seed", async () => {
    // 4294967294 (and -2) is the sampler's largest seed: choice 1 wraps to 0 instead of repeating it.
    const { sent } = await recording(chat, () =>
      runJob(chat, job({ n: 3, maxTokens: 4, sampling: { seed: 4294967294, temperature: 1 } })),
    );
    expect(sent.map((r) => r.sampling.seed)).toEqual([4294967294, 0, 1]);
    expect(choiceSeed(-2, 1)).toBe(0);
    expect(choiceSeed(7, 2)).toBe(9);
  });

  test("random weights at temperature 1: seeded choices differ from each other and repeat", async () => {
    const seeded = () =>
      runJob(random, job({ n: 3, maxTokens: 12, ignoreEos: true, sampling: { seed: 77, temperature: 1 } }));
    const first = (await seeded()).choices.map((c) => c.content);
    const second = (await seeded()).choices.map((c) => c.content);
    expect(new Set(first).size).toBe(3);
    expect(second).toEqual(first);
  });
});

describe("stream framings (src/http/stream.ts)", () => {
  const errorFrame = (err: RequestError) => ({
    data: { error: { message: err.message, status: err.status } },
    event: "error",
  });

  test("SSE with [DONE]: data frames, then data: [DONE]", async () => {
    const res = streamResponse(sseFraming({ done: true, error: errorFrame }), async (sink) => {
      sink.send({ a: 1 });
      sink.send({ b: "two" });
    });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(await res.text()).toBe('data: {"a":1}\n\ndata: {"b":"two"}\n\ndata: [DONE]\n\n');
  });

  test("SSE with event names and no [DONE]", async () => {
    const res = streamResponse(sseFraming({ done: false, error: errorFrame }), async (sink) => {
      sink.send({ type: "message_start" }, "message_start");
      sink.send({ type: "message_stop" }, "message_stop");
    });
    const text = await res.text();
    expect(text).toBe(
      'event: message_start\ndata: {"type":"message_start"}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n',
    );
    expect(text).not.toContain("[DONE]");
  });

  test("SSE sends keep-alive comments while the producer is idle", async () => {
    let sawKeepalive!: () => void;
    const seen = new Promise<void>((resolve) => (sawKeepalive = resolve));
    const res = streamResponse(
      sseFraming({ done: true, error: errorFrame }),
      async (sink) => {
        await seen; // idle until a keep-alive has gone out
        sink.send({ ok: true });
      },
      {},
      1,
    );
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (text.includes(": keep-alive\n\n")) sawKeepalive();
    }
    expect(text).toContain(": keep-alive\n\n");
    expect(text.endsWith('data: {"ok":true}\n\ndata: [DONE]\n\n')).toBe(true);
  });

  test("NDJSON: one JSON object a line, no keep-alive", async () => {
    const res = streamResponse(
      ndjsonFraming({ error: (err) => ({ error: err.message }) }),
      async (sink) => {
        sink.send({ n: 1 }, "ignored");
        // Idle across many keep-alive periods: NDJSON has none to send.
        await new Promise((resolve) => setTimeout(resolve, 30));
        sink.send({ n: 2, done: true });
      },
      {},
      1,
    );
    expect(res.headers.get("content-type")).toBe("application/x-ndjson");
    const text = await res.text();
    expect(text).toBe('{"n":1}\n{"n":2,"done":true}\n');
    for (const line of text.trimEnd().split("\n")) expect(() => JSON.parse(line)).not.toThrow();
  });

  test("an error thrown by the producer becomes the framing's error frame, then the end", async () => {
    const sse = streamResponse(sseFraming({ done: true, error: errorFrame }), async (sink) => {
      sink.send({ a: 1 });
      throw new RequestError(400, "grammar has no way forward");
    });
    expect(await sse.text()).toBe(
      'data: {"a":1}\n\nevent: error\ndata: {"error":{"message":"grammar has no way forward","status":400}}\n\ndata: [DONE]\n\n',
    );
    const ndjson = streamResponse(
      ndjsonFraming({ error: (err) => ({ error: err.message, status: err.status }) }),
      async () => {
        throw new Error("boom");
      },
    );
    const line = JSON.parse((await ndjson.text()).trim());
    expect(line.status).toBe(500);
    expect(line.error).toContain("boom");
  });

  test("a client that cancels fires the producer's signal", async () => {
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let aborted!: () => void;
    const abortSeen = new Promise<void>((resolve) => (aborted = resolve));
    const res = streamResponse(sseFraming({ done: true, error: errorFrame }), async (sink, signal) => {
      sink.send({ first: true });
      started();
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
      aborted();
      sink.send({ afterCancel: true }); // dropped: nobody is reading
    });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe('data: {"first":true}\n\n');
    await running;
    await reader.cancel();
    await abortSeen;
  });
});
