// GGUF reader/writer: round trips, value types, alignment, determinism,
// malformed-file errors and describeModel.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  describeModel,
  f16BitsToF32,
  f32ToF16Bits,
  GgufFormatError,
  readGguf,
  readGgufSync,
  writeGgufBytes,
  writeGgufFile,
  type GgufSpec,
} from "../../src/gguf/index.ts";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "sf-gguf-"));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

let fileNo = 0;
function save(bytes: Uint8Array): string {
  const p = join(dir, `f${fileNo++}.gguf`);
  writeFileSync(p, bytes);
  return p;
}

const f32Values = Float32Array.from({ length: 6 * 4 }, (_, i) => Math.sin(i) * 3);
const f16Values = Float32Array.from({ length: 8 * 2 }, (_, i) => i / 7 - 1);
const q8Values = Float32Array.from({ length: 64 * 2 }, (_, i) => Math.cos(i * 0.3) * (i % 5));

function everyTypeSpec(): GgufSpec {
  return {
    metadata: {
      "general.architecture": "test",
      "t.u8": { type: "u8", value: 255 },
      "t.i8": { type: "i8", value: -128 },
      "t.u16": { type: "u16", value: 65535 },
      "t.i16": { type: "i16", value: -32768 },
      "t.u32": { type: "u32", value: 4294967295 },
      "t.i32": { type: "i32", value: -2147483648 },
      "t.u64.small": { type: "u64", value: 42 },
      "t.u64.big": { type: "u64", value: 18446744073709551615n },
      "t.i64.neg": { type: "i64", value: -5 },
      "t.i64.big": { type: "i64", value: -9223372036854775808n },
      "t.f32": { type: "f32", value: 1.5 },
      "t.f64": { type: "f64", value: Math.PI },
      "t.bool.true": { type: "bool", value: true },
      "t.bool.false": { type: "bool", value: false },
      "t.string": { type: "string", value: "héllo ▁ 日本 🙂" },
      "t.string.empty": { type: "string", value: "" },
      "t.arr.u8": { type: "array<u8>", value: [0, 1, 255] },
      "t.arr.i8": { type: "array<i8>", value: [-1, 2] },
      "t.arr.u16": { type: "array<u16>", value: [7] },
      "t.arr.i16": { type: "array<i16>", value: [-7, 7] },
      "t.arr.u32": { type: "array<u32>", value: new Uint32Array([1, 2, 3]) },
      "t.arr.i32": { type: "array<i32>", value: new Int32Array([-1, 0, 1]) },
      "t.arr.u64": { type: "array<u64>", value: [1, 2n ** 63n] },
      "t.arr.i64": { type: "array<i64>", value: [-1n, 3] },
      "t.arr.f32": { type: "array<f32>", value: new Float32Array([0.25, -2]) },
      "t.arr.f64": { type: "array<f64>", value: [0.1, 1e300] },
      "t.arr.bool": { type: "array<bool>", value: [true, false, true] },
      "t.arr.string": { type: "array<string>", value: ["a", "", "▁b", "<0x0A>"] },
      "t.arr.empty": { type: "array<string>", value: [] },
      "t.infer.string": "x",
      "t.infer.bool": true,
      "t.infer.int": 7,
      "t.infer.neg": -7,
      "t.infer.float": 0.5,
      "t.infer.strings": ["p", "q"],
    },
    tensors: [
      { name: "a.f32", dims: [6, 4], type: "F32", data: f32Values },
      { name: "b.f16", dims: [8, 2], type: "F16", data: f16Values },
      { name: "c.q8", dims: [64, 2], type: "Q8_0", data: q8Values },
      {
        name: "d.fill",
        dims: [3],
        type: "F32",
        data: (out, start) => out.forEach((_, i) => (out[i] = start + i + 0.5)),
      },
    ],
  };
}

describe("GGUF round trip", () => {
  test("every metadata value type reads back with its type", async () => {
    const path = save(writeGgufBytes(everyTypeSpec()));
    const f = await readGguf(path);
    expect(f.version).toBe(3);
    const m = f.metadata;
    expect(m["t.u8"]).toBe(255);
    expect(m["t.i8"]).toBe(-128);
    expect(m["t.u16"]).toBe(65535);
    expect(m["t.i16"]).toBe(-32768);
    expect(m["t.u32"]).toBe(4294967295);
    expect(m["t.i32"]).toBe(-2147483648);
    expect(m["t.u64.small"]).toBe(42); // safe 64-bit ints become numbers...
    expect(m["t.u64.big"]).toBe(18446744073709551615n); // ...unsafe ones bigints
    expect(m["t.i64.neg"]).toBe(-5);
    expect(m["t.i64.big"]).toBe(-9223372036854775808n);
    expect(m["t.f32"]).toBe(1.5);
    expect(m["t.f64"]).toBe(Math.PI);
    expect(m["t.bool.true"]).toBe(true);
    expect(m["t.bool.false"]).toBe(false);
    expect(m["t.string"]).toBe("héllo ▁ 日本 🙂");
    expect(m["t.string.empty"]).toBe("");
    expect(m["t.arr.u8"]).toEqual([0, 1, 255]);
    expect(m["t.arr.i8"]).toEqual([-1, 2]);
    expect(m["t.arr.u16"]).toEqual([7]);
    expect(m["t.arr.i16"]).toEqual([-7, 7]);
    expect(m["t.arr.u32"]).toEqual([1, 2, 3]);
    expect(m["t.arr.i32"]).toEqual([-1, 0, 1]);
    expect(m["t.arr.u64"]).toEqual([1, 2n ** 63n]);
    expect(m["t.arr.i64"]).toEqual([-1, 3]);
    expect(m["t.arr.f32"]).toEqual([0.25, -2]);
    expect(m["t.arr.f64"]).toEqual([0.1, 1e300]);
    expect(m["t.arr.bool"]).toEqual([true, false, true]);
    expect(m["t.arr.string"]).toEqual(["a", "", "▁b", "<0x0A>"]);
    expect(m["t.arr.empty"]).toEqual([]);
    expect(m["t.infer.string"]).toBe("x");
    expect(m["t.infer.bool"]).toBe(true);
    expect(m["t.infer.int"]).toBe(7);
    expect(m["t.infer.neg"]).toBe(-7);
    expect(m["t.infer.float"]).toBe(0.5);
    expect(m["t.infer.strings"]).toEqual(["p", "q"]);
    expect(m["general.alignment"]).toBe(32);

    expect(f.types["t.u8"]).toBe("u8");
    expect(f.types["t.u64.big"]).toBe("u64");
    expect(f.types["t.f64"]).toBe("f64");
    expect(f.types["t.arr.string"]).toBe("array<string>");
    expect(f.types["t.arr.f32"]).toBe("array<f32>");
    expect(f.types["t.infer.int"]).toBe("i32");
    expect(f.types["t.infer.float"]).toBe("f32");
    expect(f.types["general.alignment"]).toBe("u32");
    // Key order is insertion order.
    expect(Object.keys(m)[0]).toBe("general.architecture");
  });

  test("tensor infos, offsets, alignment and data read back", () => {
    const bytes = writeGgufBytes(everyTypeSpec());
    const f = readGgufSync(save(bytes));
    expect(f.tensors.map((t) => [t.name, t.dims, t.type])).toEqual([
      ["a.f32", [6, 4], 0],
      ["b.f16", [8, 2], 1],
      ["c.q8", [64, 2], 8],
      ["d.fill", [3], 0],
    ]);
    expect(f.alignment).toBe(32);
    expect(f.dataOffset % 32).toBe(0);
    expect(f.tensors.map((t) => t.nbytes)).toEqual([96, 32, 136, 12]);
    for (const t of f.tensors) expect(t.offset % 32).toBe(0);
    expect(f.tensors[0]!.offset).toBe(0);
    expect(f.tensors[1]!.offset).toBe(96);
    expect(f.tensors[2]!.offset).toBe(128);
    expect(f.tensors[3]!.offset).toBe(288);
    expect(f.fileSize).toBe(bytes.length);
    expect(bytes.length).toBe(f.dataOffset + 320); // last tensor padded to alignment

    const slice = (i: number) => {
      const t = f.tensors[i]!;
      const start = f.dataOffset + t.offset;
      return bytes.slice(start, start + t.nbytes!);
    };
    expect(new Float32Array(slice(0).buffer)).toEqual(f32Values);
    const halves = Array.from(new Uint16Array(slice(1).buffer), f16BitsToF32);
    halves.forEach((v, i) => expect(Math.abs(v - f16Values[i]!)).toBeLessThan(1e-3));
    // Q8_0: per block f16 scale then 32 int8.
    const q = slice(2);
    const view = new DataView(q.buffer);
    for (let b = 0; b < 4; b++) {
      const d = f16BitsToF32(view.getUint16(b * 34, true));
      for (let j = 0; j < 32; j++) {
        const x = q8Values[b * 32 + j]!;
        expect(Math.abs(d * view.getInt8(b * 34 + 2 + j) - x)).toBeLessThanOrEqual(d * 0.51 + 1e-3);
      }
    }
    expect(Array.from(new Float32Array(slice(3).buffer))).toEqual([0.5, 1.5, 2.5]);
  });

  test("same spec gives the same bytes; file and in-memory output agree", async () => {
    const a = writeGgufBytes(everyTypeSpec());
    const b = writeGgufBytes(everyTypeSpec());
    expect(Buffer.compare(a, b)).toBe(0);
    const p = join(dir, "streamed.gguf");
    const n = await writeGgufFile(everyTypeSpec(), p);
    expect(n).toBe(a.length);
    expect(Buffer.compare(readFileSync(p), a)).toBe(0);
  });

  test("custom alignment is honoured and recorded", () => {
    const spec: GgufSpec = {
      metadata: { "general.architecture": "x" },
      tensors: [
        { name: "t0", dims: [3], type: "F32", data: new Float32Array(3) },
        { name: "t1", dims: [5], type: "F16", data: new Float32Array(5) },
      ],
      alignment: 64,
    };
    const f = readGgufSync(save(writeGgufBytes(spec)));
    expect(f.metadata["general.alignment"]).toBe(64);
    expect(f.alignment).toBe(64);
    expect(f.dataOffset % 64).toBe(0);
    expect(f.tensors[1]!.offset).toBe(64);
  });

  test("writer rejects bad input", () => {
    const base = { metadata: {}, tensors: [] };
    expect(() => writeGgufBytes({ ...base, metadata: { k: { type: "u8", value: 256 } } })).toThrow(/does not fit u8/);
    expect(() => writeGgufBytes({ ...base, metadata: { k: { type: "i32", value: 1.5 } } })).toThrow(/does not fit i32/);
    expect(() => writeGgufBytes({ ...base, metadata: { k: { type: "u64", value: -1 } } })).toThrow(/does not fit u64/);
    expect(() =>
      writeGgufBytes({ ...base, metadata: { k: { type: "bool", value: 1 as unknown as boolean } } }),
    ).toThrow(/boolean/);
    expect(() =>
      writeGgufBytes({
        ...base,
        metadata: [
          ["k", 1],
          ["k", 2],
        ],
      }),
    ).toThrow(/duplicate metadata key/);
    expect(() =>
      writeGgufBytes({ ...base, tensors: [{ name: "t", dims: [4], type: "F32", data: new Float32Array(3) }] }),
    ).toThrow(/3 values/);
    expect(() =>
      writeGgufBytes({ ...base, tensors: [{ name: "t", dims: [16], type: "Q8_0", data: new Float32Array(16) }] }),
    ).toThrow(/multiple of 32/);
    expect(() => writeGgufBytes({ ...base, alignment: 24 })).toThrow(/power of two/);
  });
});

describe("float16 conversion", () => {
  test("known values and round-to-nearest-even", () => {
    expect(f32ToF16Bits(0)).toBe(0x0000);
    expect(f32ToF16Bits(-0)).toBe(0x8000);
    expect(f32ToF16Bits(1)).toBe(0x3c00);
    expect(f32ToF16Bits(-2)).toBe(0xc000);
    expect(f32ToF16Bits(0.1)).toBe(0x2e66);
    expect(f32ToF16Bits(65504)).toBe(0x7bff);
    expect(f32ToF16Bits(65520)).toBe(0x7c00); // rounds up to infinity
    expect(f32ToF16Bits(Infinity)).toBe(0x7c00);
    expect(f32ToF16Bits(-Infinity)).toBe(0xfc00);
    expect(f32ToF16Bits(NaN) & 0x7c00).toBe(0x7c00);
    expect(f32ToF16Bits(NaN) & 0x3ff).not.toBe(0);
    expect(f32ToF16Bits(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(f32ToF16Bits(2 ** -25)).toBe(0x0000); // halfway to 0: ties to even
    expect(f32ToF16Bits(3 * 2 ** -25)).toBe(0x0002); // halfway 1..2: ties to even
    expect(f32ToF16Bits(1 + 2 ** -11)).toBe(0x3c00); // halfway, even stays
    expect(f32ToF16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // halfway, odd rounds up
    for (const h of [0x0001, 0x03ff, 0x0400, 0x3555, 0x7bff, 0xbc00]) expect(f32ToF16Bits(f16BitsToF32(h))).toBe(h);
  });
});

describe("malformed files", () => {
  const good = () => writeGgufBytes(everyTypeSpec());

  test("every truncation point throws a clear error", () => {
    const bytes = good();
    const f = readGgufSync(save(bytes));
    const dataEnd = f.dataOffset + f.tensors[3]!.offset + f.tensors[3]!.nbytes!; // before the final padding
    const cuts = new Set<number>([0, 1, 3, 4, 7, 8, 15, 16, 23, 24, 30, f.dataOffset - 1, f.dataOffset, dataEnd - 1]);
    for (let c = 25; c < f.dataOffset; c += 13) cuts.add(c);
    for (const cut of cuts) {
      const p = save(bytes.slice(0, cut));
      expect(() => readGgufSync(p)).toThrow(GgufFormatError);
    }
    expect(() => readGgufSync(save(bytes.slice(0, 20)))).toThrow(/truncated/);
    // Like llama.cpp, a file missing only the trailing alignment padding is still readable.
    expect(readGgufSync(save(bytes.slice(0, dataEnd))).tensors.length).toBe(4);
    expect(() => readGgufSync(save(bytes.slice(0, bytes.length - 40)))).toThrow(/truncated file: tensor/);
  });

  test("async reader rejects too", async () => {
    const p = save(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
    await expect(readGguf(p)).rejects.toThrow(/not a GGUF file/);
  });

  test("wrong magic, versions, endianness", () => {
    const bytes = good();
    const withU32 = (at: number, v: number) => {
      const b = bytes.slice();
      new DataView(b.buffer).setUint32(at, v, true);
      return save(b);
    };
    expect(() => readGgufSync(save(new Uint8Array(0)))).toThrow(/too small/);
    expect(() => readGgufSync(withU32(0, 0x12345678))).toThrow(/not a GGUF file/);
    expect(() => readGgufSync(withU32(4, 1))).toThrow(/v1 is not supported/);
    expect(() => readGgufSync(withU32(4, 0x03000000))).toThrow(/big-endian/);
    expect(() => readGgufSync(withU32(4, 9))).toThrow(/unsupported GGUF version 9/);
    // v2 has the same layout as v3 for little-endian files.
    expect(readGgufSync(withU32(4, 2)).version).toBe(2);
  });

  test("huge length and count fields fail fast instead of allocating", () => {
    const bytes = good();
    const withU64 = (at: number, v: bigint) => {
      const b = bytes.slice();
      new DataView(b.buffer).setBigUint64(at, v, true);
      return save(b);
    };
    expect(() => readGgufSync(withU64(8, 1n << 40n))).toThrow(/tensor count .* impossible/);
    expect(() => readGgufSync(withU64(16, 1n << 62n))).toThrow(/metadata count .* impossible/);
    expect(() => readGgufSync(withU64(24, 0xffffffffffffffffn))).toThrow(/length .* impossible/); // first key length
    // Array count of "t.arr.u8": find the key, then skip type (4) + element type (4).
    const keyAt = Buffer.from(bytes).indexOf("t.arr.u8");
    expect(() => readGgufSync(withU64(keyAt + 8 + 4 + 4, 1n << 50n))).toThrow(/array length .* impossible/);
  });

  test("unknown value type and bad tensor infos", () => {
    const bytes = good();
    const b = bytes.slice();
    // Type of the first key ("general.architecture") follows its 8-byte length and 20 bytes of text.
    new DataView(b.buffer).setUint32(24 + 8 + 20, 99, true);
    expect(() => readGgufSync(save(b))).toThrow(/unknown value type 99/);

    const nameAt = Buffer.from(bytes).indexOf("a.f32");
    const c = bytes.slice();
    new DataView(c.buffer).setUint32(nameAt + 5, 9, true); // n_dims
    expect(() => readGgufSync(save(c))).toThrow(/9 dimensions/);
    const d = bytes.slice();
    // offset of "b.f16": name(5) + n_dims(4) + 2 dims(16) + type(4)
    const bAt = Buffer.from(bytes).indexOf("b.f16");
    new DataView(d.buffer).setBigUint64(bAt + 5 + 4 + 16 + 4, 33n, true);
    expect(() => readGgufSync(save(d))).toThrow(/not aligned/);
  });

  test("metadata larger than the first read chunk", () => {
    const big = "x".repeat(300_000);
    const tokens = Array.from({ length: 20_000 }, (_, i) => `tok${i}`);
    const p = save(writeGgufBytes({ metadata: { big, "tokenizer.ggml.tokens": tokens }, tensors: [] }));
    const f = readGgufSync(p);
    expect(f.metadata.big).toBe(big);
    expect((f.metadata["tokenizer.ggml.tokens"] as string[])[19_999]).toBe("tok19999");
  });
});

describe("describeModel", () => {
  test("reads shape, templates, special tokens, pooling and sampling defaults", () => {
    const tokens = ["<unk>", "<s>", "</s>", "<PRE>", "<SUF>", "<MID>", "<|fim_pad|>", "<|eot|>", "a", "b"];
    const p = save(
      writeGgufBytes({
        metadata: [
          ["general.architecture", "qwen3"],
          ["general.name", "Test Model"],
          ["general.type", "model"],
          ["qwen3.context_length", { type: "u32", value: 32768 }],
          ["qwen3.embedding_length", { type: "u32", value: 1024 }],
          ["qwen3.block_count", { type: "u32", value: 28 }],
          ["qwen3.feed_forward_length", { type: "u32", value: 3072 }],
          ["qwen3.attention.head_count", { type: "u32", value: 16 }],
          ["qwen3.attention.head_count_kv", { type: "u32", value: 8 }],
          ["qwen3.pooling_type", { type: "u32", value: 3 }],
          ["tokenizer.ggml.model", "gpt2"],
          ["tokenizer.ggml.tokens", tokens],
          ["tokenizer.ggml.bos_token_id", { type: "u32", value: 1 }],
          ["tokenizer.ggml.eos_token_id", { type: "u32", value: 2 }],
          ["tokenizer.ggml.eot_token_id", { type: "u32", value: 7 }],
          ["tokenizer.ggml.unknown_token_id", { type: "u32", value: 0 }],
          ["tokenizer.ggml.padding_token_id", { type: "u32", value: 0xffffffff }], // "none"
          ["tokenizer.ggml.seperator_token_id", { type: "i32", value: -1 }], // "none"
          ["tokenizer.ggml.fim_pad_token_id", { type: "u32", value: 9 }], // explicit key wins over text
          ["tokenizer.ggml.add_bos_token", false],
          ["tokenizer.ggml.add_eos_token", true],
          ["tokenizer.chat_template", "{{ messages }}"],
          ["tokenizer.chat_template.tool_use", "{{ tools }}"],
          ["tokenizer.chat_template.rag", "{{ documents }}"],
          ["general.sampling.temp", { type: "f32", value: 0.5 }],
          ["general.sampling.top_k", { type: "i32", value: 20 }],
          ["general.sampling.top_p", { type: "f32", value: 0.75 }],
          ["general.sampling.sequence", "edkypmxt"],
        ],
        tensors: [],
      }),
    );
    const info = describeModel(readGgufSync(p));
    expect(info).toMatchObject({
      architecture: "qwen3",
      name: "Test Model",
      type: "model",
      contextLength: 32768,
      embeddingLength: 1024,
      blockCount: 28,
      feedForwardLength: 3072,
      headCount: 16,
      headCountKv: 8,
      vocabSize: 10,
      tokenizerModel: "gpt2",
      chatTemplate: "{{ messages }}",
      toolUseTemplate: "{{ tools }}",
      namedChatTemplates: { tool_use: "{{ tools }}", rag: "{{ documents }}" },
      specialTokens: { bos: 1, eos: 2, eot: 7, unk: 0 },
      fimTokens: { prefix: 3, suffix: 4, middle: 5, pad: 9 },
      addBosToken: false,
      addEosToken: true,
      poolingType: 3,
      poolingTypeName: "last",
      sampling: { temperature: 0.5, topK: 20, topP: 0.75, sequence: "edkypmxt" },
      tensorCount: 0,
    });
    expect(info.specialTokens.pad).toBeUndefined();
    expect(info.specialTokens.sep).toBeUndefined();
  });

  test("FIM tokens detected by text in several conventions", () => {
    const cases: [string[], Record<string, number>][] = [
      [
        ["x", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"],
        { prefix: 1, suffix: 2, middle: 3, rep: 4, sep: 5 },
      ],
      [
        ["<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<reponame>"],
        { prefix: 0, middle: 1, suffix: 2, pad: 3, rep: 4 },
      ],
      [["a", "b", "▁<PRE>", "▁<SUF>", "▁<MID>"], { prefix: 2, suffix: 3, middle: 4 }],
    ];
    for (const [tokens, want] of cases) {
      const p = save(
        writeGgufBytes({ metadata: { "general.architecture": "llama", "tokenizer.ggml.tokens": tokens }, tensors: [] }),
      );
      expect(describeModel(readGgufSync(p)).fimTokens).toEqual(want);
    }
  });
});
