// Fixture-model generators: determinism, file naming and atomic creation,
// vocabulary invariants, metadata llama.cpp needs, and the chat template.
// The full large-vocab model (~165 MB) is never written here; its generator
// is exercised at a reduced size.

import { Template } from "@huggingface/jinja";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import {
  buildVocab,
  CHAT_SPECIAL_TOKENS,
  CHATML_TOOLS_TEMPLATE,
  chatmlToolsTemplate,
  defaultFixtureDir,
  ensureFixture,
  FIM_SPECIAL_TOKENS,
  fixtureBytes,
  FIXTURE_VERSION,
  largeVocab,
  SPACE,
  tinyChat,
  tinyEmbed,
  tinyRandom,
  tinyFim,
  TokenType,
  writeFixture,
  type FixtureSpec,
} from "../src/fixtures/index.ts";
import { describeModel, layoutGguf, readGgufSync } from "../src/gguf/index.ts";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "sf-fixtures-"));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

async function describeSpec(spec: FixtureSpec) {
  const path = join(dir, `${spec.kind}-${spec.seed}-describe.gguf`);
  await writeFixture(spec, path);
  const file = readGgufSync(path);
  return { file, info: describeModel(file), path };
}

describe("determinism", () => {
  test("same seed gives identical bytes, another seed different weights", () => {
    const a = sha256(fixtureBytes(tinyRandom(1)));
    const b = sha256(fixtureBytes(tinyRandom(1)));
    const c = sha256(fixtureBytes(tinyRandom(2)));
    expect(a).toBe(b);
    expect(c).not.toBe(a);
  });

  test("streamed file equals the in-memory bytes, and a spec can be written twice", async () => {
    const spec = tinyFim(3);
    const p1 = join(dir, "fim-a.gguf");
    const p2 = join(dir, "fim-b.gguf");
    await writeFixture(spec, p1);
    await writeFixture(spec, p2); // fill callbacks restart their random streams
    const mem = fixtureBytes(tinyFim(3));
    expect(sha256(readFileSync(p1))).toBe(sha256(mem));
    expect(sha256(readFileSync(p2))).toBe(sha256(mem));
  });

  test("reduced large-vocab generator is deterministic and seed-dependent", () => {
    const size = { vocabSize: 4000, nEmbd: 64, nBlocks: 1, nFf: 128 };
    const a = sha256(fixtureBytes(largeVocab(1, size)));
    expect(sha256(fixtureBytes(largeVocab(1, size)))).toBe(a);
    expect(sha256(fixtureBytes(largeVocab(2, size)))).not.toBe(a);
  });
});

describe("ensureFixture", () => {
  test("writes <kind>-<seed>-v<version>.gguf once, atomically, concurrent-safe", async () => {
    const d = join(dir, "cache");
    const paths = await Promise.all([ensureFixture("tiny-chat", d), ensureFixture("tiny-chat", d), ensureFixture("tiny-chat", d, 1)]);
    const expected = join(d, `tiny-chat-1-v${FIXTURE_VERSION}.gguf`);
    expect(paths).toEqual([expected, expected, expected]);
    const before = statSync(expected);
    expect(await ensureFixture("tiny-chat", d)).toBe(expected);
    expect(statSync(expected).mtimeMs).toBe(before.mtimeMs); // not rewritten
    expect(await ensureFixture("tiny-embed", d, 7)).toBe(join(d, `tiny-embed-7-v${FIXTURE_VERSION}.gguf`));
    expect(readdirSync(d).sort()).toEqual([`tiny-chat-1-v${FIXTURE_VERSION}.gguf`, `tiny-embed-7-v${FIXTURE_VERSION}.gguf`]);
    expect(sha256(readFileSync(expected))).toBe(sha256(fixtureBytes(tinyChat(1))));
  });

  test("rejects unknown kinds and bad seeds", async () => {
    await expect(ensureFixture("nope" as "tiny-chat", dir)).rejects.toThrow(/unknown fixture kind/);
    await expect(ensureFixture("tiny-chat", dir, -1)).rejects.toThrow(/seed/);
  });

  test("default directory follows SUPERFLUID_CACHE_DIR", () => {
    const old = process.env.SUPERFLUID_CACHE_DIR;
    try {
      process.env.SUPERFLUID_CACHE_DIR = "/x/y";
      expect(defaultFixtureDir()).toBe("/x/y/models");
      delete process.env.SUPERFLUID_CACHE_DIR;
      expect(defaultFixtureDir()).toBe(join(homedir(), ".cache", "superfluid", "models"));
    } finally {
      if (old === undefined) delete process.env.SUPERFLUID_CACHE_DIR;
      else process.env.SUPERFLUID_CACHE_DIR = old;
    }
  });
});

describe("vocabulary", () => {
  const v = buildVocab({ specials: [...CHAT_SPECIAL_TOKENS, ...FIM_SPECIAL_TOKENS] });

  test("layout: unk/bos/eos, control specials, 256 byte tokens", () => {
    expect(v.tokens.slice(0, 3)).toEqual(["<unk>", "<s>", "</s>"]);
    expect(Array.from(v.types.slice(0, 3))).toEqual([TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL]);
    for (const s of [...CHAT_SPECIAL_TOKENS, ...FIM_SPECIAL_TOKENS]) expect(v.types[v.special[s]!]).toBe(TokenType.CONTROL);
    for (let b = 0; b < 256; b++) {
      const text = `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`;
      expect(v.types[v.special[text]!]).toBe(TokenType.BYTE);
    }
    expect(v.types.filter((t) => t === TokenType.BYTE).length).toBe(256);
  });

  test("unique pieces, ASCII coverage, every piece reachable by merges", () => {
    expect(new Set(v.tokens).size).toBe(v.tokens.length);
    const set = new Set(v.tokens);
    for (let c = 0x21; c < 0x7f; c++) expect(set.has(String.fromCharCode(c))).toBe(true);
    expect(set.has(SPACE)).toBe(true);
    for (const w of ["▁the", "▁hello", "▁world", "user", "assistant", "▁function", "return"]) expect(set.has(w)).toBe(true);
    v.tokens.forEach((t, i) => {
      if (v.types[i] !== TokenType.NORMAL) return;
      const chars = Array.from(t);
      for (let k = 1; k < chars.length; k++) expect(set.has(chars.slice(0, k).join(""))).toBe(true);
    });
    // Earlier (shorter, commoner) pieces score higher.
    expect(v.scores[set.size - 1]!).toBeLessThan(v.scores[v.tokens.indexOf("▁")]!);
  });

  test("target size pads with generated pieces", () => {
    const big = buildVocab({ specials: CHAT_SPECIAL_TOKENS, targetSize: 30_000 });
    expect(big.tokens.length).toBe(30_000);
    expect(new Set(big.tokens).size).toBe(30_000);
    expect(() => buildVocab({ specials: [], targetSize: 10 })).toThrow(/below the base size/);
  });
});

describe("fixture metadata", () => {
  test("tiny-random: shape, tokenizer, special ids, template", async () => {
    const spec = tinyRandom();
    const { file, info } = await describeSpec(spec);
    const id = (t: string) => spec.vocab.special[t]!;
    expect(info).toMatchObject({
      architecture: "llama",
      name: "superfluid-tiny-random",
      contextLength: 4096,
      embeddingLength: 64,
      blockCount: 2,
      feedForwardLength: 192,
      headCount: 4,
      headCountKv: 2,
      tokenizerModel: "llama",
      chatTemplate: CHATML_TOOLS_TEMPLATE,
      specialTokens: { unk: 0, bos: 1, eos: id("<|im_end|>"), eot: id("<|im_end|>"), pad: id("<|endoftext|>") },
      fimTokens: {},
      addBosToken: false,
      addEosToken: false,
      fileType: 0,
    });
    expect(info.vocabSize).toBeGreaterThan(1000);
    expect(info.vocabSize).toBeLessThan(2500);
    expect(info.poolingType).toBeUndefined();
    const md = file.metadata;
    expect(md["llama.vocab_size"]).toBe(info.vocabSize);
    expect(md["llama.rope.dimension_count"]).toBe(16);
    expect(md["tokenizer.ggml.add_space_prefix"]).toBe(false);
    expect((md["tokenizer.ggml.scores"] as number[]).length).toBe(info.vocabSize);
    expect((md["tokenizer.ggml.token_type"] as number[]).length).toBe(info.vocabSize);

    const t = Object.fromEntries(file.tensors.map((x) => [x.name, x]));
    expect(file.tensors.length).toBe(3 + 2 * 9);
    expect(t["token_embd.weight"]).toMatchObject({ dims: [64, info.vocabSize], type: 0 });
    expect(t["output.weight"]).toMatchObject({ dims: [64, info.vocabSize], type: 0 });
    expect(t["output_norm.weight"]!.dims).toEqual([64]);
    expect(t["blk.1.attn_q.weight"]!.dims).toEqual([64, 64]);
    expect(t["blk.1.attn_k.weight"]!.dims).toEqual([64, 32]); // GQA: 2 kv heads of 16
    expect(t["blk.1.attn_v.weight"]!.dims).toEqual([64, 32]);
    expect(t["blk.1.attn_output.weight"]!.dims).toEqual([64, 64]);
    expect(t["blk.1.ffn_gate.weight"]!.dims).toEqual([64, 192]);
    expect(t["blk.1.ffn_up.weight"]!.dims).toEqual([64, 192]);
    expect(t["blk.1.ffn_down.weight"]!.dims).toEqual([192, 64]);
  });

  test("tiny-chat (the built-in): scripted weights, no thinking by default, a 128k window", async () => {
    const spec = tinyChat();
    const { file, info } = await describeSpec(spec);
    expect(info).toMatchObject({ architecture: "llama", name: "superfluid-tiny-chat", contextLength: 131072, blockCount: 1, chatTemplate: chatmlToolsTemplate(false) });
    expect(String(file.metadata["general.description"])).toContain("Hello from superfluid's built-in test model.");
    // The seed names the file only: the weights are hand-set.
    expect(sha256(fixtureBytes(tinyChat(2)))).toBe(sha256(fixtureBytes(tinyChat(1))));
    // Thinking only when asked: the generation prompt closes an empty think block unless enable_thinking is true.
    const render = (kwargs: object) => new Template(info.chatTemplate!).render({ messages: [{ role: "user", content: "hi" }], add_generation_prompt: true, ...kwargs });
    expect(render({})).toEndWith("<|im_start|>assistant\n<think>\n\n</think>\n\n");
    expect(render({ enable_thinking: false })).toEndWith("<think>\n\n</think>\n\n");
    expect(render({ enable_thinking: true })).toEndWith("<|im_start|>assistant\n");
    // "\n" and "\n\n" are whole tokens: they tell the two generation prompts apart.
    expect(spec.vocab.tokens).toContain("\n");
    expect(spec.vocab.tokens).toContain("\n\n");
  });

  test("tiny-fim: fim_* keys point at the FIM tokens", async () => {
    const spec = tinyFim();
    const { info } = await describeSpec(spec);
    const id = (t: string) => spec.vocab.special[t]!;
    expect(info.fimTokens).toEqual({
      prefix: id("<|fim_prefix|>"),
      suffix: id("<|fim_suffix|>"),
      middle: id("<|fim_middle|>"),
      pad: id("<|fim_pad|>"),
      rep: id("<|repo_name|>"),
      sep: id("<|file_sep|>"),
    });
    expect(new Set(Object.values(info.fimTokens)).size).toBe(6);
    expect(info.specialTokens.eos).toBe(id("<|im_end|>"));
    expect(info.chatTemplate).toBe(CHATML_TOOLS_TEMPLATE);
  });

  test("tiny-embed: mean pooling, BOS added, no chat template", async () => {
    const { info, file } = await describeSpec(tinyEmbed());
    expect(info.poolingType).toBe(1);
    expect(info.poolingTypeName).toBe("mean");
    expect(info.chatTemplate).toBeUndefined();
    expect(info.addBosToken).toBe(true);
    expect(file.metadata["general.tags"]).toEqual(["feature-extraction", "sentence-similarity"]);
  });

  test("large-vocab: F16 embeddings/output; full-size layout without writing it", async () => {
    const small = largeVocab(1, { vocabSize: 3000, nEmbd: 64, nBlocks: 1, nFf: 128 });
    const { info, file } = await describeSpec(small);
    expect(info.vocabSize).toBe(3000);
    expect(info.contextLength).toBe(32768);
    expect(info.fileType).toBe(1);
    const t = Object.fromEntries(file.tensors.map((x) => [x.name, x]));
    expect(t["token_embd.weight"]).toMatchObject({ dims: [64, 3000], type: 1 });
    expect(t["output.weight"]).toMatchObject({ dims: [64, 3000], type: 1 });
    expect(t["blk.0.attn_q.weight"]!.type).toBe(0);

    const full = largeVocab();
    expect(full.vocab.tokens.length).toBe(150_000);
    expect(full.hparams).toMatchObject({ nEmbd: 256, nBlocks: 4, contextLength: 32768 });
    const size = layoutGguf(full.gguf).totalSize; // header only; no tensor data generated
    expect(size).toBeGreaterThan(100e6);
    expect(size).toBeLessThan(200e6);
  });
});

describe("chat template (@huggingface/jinja)", () => {
  const template = new Template(CHATML_TOOLS_TEMPLATE);
  const tools = [
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "Current weather",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    },
  ];
  const conversation = [
    { role: "system", content: "You are terse." },
    { role: "user", content: "Weather in Paris?" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } }],
    },
    { role: "tool", tool_call_id: "call_1", content: "18C, sunny" },
    { role: "assistant", content: "18C and sunny." },
    { role: "user", content: [{ type: "text", text: "And tomorrow?" }] },
  ];

  test("full conversation with tools, tool calls and results; thinking disabled", () => {
    const out = template.render({ messages: conversation, tools, add_generation_prompt: true, enable_thinking: false });
    expect(out).toBe(
      "<|im_start|>system\nYou are terse.\n\n# Tools\n\nYou may call the functions below. Each one is described as JSON on its own line:\n<tools>\n" +
        '{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n' +
        '</tools>\n\nTo call a function, reply with <tool_call>{"name": <function name>, "arguments": <arguments object>}</tool_call>, one per call.<|im_end|>\n' +
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
        '<|im_start|>assistant\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call><|im_end|>\n' +
        "<|im_start|>tool\n<tool_response>\n18C, sunny\n</tool_response><|im_end|>\n" +
        "<|im_start|>assistant\n18C and sunny.<|im_end|>\n" +
        "<|im_start|>user\nAnd tomorrow?<|im_end|>\n" +
        "<|im_start|>assistant\n<think>\n\n</think>\n\n",
    );
  });

  test("thinking enabled or unspecified leaves the generation prompt open", () => {
    const messages = [{ role: "user", content: "hi" }];
    const expected = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
    expect(template.render({ messages, add_generation_prompt: true, enable_thinking: true })).toBe(expected);
    expect(template.render({ messages, add_generation_prompt: true })).toBe(expected);
    expect(template.render({ messages, add_generation_prompt: false })).toBe("<|im_start|>user\nhi<|im_end|>\n");
  });

  test("string arguments, several calls, content before calls, reasoning", () => {
    const out = template.render({
      messages: [
        { role: "user", content: "go" },
        {
          role: "assistant",
          content: "Checking.",
          reasoning_content: "Need two lookups.",
          tool_calls: [
            { type: "function", function: { name: "a", arguments: '{"x":1}' } },
            { name: "b", arguments: {} },
          ],
        },
      ],
    });
    expect(out).toBe(
      "<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n<think>\nNeed two lookups.\n</think>\n\nChecking.\n" +
        '<tool_call>{"name": "a", "arguments": {"x":1}}</tool_call>\n<tool_call>{"name": "b", "arguments": {}}</tool_call><|im_end|>\n',
    );
  });

  test("no system message but tools: a system turn carries the tools", () => {
    const out = template.render({ messages: [{ role: "user", content: "hi" }], tools, add_generation_prompt: true });
    expect(out.startsWith("<|im_start|>system\n# Tools\n")).toBe(true);
    expect(out.endsWith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")).toBe(true);
  });
});
