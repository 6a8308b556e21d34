// Turns raw GGUF metadata into the facts the server needs about a model:
// shape, vocabulary size, chat templates, special and FIM token ids, pooling,
// and the publisher's sampling defaults.

import type { GgufFile, GgufValue } from "./types.ts";

export interface SpecialTokenIds {
  bos?: number;
  eos?: number;
  eot?: number;
  eom?: number;
  unk?: number;
  pad?: number;
  sep?: number;
  cls?: number;
  mask?: number;
}

export interface FimTokenIds {
  prefix?: number;
  suffix?: number;
  middle?: number;
  pad?: number;
  /** Repository-name marker (`<|repo_name|>`, `<|fim_repo|>`, ...). */
  rep?: number;
  /** File separator (`<|file_sep|>`, ...). */
  sep?: number;
}

/** Publisher sampling defaults from `general.sampling.*` (only keys that are present). */
export interface SamplingDefaults {
  sequence?: string;
  topK?: number;
  topP?: number;
  minP?: number;
  xtcProbability?: number;
  xtcThreshold?: number;
  temperature?: number;
  penaltyLastN?: number;
  penaltyRepeat?: number;
  mirostat?: number;
  mirostatTau?: number;
  mirostatEta?: number;
}

export const POOLING_TYPE_NAMES = ["none", "mean", "cls", "last", "rank"] as const;
export type PoolingTypeName = (typeof POOLING_TYPE_NAMES)[number];

export interface ModelInfo {
  architecture: string;
  name?: string;
  /** `general.type` ("model", "adapter", ...) when present. */
  type?: string;
  fileType?: number;
  contextLength?: number;
  embeddingLength?: number;
  blockCount?: number;
  feedForwardLength?: number;
  headCount?: number;
  headCountKv?: number;
  /** Number of entries in `tokenizer.ggml.tokens` (0 when absent). */
  vocabSize: number;
  /** `tokenizer.ggml.model` ("llama", "gpt2", "bert", ...). */
  tokenizerModel?: string;
  chatTemplate?: string;
  toolUseTemplate?: string;
  /** Every `tokenizer.chat_template.<name>` template, keyed by name (includes "tool_use"). */
  namedChatTemplates: Record<string, string>;
  specialTokens: SpecialTokenIds;
  fimTokens: FimTokenIds;
  addBosToken?: boolean;
  addEosToken?: boolean;
  /** `<arch>.pooling_type` code (0 none, 1 mean, 2 cls, 3 last, 4 rank). */
  poolingType?: number;
  poolingTypeName?: PoolingTypeName;
  sampling: SamplingDefaults;
  tensorCount: number;
}

function num(v: GgufValue | undefined): number | undefined {
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return Number(v);
  return undefined;
}

/** A token id, or undefined when missing or out of range (-1 / 0xFFFFFFFF mean "none"). */
function tokenId(v: GgufValue | undefined, vocabSize: number): number | undefined {
  const n = num(v);
  if (n === undefined || !Number.isInteger(n) || n < 0) return undefined;
  if (vocabSize > 0 && n >= vocabSize) return undefined;
  return n;
}

function str(v: GgufValue | undefined): string | undefined {
  return typeof v === "string" ? v : undefined;
}

function bool(v: GgufValue | undefined): boolean | undefined {
  return typeof v === "boolean" ? v : undefined;
}

// Token texts that conventionally mark FIM roles, used when the explicit
// `tokenizer.ggml.fim_*_token_id` keys are missing (same idea as llama.cpp's
// own fallback). Earlier entries win.
const FIM_TEXTS: Record<keyof FimTokenIds, string[]> = {
  prefix: ["<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>"],
  suffix: ["<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>"],
  middle: ["<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>"],
  pad: ["<|fim_pad|>", "<fim-pad>", "<fim_pad>"],
  rep: ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<reponame>"],
  sep: ["<|file_sep|>", "<file_sep>", "<file-sep>"],
};

const FIM_KEYS: Record<keyof FimTokenIds, string[]> = {
  prefix: ["tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"],
  suffix: ["tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"],
  middle: ["tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"],
  pad: ["tokenizer.ggml.fim_pad_token_id"],
  rep: ["tokenizer.ggml.fim_rep_token_id"],
  sep: ["tokenizer.ggml.fim_sep_token_id"],
};

const SPECIAL_KEYS: Record<keyof SpecialTokenIds, string> = {
  bos: "tokenizer.ggml.bos_token_id",
  eos: "tokenizer.ggml.eos_token_id",
  eot: "tokenizer.ggml.eot_token_id",
  eom: "tokenizer.ggml.eom_token_id",
  unk: "tokenizer.ggml.unknown_token_id",
  pad: "tokenizer.ggml.padding_token_id",
  sep: "tokenizer.ggml.seperator_token_id", // sic: the key is spelled this way in GGUF
  cls: "tokenizer.ggml.cls_token_id",
  mask: "tokenizer.ggml.mask_token_id",
};

const SAMPLING_KEYS: Record<keyof SamplingDefaults, string> = {
  sequence: "sequence",
  topK: "top_k",
  topP: "top_p",
  minP: "min_p",
  xtcProbability: "xtc_probability",
  xtcThreshold: "xtc_threshold",
  temperature: "temp",
  penaltyLastN: "penalty_last_n",
  penaltyRepeat: "penalty_repeat",
  mirostat: "mirostat",
  mirostatTau: "mirostat_tau",
  mirostatEta: "mirostat_eta",
};

function findTokenByText(tokens: GgufValue[], texts: string[]): number | undefined {
  // Build the lookup lazily and only over the candidate texts: vocabularies can be 200k entries.
  const wanted = new Map<string, number>(texts.map((t, i) => [t, i]));
  let best: { rank: number; id: number } | undefined;
  for (let id = 0; id < tokens.length; id++) {
    const t = tokens[id];
    if (typeof t !== "string") continue;
    const rank = wanted.get(t);
    if (rank !== undefined && (!best || rank < best.rank)) best = { rank, id };
  }
  return best?.id;
}

export function describeModel(file: GgufFile): ModelInfo {
  const md = file.metadata;
  const architecture = str(md["general.architecture"]) ?? "";
  const arch = (k: string) => md[`${architecture}.${k}`];
  const tokens = Array.isArray(md["tokenizer.ggml.tokens"]) ? (md["tokenizer.ggml.tokens"] as GgufValue[]) : [];
  const vocabSize = tokens.length;

  const specialTokens: SpecialTokenIds = {};
  for (const [field, key] of Object.entries(SPECIAL_KEYS) as [keyof SpecialTokenIds, string][]) {
    const id = tokenId(md[key], vocabSize);
    if (id !== undefined) specialTokens[field] = id;
  }

  const fimTokens: FimTokenIds = {};
  const missingFim: (keyof FimTokenIds)[] = [];
  for (const [field, keys] of Object.entries(FIM_KEYS) as [keyof FimTokenIds, string[]][]) {
    const id = keys.map((k) => tokenId(md[k], vocabSize)).find((v) => v !== undefined);
    if (id !== undefined) fimTokens[field] = id;
    else missingFim.push(field);
  }
  if (missingFim.length > 0 && vocabSize > 0) {
    for (const field of missingFim) {
      const id = findTokenByText(tokens, FIM_TEXTS[field]);
      if (id !== undefined) fimTokens[field] = id;
    }
  }

  const namedChatTemplates: Record<string, string> = {};
  const prefix = "tokenizer.chat_template.";
  for (const [k, v] of Object.entries(md)) {
    if (k.startsWith(prefix) && typeof v === "string") namedChatTemplates[k.slice(prefix.length)] = v;
  }

  const sampling: SamplingDefaults = {};
  for (const [field, suffix] of Object.entries(SAMPLING_KEYS) as [keyof SamplingDefaults, string][]) {
    const v = md[`general.sampling.${suffix}`];
    if (field === "sequence") {
      if (typeof v === "string") sampling.sequence = v;
    } else {
      const n = num(v);
      if (n !== undefined) (sampling as Record<string, number>)[field] = n;
    }
  }

  const poolingType = num(arch("pooling_type"));
  const info: ModelInfo = {
    architecture,
    name: str(md["general.name"]),
    type: str(md["general.type"]),
    fileType: num(md["general.file_type"]),
    contextLength: num(arch("context_length")),
    embeddingLength: num(arch("embedding_length")),
    blockCount: num(arch("block_count")),
    feedForwardLength: num(arch("feed_forward_length")),
    headCount: num(arch("attention.head_count")),
    headCountKv: num(arch("attention.head_count_kv")),
    vocabSize,
    tokenizerModel: str(md["tokenizer.ggml.model"]),
    chatTemplate: str(md["tokenizer.chat_template"]),
    toolUseTemplate: namedChatTemplates.tool_use,
    namedChatTemplates,
    specialTokens,
    fimTokens,
    addBosToken: bool(md["tokenizer.ggml.add_bos_token"]),
    addEosToken: bool(md["tokenizer.ggml.add_eos_token"]),
    poolingType,
    poolingTypeName: poolingType !== undefined ? POOLING_TYPE_NAMES[poolingType] : undefined,
    sampling,
    tensorCount: file.tensors.length,
  };
  // Drop undefined fields so the object prints and compares cleanly.
  const loose = info as unknown as Record<string, unknown>;
  for (const k of Object.keys(loose)) if (loose[k] === undefined) delete loose[k];
  return info;
}
