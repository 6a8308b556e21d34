// The sampler chain superfluid ran before src/engine/draw.ts, kept here as the
// reference the fast path is tested against: llama.cpp's own samplers (logit
// bias, penalties, temperature, top-p, min-p, top-k, dist) applied in that
// order to a candidate array filled from a logits row.
import { ptr, type Pointer } from "bun:ffi";
import { handle, loadLlama, type Llama } from "../../ffi/llama.ts";

export interface ReferenceSpec {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  seed: number;
  repeatPenalty?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  /** token -> bias */
  bias?: Map<number, number>;
}

/** One chain, drawing from rows of `n` logits; its dist stream advances with each draw, as a request's did. */
export class ReferenceChain {
  private readonly llama: Llama;
  private readonly chain: Pointer;
  private readonly cells: Uint8Array;
  private readonly array = new Uint8Array(32);

  constructor(
    private readonly n: number,
    spec: ReferenceSpec,
  ) {
    this.llama = loadLlama(process.env, { backends: false });
    const { api, shim } = this.llama;
    this.chain = handle(shim.sf_sampler_chain_new(), "chain");
    const add = (s: unknown) => api.llama_sampler_chain_add(this.chain, handle(s as Pointer, "sampler"));
    if (spec.bias && spec.bias.size > 0) {
      const buf = new ArrayBuffer(spec.bias.size * 8);
      const view = new DataView(buf);
      [...spec.bias].forEach(([token, value], i) => {
        view.setInt32(i * 8, token, true);
        view.setFloat32(i * 8 + 4, value, true);
      });
      add(api.llama_sampler_init_logit_bias(n, spec.bias.size, new Uint8Array(buf)));
    }
    const rp = spec.repeatPenalty ?? 1;
    const fp = spec.frequencyPenalty ?? 0;
    const pp = spec.presencePenalty ?? 0;
    if (rp !== 1 || fp !== 0 || pp !== 0) {
      add(api.llama_sampler_init_penalties(n, 64, rp, fp, pp));
    }
    if (spec.temperature <= 0) add(api.llama_sampler_init_greedy());
    else {
      add(api.llama_sampler_init_temp(spec.temperature));
      if (spec.topP < 1) add(api.llama_sampler_init_top_p(spec.topP, 1));
      if (spec.minP > 0) add(api.llama_sampler_init_min_p(spec.minP, 1));
      if (spec.topK > 0 && spec.topK < n) add(api.llama_sampler_init_top_k(spec.topK));
      add(api.llama_sampler_init_dist(spec.seed >>> 0));
    }
    this.cells = new Uint8Array(n * 12);
  }

  /** Feeds the penalty window as the chain's accept did. */
  accept(token: number): void {
    this.llama.api.llama_sampler_accept(this.chain, token);
  }

  /** Draws a token from `row` (and accepts it, as llama_sampler_sample does). */
  draw(row: Float32Array): number {
    const ids = new Int32Array(this.cells.buffer);
    const floats = new Float32Array(this.cells.buffer);
    for (let t = 0; t < this.n; t++) {
      ids[t * 3] = t;
      floats[t * 3 + 1] = row[t]!;
      floats[t * 3 + 2] = 0;
    }
    // llama_token_data_array: { data*, size_t size, int64 selected, bool sorted }.
    const view = new DataView(this.array.buffer);
    view.setBigUint64(0, BigInt(ptr(this.cells)), true);
    view.setBigUint64(8, BigInt(this.n), true);
    view.setBigInt64(16, -1n, true);
    view.setUint8(24, 0);
    this.llama.api.llama_sampler_apply(this.chain, this.array);
    const selected = Number(view.getBigInt64(16, true));
    if (selected < 0) return -1;
    const token = ids[selected * 3]!;
    this.accept(token);
    return token;
  }

  free(): void {
    this.llama.api.llama_sampler_free(this.chain);
  }
}
