// A lane's native sampler chain, built once per request. Order (docs/design.md#sampling-chain):
// logit bias, penalties, then temperature followed by top-p, min-p and top-k
// (all judged on the tempered distribution), then the seeded draw. Temperature 0 is
// llama.cpp's own argmax.
import { ptr, type Pointer } from "bun:ffi";
import { cstr, handle, type NativeHandle } from "../../ffi/llama.ts";
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
 * without building its vocabulary-wide candidate array. A plain JIT-compiled
 * loop over the zero-copy row (~60 us on 150k floats) beats the same loop
 * compiled by TinyCC (~105 us) and the candidate array (~110 us).
 */
export function argmax(row: Float32Array, banned?: ReadonlySet<number>): number {
  let best = -1;
  let top = -Infinity;
  for (let t = 0; t < row.length; t++) {
    const v = row[t]!;
    if (v > top) {
      top = v;
      best = t;
    }
  }
  if (!banned?.has(best)) return best;
  // Rare: the best token is banned. Scan again without the banned ones.
  best = -1;
  top = -Infinity;
  for (let t = 0; t < row.length; t++) {
    const v = row[t]!;
    if (v > top && !banned.has(t)) {
      top = v;
      best = t;
    }
  }
  return best;
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

export class SamplerChain {
  readonly handle: Pointer;
  /** llama.cpp's grammar sampler when the request is constrained (kept out of the chain: see sample()). */
  private readonly grammar?: Pointer;
  /** Plain argmax with nothing before it: taken straight from the logits row, without the chain. */
  private readonly plainGreedy: boolean;
  /** No sampler in the chain keeps state on accept (no penalties): see sample(). */
  private readonly stateless: boolean;
  /** Tokens never chosen (end-of-generation under ignore_eos, as llama.cpp does). */
  private readonly banned: ReadonlySet<number>;
  /**
   * Position-seeded draws: the seed, and the index of the dist sampler (last
   * in the chain), which each sample() replaces by one seeded for the position.
   */
  private readonly positionSeeded?: { seed: number; index: number };
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
    this.stateless = !hasPenalties(spec);
    const { api, shim } = model.llama;
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
    const chain = handle(shim.sf_sampler_chain_new(), "sampler chain");
    this.handle = chain;
    let samplers = 0;
    const add = (s: NativeHandle, what: string) => {
      const sampler = handle(s, `${what} sampler`);
      api.llama_sampler_chain_add(chain, sampler);
      samplers++;
      return sampler;
    };
    const bias = Object.entries(spec.logitBias ?? {});
    this.plainGreedy = spec.temperature <= 0 && bias.length === 0 && !hasPenalties(spec) && grammar === undefined;
    // The plain greedy path skips banned tokens itself; a chain bans them with the bias sampler.
    if (!this.plainGreedy) for (const t of this.banned) bias.push([String(t), -Infinity]);
    if (bias.length > 0) {
      // llama_logit_bias is { int32 token; float bias; }: 8 bytes each.
      const buf = new ArrayBuffer(bias.length * 8);
      const view = new DataView(buf);
      bias.forEach(([token, value], i) => {
        view.setInt32(i * 8, Number(token), true);
        view.setFloat32(i * 8 + 4, value, true);
      });
      add(api.llama_sampler_init_logit_bias(model.vocabInfo.size, bias.length, new Uint8Array(buf)), "logit bias");
    }
    if (hasPenalties(spec)) {
      const penalties = add(
        api.llama_sampler_init_penalties(
          model.vocabInfo.size,
          PENALTY_WINDOW,
          spec.repeatPenalty,
          spec.frequencyPenalty,
          spec.presencePenalty,
        ),
        "penalties",
      );
      // The window skips the model's special tokens (the turn markers, the stop set), so a
      // penalty never makes ending the turn less likely (docs/design.md#sampling-chain).
      const tail: number[] = [];
      for (let k = promptTail.length - 1; k >= 0 && tail.length < PENALTY_WINDOW; k--) {
        if (!model.isSpecial(promptTail[k]!)) tail.unshift(promptTail[k]!);
      }
      for (const t of tail) api.llama_sampler_accept(penalties, t);
    }
    if (spec.temperature <= 0) {
      add(api.llama_sampler_init_greedy(), "greedy");
      return;
    }
    add(api.llama_sampler_init_temp(spec.temperature), "temperature");
    // Top-p first, on the whole tempered softmax; min-p is a ratio to the best
    // token and top-k a count, so neither changes after renormalising. Each
    // token kept therefore passes all three tests on the same distribution.
    if (spec.topP < 1) add(api.llama_sampler_init_top_p(spec.topP, 1), "top-p");
    if (spec.minP > 0) add(api.llama_sampler_init_min_p(spec.minP, 1), "min-p");
    if (spec.topK > 0 && spec.topK < model.vocabInfo.size) add(api.llama_sampler_init_top_k(spec.topK), "top-k");
    if (positionSeeded) this.positionSeeded = { seed: spec.seed, index: samplers };
    add(api.llama_sampler_init_dist(drawSeed(spec.seed)), "dist");
  }

  /**
   * Samples from the logits at batch index `i` of the last decode and records
   * the choice. `position` is the stream position of the token drawn (its
   * prompt's length plus the tokens generated before it); only a
   * position-seeded chain reads it.
   */
  sample(context: Pointer, i: number, position = 0): number {
    if (this.positionSeeded) this.reseed(position);
    if (this.plainGreedy) return argmax(logitsRow(this.model, context, i), this.banned);
    if (this.grammar) return this.sampleConstrained(context, i, this.grammar);
    return this.model.llama.api.llama_sampler_sample(this.handle, context, i);
  }

  /**
   * Fast path first: pick as if unconstrained, ask the grammar about that one
   * token, and mask the whole vocabulary only when it is refused. A stateless
   * chain picks with llama_sampler_sample (its own optimized candidate fill;
   * the accept it does is a no-op); a chain with penalties must not accept a
   * refused token, so the shim runs the chain on candidates it fills itself.
   */
  private sampleConstrained(context: Pointer, i: number, grammar: Pointer): number {
    const { api, shim } = this.model.llama;
    const scratch = this.model.candidateScratch();
    const n = this.model.vocabInfo.size;
    const { prefixKey, probeToken } = this.model.grammarPrefilter();
    let token: number;
    if (this.stateless) {
      const guess = api.llama_sampler_sample(this.handle, context, i);
      if (shim.sf_grammar_allows(grammar, guess)) {
        api.llama_sampler_accept(grammar, guess);
        return guess;
      }
      token = shim.sf_sample_masked(context, i, this.handle, grammar, scratch, n, prefixKey, probeToken);
    } else {
      token = shim.sf_sample_constrained(context, i, this.handle, grammar, scratch, n, prefixKey, probeToken);
    }
    if (token < 0) throw new GrammarError("constraint unsatisfiable: the grammar allows no further token");
    return token;
  }

  /**
   * Replaces the dist sampler with one seeded for `position`: the draw then
   * depends on the seed and the position only, so a generation cut and
   * continued draws what the uncut one would (a fresh mt19937 is a few
   * microseconds, far below a tick).
   */
  private reseed(position: number): void {
    const { api } = this.model.llama;
    const { seed, index } = this.positionSeeded!;
    const old = api.llama_sampler_chain_remove(this.handle, index);
    if (old) api.llama_sampler_free(old);
    api.llama_sampler_chain_add(
      this.handle,
      handle(api.llama_sampler_init_dist(positionSeed(seed, position)), "dist sampler"),
    );
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.model.llama.api.llama_sampler_free(this.handle);
    if (this.grammar) this.model.llama.api.llama_sampler_free(this.grammar);
  }
}
