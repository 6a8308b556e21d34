// The sampled draw of one token from a logits row, at the engine's speed
// (docs/design.md#sampling-chain). The semantics are those of the chain of
// llama.cpp samplers superfluid ran before: temperature, then top-p, min-p
// and top-k all judged on the same tempered distribution, then llama.cpp's
// `dist` draw (mt19937, one canonical double per draw) over what is kept, in
// the order llama.cpp keeps it. What changed is the work: no sort of the
// vocabulary, no scalar exp over it. One pass tempers the row (and selects
// the top k when one is asked), one vectorized pass (ggml's
// ggml_vec_soft_max_f32 where the library exports it) gives the softmax
// normaliser top-p needs, and only the tokens that can be kept are sorted.
// Pure TypeScript: the caller hands in the row and, where it has one, the
// vectorized exp.

/** `out[i] = exp(x[i] - max)` for i < n; returns the sum. */
export type ExpSum = (n: number, out: Float32Array, x: Float32Array, max: number) => number;

/** The same in plain JavaScript: the fallback where no vectorized one is exported (e.g. Windows' DLLs). */
export const jsExpSum: ExpSum = (n, out, x, max) => {
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const e = Math.exp(x[i]! - max);
    out[i] = e;
    sum += out[i]!;
  }
  return sum;
};

export interface Truncation {
  temperature: number;
  /** 0: off. */
  topK: number;
  /** 1: off. */
  topP: number;
  /** 0: off. */
  minP: number;
}

/**
 * The 32-bit Mersenne Twister (std::mt19937), and the canonical double in
 * [0, 1) that std::uniform_real_distribution<double> draws from it (two
 * outputs, low word first, as libstdc++ and libc++ both compute it): the
 * same stream as llama.cpp's dist sampler for the same seed.
 */
export class Mt19937 {
  private readonly mt = new Uint32Array(624);
  private index = 624;

  constructor(seed: number) {
    const mt = this.mt;
    mt[0] = seed >>> 0;
    for (let i = 1; i < 624; i++) {
      const prev = mt[i - 1]!;
      mt[i] = (Math.imul(1812433253, prev ^ (prev >>> 30)) + i) >>> 0;
    }
  }

  nextU32(): number {
    if (this.index >= 624) this.twist();
    let y = this.mt[this.index++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** generate_canonical<double, 53>: (g1 + g2 * 2^32) / 2^64, kept below 1 as libstdc++ does. */
  canonical(): number {
    const low = this.nextU32();
    const high = this.nextU32();
    const r = (low + high * 4294967296) / 2 ** 64;
    return r >= 1 ? 1 - 2 ** -53 : r;
  }

  private twist(): void {
    const mt = this.mt;
    for (let i = 0; i < 624; i++) {
      const y = (mt[i]! & 0x80000000) | (mt[(i + 1) % 624]! & 0x7fffffff);
      let v = mt[(i + 397) % 624]! ^ (y >>> 1);
      if (y & 1) v ^= 0x9908b0df;
      mt[i] = v >>> 0;
    }
    this.index = 0;
  }
}

/** Buffers sized to a vocabulary, reused by every draw of one process (a worker samples on one thread). */
class Scratch {
  readonly x: Float32Array;
  readonly y: Float32Array;
  /** Positions (into the row or the subset) of the tokens that may be kept. */
  readonly kept: Int32Array;
  /** The kept tokens' tempered values, in kept's order. */
  readonly candidates: Float32Array;
  readonly radixIdx: Int32Array;
  readonly radixTmp: Int32Array;
  readonly keys: Uint32Array;
  readonly keysTmp: Uint32Array;
  constructor(readonly size: number) {
    this.x = new Float32Array(size);
    this.y = new Float32Array(size);
    this.kept = new Int32Array(size);
    this.candidates = new Float32Array(size);
    this.radixIdx = new Int32Array(size);
    this.radixTmp = new Int32Array(size);
    this.keys = new Uint32Array(size);
    this.keysTmp = new Uint32Array(size);
  }
}
let scratch: Scratch | undefined;
function scratchFor(n: number): Scratch {
  if (!scratch || scratch.size < n) scratch = new Scratch(n);
  return scratch;
}

const f32 = Math.fround;

/**
 * The highest of logits[0..n) (-Infinity for none): four running maxima,
 * which the JIT keeps apart, about 1.5 times a single running maximum's speed.
 */
export function maxOf(logits: Float32Array, n: number): number {
  let m0 = -Infinity;
  let m1 = -Infinity;
  let m2 = -Infinity;
  let m3 = -Infinity;
  let i = 0;
  for (; i + 3 < n; i += 4) {
    const a = logits[i]!;
    const b = logits[i + 1]!;
    const c = logits[i + 2]!;
    const d = logits[i + 3]!;
    if (a > m0) m0 = a;
    if (b > m1) m1 = b;
    if (c > m2) m2 = c;
    if (d > m3) m3 = d;
  }
  for (; i < n; i++) if (logits[i]! > m0) m0 = logits[i]!;
  return Math.max(m0, m1, m2, m3);
}

/**
 * The position (index into `logits`) of the highest value, the lowest
 * position on ties: llama.cpp's greedy choice. -1 when every value is -inf.
 */
export function argmaxOf(logits: Float32Array, n: number): number {
  const top = maxOf(logits, n);
  if (top === -Infinity) return -1;
  for (let i = 0; i < n; i++) if (logits[i] === top) return i;
  return -1;
}

/**
 * Draws a position in [0, n) of `logits` (a row indexed by token id, or a
 * subset the caller maps back) at temperature > 0 under `t`, with one
 * canonical double from `rng` (none when nothing is drawable: -1).
 */
export function drawPosition(
  logits: Float32Array,
  n: number,
  t: Truncation,
  rng: Mt19937,
  expSum: ExpSum = jsExpSum,
): number {
  const s = scratchFor(n);
  const temp = f32(t.temperature);
  const k = t.topK > 0 && t.topK < n ? t.topK : 0;
  const topP = t.topP < 1;
  const minP = t.minP > 0;
  if (!topP && !minP && k === 0) return drawAll(logits, n, temp, rng, expSum, s);
  if (!topP && k > 0) return drawTopK(logits, n, temp, k, t.minP, rng);
  // Temper into x (llama.cpp's temperature sampler divides each logit in float)
  // and, in the same pass, gather the tokens near the running best: those
  // within NEAR nats of the final best are the first candidates for the nucleus.
  const x = temp === 1 ? logits : s.x;
  const kept = s.kept;
  let max = -Infinity;
  let gathered = 0;
  if (temp === 1) {
    for (let i = 0; i < n; i++) {
      const v = logits[i]!;
      if (v > max) max = v;
      if (v >= max - NEAR) kept[gathered++] = i;
    }
  } else {
    for (let i = 0; i < n; i++) {
      const v = f32(logits[i]! / temp);
      x[i] = v;
      if (v > max) max = v;
      if (v >= max - NEAR) kept[gathered++] = i;
    }
  }
  if (max === -Infinity) return -1;
  if (!topP) return drawMinP(x, n, max, t.minP, rng, s);
  // Top-p judges the whole tempered softmax: y = exp(x - max), in place over x
  // where x is ours (one buffer less to stream through the cache).
  const y = temp === 1 ? s.y : s.x;
  expSum(n, y, x, max);
  const z = floatSum(y, n);
  const count = collectNucleus(n, y, kept, gathered, z, t.topP, k, minP ? t.minP : 0);
  // The candidates' tempered values again, exactly as llama.cpp's temperature
  // sampler makes them, best first (ties: lower position first).
  const xs = s.candidates;
  for (let j = 0; j < count; j++) {
    const i = kept[j]!;
    xs[j] = temp === 1 ? logits[i]! : logits[i]! / temp;
  }
  sortDescending(xs, kept, count, s);
  // The nucleus: the shortest prefix whose probability reaches top_p (summed in
  // float, as llama.cpp sums it), then min-p's and top-k's prefixes.
  const p = f32(t.topP);
  let length = count;
  let cum = 0;
  for (let j = 0; j < count; j++) {
    cum = f32(cum + f32(y[kept[j]!]! / z));
    if (cum >= p) {
      length = j + 1;
      break;
    }
  }
  if (minP) length = Math.min(length, minPLength(xs, length, t.minP));
  if (k > 0) length = Math.min(length, k);
  return kept[pickIndex(y, kept, length, rng)]!;
}

/**
 * The normaliser as llama.cpp's top-p computes it: a float sum in token
 * order, in which a term below half an ulp of the running sum is lost (on a
 * 150k vocabulary the sum comes out 1e-5 to 1e-4 below the exact one). Kept
 * on purpose: the nucleus then ends where llama.cpp's ends, and a seeded
 * request draws the tokens it drew before.
 */
function floatSum(y: Float32Array, n: number): number {
  let sum = 0;
  for (let i = 0; i < n; i++) sum = f32(sum + y[i]!);
  return sum;
}

/** No truncation: llama.cpp's dist over the whole row in id order. */
function drawAll(logits: Float32Array, n: number, temp: number, rng: Mt19937, expSum: ExpSum, s: Scratch): number {
  const x = temp === 1 ? logits : s.x;
  let max = -Infinity;
  for (let i = 0; i < n; i++) {
    const v = temp === 1 ? logits[i]! : f32(logits[i]! / temp);
    if (temp !== 1) x[i] = v;
    if (v > max) max = v;
  }
  if (max === -Infinity) return -1;
  const y = temp === 1 ? s.y : s.x;
  const sum = expSum(n, y, x, max);
  const rnd = rng.canonical();
  const target = sum * rnd;
  let run = 0;
  let last = -1;
  for (let i = 0; i < n; i++) {
    const e = y[i]!;
    if (e === 0) continue;
    run += e;
    last = i;
    if (run >= target) return i;
  }
  return last;
}

/**
 * Top-k without top-p: one pass keeps the k best (a buffer of at most 4k,
 * cut back to k whenever it fills), then min-p's prefix, then the draw over
 * the survivors best first, tempered in float as llama.cpp tempers them.
 */
function drawTopK(logits: Float32Array, n: number, temp: number, k: number, minP: number, rng: Mt19937): number {
  const cap = 4 * k;
  const ids = new Int32Array(cap);
  let size = 0;
  let floor = -Infinity;
  for (let i = 0; i < n; i++) {
    const v = logits[i]!;
    if (v > floor) {
      ids[size++] = i;
      if (size === cap) {
        size = keepBest(logits, ids, size, k);
        floor = logits[ids[k - 1]!]!;
      }
    }
  }
  size = keepBest(logits, ids, size, k);
  if (size === 0) return -1;
  const x = new Float32Array(size);
  for (let i = 0; i < size; i++) x[i] = temp === 1 ? logits[ids[i]!]! : logits[ids[i]!]! / temp;
  const order = Int32Array.from({ length: size }, (_, i) => i);
  const length = minP > 0 ? minPLength(x, size, minP) : size;
  const y = new Float32Array(length);
  for (let i = 0; i < length; i++) y[i] = Math.exp(f32(x[i]! - x[0]!));
  return ids[pickIndex(y, order, length, rng)]!;
}

/**
 * Sorts ids[0..size) by logit descending (ties: lower id first) and keeps
 * the best k of them, -inf ones left out. Returns how many are kept.
 */
function keepBest(logits: Float32Array, ids: Int32Array, size: number, k: number): number {
  const sorted = Array.from(ids.subarray(0, size))
    .filter((t) => logits[t]! !== -Infinity)
    .sort((a, b) => logits[b]! - logits[a]! || a - b);
  const kept = Math.min(k, sorted.length);
  for (let i = 0; i < kept; i++) ids[i] = sorted[i]!;
  return kept;
}

/** Min-p alone: the tokens within log(min_p) of the best, in id order (llama.cpp's unsorted path). */
function drawMinP(x: Float32Array, n: number, max: number, minP: number, rng: Mt19937, s: Scratch): number {
  const floor = f32(max + f32(Math.log(minP)));
  const order = s.kept;
  let size = 0;
  for (let i = 0; i < n; i++) if (x[i]! >= floor) order[size++] = i;
  const y = s.y;
  for (let j = 0; j < size; j++) y[order[j]!] = Math.exp(f32(x[order[j]!]! - max));
  return order[pickIndex(y, order, size, rng)]!;
}

/** How many of the sorted values pass min-p: llama.cpp keeps the best and then every x >= best + log(min_p). */
function minPLength(sorted: Float32Array, length: number, minP: number): number {
  if (length === 0) return 0;
  const floor = f32(sorted[0]! + f32(Math.log(minP)));
  let i = 1;
  while (i < length && sorted[i]! >= floor) i++;
  return i;
}

/**
 * llama.cpp's dist over `order[0..length)` with weights y: the first index
 * whose running sum (in double) reaches the total times a canonical draw.
 * A single candidate still takes its draw, as llama.cpp's does.
 */
function pickIndex(y: Float32Array, order: Int32Array, length: number, rng: Mt19937): number {
  if (length === 0) return -1;
  let sum = 0;
  for (let i = 0; i < length; i++) sum += y[order[i]!]!;
  const rnd = rng.canonical();
  if (length === 1) return 0;
  const target = sum * rnd;
  let run = 0;
  for (let i = 0; i < length; i++) {
    run += y[order[i]!]!;
    if (run >= target) return i;
  }
  return length - 1;
}

/** The first candidates for the nucleus: within NEAR nats (tempered) of the best, so y >= 2^-12. */
const NEAR = 12 * Math.LN2;

/**
 * The positions that may be in the nucleus, into s.kept (in position order),
 * starting from the `gathered` ones the tempering pass kept near its running
 * best: those with y >= a threshold, lowered until they hold top_p of the
 * mass (or k of them, or min-p's floor is passed). Returns how many. A peaked
 * row needs no more passes; a flat one keeps most of the row.
 */
function collectNucleus(
  n: number,
  y: Float32Array,
  kept: Int32Array,
  gathered: number,
  z: number,
  topP: number,
  k: number,
  minP: number,
): number {
  // A little beyond top_p, so the float sum of the sorted prefix (which lags the
  // exact one by rounding) still reaches top_p among the tokens collected.
  const need = Math.min(topP + 1e-4, 1 - 1e-7) * z;
  const enough = (size: number, mass: number, threshold: number) =>
    mass >= need || (k > 0 && size >= k) || (minP > 0 && threshold <= minP * 0.5);
  // The gathered ones that are still near the final best (y of the best is 1).
  let threshold = Math.exp(-NEAR);
  let size = 0;
  let mass = 0;
  for (let j = 0; j < gathered; j++) {
    const i = kept[j]!;
    if (y[i]! >= threshold) {
      kept[size++] = i;
      mass += y[i]!;
    }
  }
  while (!enough(size, mass, threshold) && size < n && threshold > 0) {
    threshold = threshold < 2 ** -120 ? 0 : threshold * 2 ** -12;
    size = 0;
    mass = 0;
    for (let i = 0; i < n; i++) {
      const e = y[i]!;
      if (e >= threshold) {
        kept[size++] = i;
        mass += e;
      }
    }
  }
  return size;
}

/**
 * Sorts the candidates (values[j] at positions[j], j < size, positions
 * ascending) by value descending, ties by position ascending, both arrays
 * together. Few: a comparison sort; many (a flat row): an LSD radix sort on
 * the float bits, stable, linear.
 */
function sortDescending(values: Float32Array, positions: Int32Array, size: number, s: Scratch): void {
  if (size <= 512) {
    const order = Array.from({ length: size }, (_, j) => j).sort(
      (a, b) => values[b]! - values[a]! || positions[a]! - positions[b]!,
    );
    const v = order.map((j) => values[j]!);
    const p = order.map((j) => positions[j]!);
    for (let j = 0; j < size; j++) {
      values[j] = v[j]!;
      positions[j] = p[j]!;
    }
    return;
  }
  const bits = new Uint32Array(values.buffer, values.byteOffset, size);
  let srcKeys = s.keys;
  let dstKeys = s.keysTmp;
  let srcIdx = s.radixIdx;
  let dstIdx = s.radixTmp;
  for (let j = 0; j < size; j++) {
    const b = bits[j]!;
    // Ascending order of the key is descending order of the float.
    const ascending = b & 0x80000000 ? ~b >>> 0 : (b | 0x80000000) >>> 0;
    srcKeys[j] = ~ascending >>> 0;
    srcIdx[j] = j;
  }
  const counts = new Int32Array(2048);
  for (let shift = 0; shift < 32; shift += 11) {
    counts.fill(0);
    for (let j = 0; j < size; j++) counts[(srcKeys[j]! >>> shift) & 2047]!++;
    let total = 0;
    for (let d = 0; d < 2048; d++) {
      const c = counts[d]!;
      counts[d] = total;
      total += c;
    }
    for (let j = 0; j < size; j++) {
      const key = srcKeys[j]!;
      const at = counts[(key >>> shift) & 2047]!++;
      dstIdx[at] = srcIdx[j]!;
      dstKeys[at] = key;
    }
    [srcIdx, dstIdx] = [dstIdx, srcIdx];
    [srcKeys, dstKeys] = [dstKeys, srcKeys];
  }
  // srcIdx: the sorted order of j. Permute both arrays through a copy.
  const v = values.slice(0, size);
  const p = positions.slice(0, size);
  for (let j = 0; j < size; j++) {
    values[j] = v[srcIdx[j]!]!;
    positions[j] = p[srcIdx[j]!]!;
  }
}
