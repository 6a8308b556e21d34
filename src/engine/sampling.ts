// A lane's sampler, built once per request. Order (docs/design.md#sampling-chain):
// logit bias, penalties, then temperature followed by top-p, min-p and top-k
// (all judged on the tempered distribution), then the seeded draw (./draw.ts);
// temperature 0 is an argmax. The grammar, when there is one, is llama.cpp's.
import { ptr, type Pointer } from "bun:ffi";
import { cstr, handle, type NativeHandle } from "../../ffi/llama.ts";
import { argmaxOf, drawPosition, Mt19937, type Truncation } from "./draw.ts";
import { floatView, type LlamaModel } from "./model.ts";

export interface SamplingSpec {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  /** Unsigned 32-bit seed for the draw. */
  seed: number;
  repeatPenalty: number;
  presencePenalty: number;
  frequencyPenalty: number;
  /** token id -> additive bias (-Infinity bans a token). */
  logitBias?: Record<number, number>;
}

/**
 * The highest logit, the lowest id on ties: exactly llama.cpp's greedy choice,
 * without building its vocabulary-wide candidate array. A JIT-compiled loop
 * over the zero-copy row (./draw.ts argmaxOf) beats the same loop compiled by
 * TinyCC and the candidate array.
 */
export function argmax(row: Float32Array, banned?: ReadonlySet<number>): number {
  const best = argmaxOf(row, row.length);
  if (!banned?.has(best)) return best;
  // Rare: the best token is banned. Scan again without the banned ones.
  let top = -Infinity;
  let allowed = -1;
  for (let t = 0; t < row.length; t++) {
    const v = row[t]!;
    if (v > top && !banned.has(t)) {
      top = v;
      allowed = t;
    }
  }
  return allowed;
}

function logitsRow(model: LlamaModel, context: Pointer, i: number): Float32Array {
  return floatView(
    handle(model.llama.api.llama_get_logits_ith(context, i), `logits for batch index ${i}`),
    model.vocabInfo.size,
  );
}

/** llama.cpp reads 0xFFFFFFFF as "pick a random seed": a seed that lands there moves one down. */
export function drawSeed(seed: number): number {
  const u32 = seed >>> 0;
  return u32 === 0xffffffff ? 0xfffffffe : u32;
}

/**
 * The draw seed of the token at stream position `position` under `seed`
 * (position-seeded sampling): murmur3's 32-bit finalizer over the seed mixed
 * with the position, so neighbouring positions and seeds give unrelated streams.
 */
export function positionSeed(seed: number, position: number): number {
  let h = (seed >>> 0) ^ Math.imul(position >>> 0, 0x9e3779b1);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return drawSeed(h);
}

/**
 * A grammar that waits for `trigger`: the text before it is free, and the
 * grammar is fed the output from the trigger on. The trigger is matched as
 * text (a pattern over the output) and, when the vocabulary has it as one
 * token, as that token.
 */
function lazyGrammar(model: LlamaModel, gbnf: string, trigger: string): NativeHandle {
  const escaped = trigger.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const pattern = cstr(`[\\s\\S]*?(${escaped}[\\s\\S]*)`);
  const patterns = new BigUint64Array([BigInt(ptr(pattern))]);
  const ids = model.tokenize(trigger, { parseSpecial: true });
  const tokens = new Int32Array(ids.length === 1 ? ids : []);
  return model.llama.api.llama_sampler_init_grammar_lazy_patterns(
    model.vocab,
    cstr(gbnf),
    cstr("root"),
    patterns,
    1,
    tokens.length > 0 ? tokens : null,
    tokens.length,
  );
}

export class GrammarError extends Error {
  readonly code = "grammar";
}

export const GREEDY: SamplingSpec = {
  temperature: 0,
  topK: 0,
  topP: 1,
  minP: 0,
  seed: 0,
  repeatPenalty: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
};

/** Penalties look at the last 64 tokens, prompt included (docs/design.md#sampling-chain). */
export const PENALTY_WINDOW = 64;

export function hasPenalties(s: SamplingSpec): boolean {
  return s.repeatPenalty !== 1 || s.presencePenalty !== 0 || s.frequencyPenalty !== 0;
}

/**
 * Logit bias and penalties, applied to a logits row in place for one draw and
 * taken back after it (logprobs and the grammar's slow path read the row
 * too), in llama.cpp's float arithmetic: bias added, then the penalties of
 * llama.cpp's penalties sampler over the last PENALTY_WINDOW tokens.
 */
export class RowAdjustments {
  private readonly biasIds: Int32Array;
  private readonly biasValues: Float32Array;
  private readonly penalties?: { repeat: number; frequency: number; presence: number };
  /** The window, oldest first, and how often each token is in it. */
  private readonly window: number[] = [];
  private readonly counts = new Map<number, number>();
  private readonly savedIds: number[] = [];
  private readonly savedValues: number[] = [];

  constructor(spec: SamplingSpec, banned: Iterable<number>, promptTail: number[], isSpecial: (t: number) => boolean) {
    const bias = new Map<number, number>();
    for (const [token, value] of Object.entries(spec.logitBias ?? {})) {
      bias.set(Number(token), Math.fround((bias.get(Number(token)) ?? 0) + value));
    }
    for (const t of banned) bias.set(t, -Infinity);
    this.biasIds = Int32Array.from(bias.keys());
    this.biasValues = Float32Array.from(bias.values());
    if (hasPenalties(spec)) {
      this.penalties = {
        repeat: Math.fround(spec.repeatPenalty),
        frequency: Math.fround(spec.frequencyPenalty),
        presence: Math.fround(spec.presencePenalty),
      };
      // The window skips the model's special tokens (the turn markers, the stop set), so a
      // penalty never makes ending the turn less likely (docs/design.md#sampling-chain).
      const tail: number[] = [];
      for (let k = promptTail.length - 1; k >= 0 && tail.length < PENALTY_WINDOW; k--) {
        if (!isSpecial(promptTail[k]!)) tail.unshift(promptTail[k]!);
      }
      for (const t of tail) this.accept(t);
    }
  }

  /** A chosen token enters the penalty window (the oldest leaves a full one). */
  accept(token: number): void {
    if (!this.penalties) return;
    this.window.push(token);
    this.counts.set(token, (this.counts.get(token) ?? 0) + 1);
    if (this.window.length > PENALTY_WINDOW) {
      const old = this.window.shift()!;
      const left = this.counts.get(old)! - 1;
      if (left === 0) this.counts.delete(old);
      else this.counts.set(old, left);
    }
  }

  apply(row: Float32Array): void {
    const f = Math.fround;
    for (let k = 0; k < this.biasIds.length; k++) {
      const t = this.biasIds[k]!;
      if (t < 0 || t >= row.length) continue;
      this.save(row, t);
      row[t] = row[t]! + this.biasValues[k]!;
    }
    const p = this.penalties;
    if (!p) return;
    for (const [t, count] of this.counts) {
      if (t < 0 || t >= row.length) continue;
      this.save(row, t);
      const l = row[t]!;
      const scaled = l <= 0 ? f(l * p.repeat) : f(l / p.repeat);
      row[t] = scaled - f(f(count * p.frequency) + p.presence);
    }
  }

  restore(row: Float32Array): void {
    // Last saved first: a token both biased and penalised gets its original value back.
    for (let k = this.savedIds.length - 1; k >= 0; k--) row[this.savedIds[k]!] = this.savedValues[k]!;
    this.savedIds.length = 0;
    this.savedValues.length = 0;
  }

  private save(row: Float32Array, t: number): void {
    this.savedIds.push(t);
    this.savedValues.push(row[t]!);
  }
}

export class SamplerChain {
  /** llama.cpp's grammar sampler when the request is constrained. */
  private readonly grammar?: Pointer;
  /** Plain argmax with nothing before it: taken straight from the logits row. */
  private readonly plainGreedy: boolean;
  /** Tokens never chosen (end-of-generation under ignore_eos, as llama.cpp does). */
  private readonly banned: ReadonlySet<number>;
  private readonly adjustments: RowAdjustments;
  private readonly truncation: Truncation;
  /** The request's seed, as position-seeded draws mix it. */
  private readonly seed: number;
  /** Position-seeded draws: a fresh stream per position; otherwise one stream for the request. */
  private readonly positionSeeded: boolean;
  private readonly stream: Mt19937;
  private freed = false;

  /** Throws GrammarError when `grammar` (GBNF, root rule `root`) does not compile in llama.cpp. */
  constructor(
    private readonly model: LlamaModel,
    spec: SamplingSpec,
    promptTail: number[] = [],
    grammar?: { gbnf: string; trigger?: string },
    banned: number[] = [],
    /** Seed each draw from (seed, stream position) instead of one random stream (GenerateJob.positionSeeded). */
    positionSeeded = false,
  ) {
    this.banned = new Set(banned);
    const { api } = model.llama;
    if (grammar !== undefined) {
      const g =
        grammar.trigger === undefined
          ? api.llama_sampler_init_grammar(model.vocab, cstr(grammar.gbnf), cstr("root"))
          : lazyGrammar(model, grammar.gbnf, grammar.trigger);
      if (!g || typeof g === "bigint")
        throw new GrammarError(
          "the request's grammar (from response_format, grammar or tools) did not compile on this engine",
        );
      this.grammar = g;
    }
    const hasBias = Object.keys(spec.logitBias ?? {}).length > 0;
    this.plainGreedy = spec.temperature <= 0 && !hasBias && !hasPenalties(spec) && grammar === undefined;
    // The plain greedy path skips banned tokens itself; otherwise they are biased to -inf.
    this.adjustments = new RowAdjustments(spec, this.plainGreedy ? [] : this.banned, promptTail, (t) =>
      model.isSpecial(t),
    );
    this.truncation = { temperature: spec.temperature, topK: spec.topK, topP: spec.topP, minP: spec.minP };
    this.seed = spec.seed;
    this.positionSeeded = positionSeeded;
    this.stream = new Mt19937(drawSeed(spec.seed));
  }

  /**
   * Samples from the logits at batch index `i` of the last decode and records
   * the choice. `position` is the stream position of the token drawn (its
   * prompt's length plus the tokens generated before it); only a
   * position-seeded chain reads it.
   */
  sample(context: Pointer, i: number, position = 0): number {
    const row = logitsRow(this.model, context, i);
    if (this.plainGreedy) return argmax(row, this.banned);
    // A position-seeded draw depends on the seed and the position only, so a
    // generation cut and continued draws what the uncut one would.
    const rng = this.positionSeeded ? new Mt19937(positionSeed(this.seed, position)) : this.stream;
    this.adjustments.apply(row);
    let token: number;
    try {
      token = this.grammar
        ? this.sampleConstrained(context, i, row, rng, this.grammar)
        : this.pick(row, row.length, rng);
    } finally {
      this.adjustments.restore(row);
    }
    if (token < 0) throw new GrammarError("nothing can be sampled: every token is banned");
    this.adjustments.accept(token);
    return token;
  }

  /** A position in `logits[0..n)`: argmax at temperature 0, else the truncated draw. */
  private pick(logits: Float32Array, n: number, rng: Mt19937): number {
    if (this.truncation.temperature <= 0) return argmaxOf(logits, n);
    return drawPosition(logits, n, this.truncation, rng, this.model.expSum());
  }

  /**
   * Fast path first: pick as if unconstrained and ask the grammar about that
   * one token; only when it is refused are the tokens the grammar allows
   * gathered (the expensive part on a 150k vocabulary) and the draw made
   * again among them.
   */
  private sampleConstrained(context: Pointer, i: number, row: Float32Array, rng: Mt19937, grammar: Pointer): number {
    const { api, shim } = this.model.llama;
    const guess = this.pick(row, row.length, rng);
    if (guess >= 0 && shim.sf_grammar_allows(grammar, guess)) {
      api.llama_sampler_accept(grammar, guess);
      return guess;
    }
    const scratch = this.model.candidateScratch();
    const { prefixKey, probeToken } = this.model.grammarPrefilter();
    const allowed = shim.sf_grammar_candidates(context, i, grammar, scratch, row.length, prefixKey, probeToken);
    if (allowed <= 0) throw new GrammarError("constraint unsatisfiable: the grammar allows no further token");
    // llama_token_data is { int32 id; float logit; float p; }.
    const words = new Int32Array(scratch.buffer, scratch.byteOffset, allowed * 3);
    const floats = new Float32Array(scratch.buffer, scratch.byteOffset, allowed * 3);
    const logits = new Float32Array(allowed);
    for (let k = 0; k < allowed; k++) logits[k] = floats[k * 3 + 1]!;
    const at = this.pick(logits, allowed, rng);
    if (at < 0) throw new GrammarError("constraint unsatisfiable: the grammar allows no further token");
    const token = words[at * 3]!;
    api.llama_sampler_accept(grammar, token);
    return token;
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    if (this.grammar) this.model.llama.api.llama_sampler_free(this.grammar);
  }
}
