// Prefill against llama.cpp's llama-server: time to first token of a long
// prompt (4-8k tokens) that no cache has seen (cold), and of the same prompt
// with a new last line (warm: the prefix is reused, only the tail is
// prefilled). One request at a time, rounds alternating between the two
// servers, same model, lanes, context and threads; per-round ratios, medians
// and ranges. Each round's prompt is new from its first words, so neither
// side can reuse another round's prefix.
//
//   bun bench/prefill.ts [--model PATH] [--llama DIR] [--words 3600] [--rounds 5]
//                        [--threads 2] [--lanes 8] [--context 8192] [--cpu-variant NAME]
//                        [--llama-lib DIR | --shipped-lib]
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { ensureFixture } from "../src/fixtures/index.ts";
import { machineLine } from "./machine.ts";
import { startPair, waitForModels } from "./pair.ts";
import { LEAD_WORDS, NUMBER_WORDS } from "./prompt-words.ts";
import { fail, median, parseOptions, scratchFolder } from "./support.ts";
import { uniform } from "../src/fixtures/prng.ts";

const USAGE = `usage: bun bench/prefill.ts [options]

  --model PATH        GGUF to serve (default: the large-vocabulary fixture)
  --llama DIR         llama-server's folder (default ../shared/anchors/llama.cpp)
  --words N           words of each prompt (default 2200: about 4,600 tokens on the fixture)
  --rounds N          measured rounds per side (default 5), after one warm-up round
  --threads N         threads on both (default 2)
  --lanes N           lanes on both (default 8)
  --context N         context per lane on both (default 8192)
  --cpu-variant NAME  both on this ggml CPU variant
  --llama-lib DIR     superfluid opens this libllama (default: llama-server's own build, DIR)
  --shipped-lib       superfluid opens its own libllama instead`;

const { opts, int } = parseOptions(
  USAGE,
  ["model", "llama", "words", "rounds", "threads", "lanes", "context", "cpu-variant", "llama-lib"],
  ["shipped-lib"],
);
const llamaDir = resolve(opts.get("llama") ?? join(import.meta.dir, "../../shared/anchors/llama.cpp"));
if (!existsSync(join(llamaDir, "llama-server"))) fail(`no llama-server in ${llamaDir} (--llama DIR)`);
const words = int("words", 2200, 16);
const rounds = int("rounds", 5, 1);
const threads = int("threads", 2, 1);
const lanes = int("lanes", 8, 1);
const contextPerLane = int("context", 8192, 512);
const model = opts.get("model") ?? (await ensureFixture("large-vocab"));
const llamaLib = opts.has("shipped-lib") ? undefined : (opts.get("llama-lib") ?? llamaDir);

const scratch = scratchFolder("sf-bench-prefill-");
const pair = await startPair({
  model,
  llamaDir,
  lanes,
  contextPerLane,
  threads,
  cpuVariant: opts.get("cpu-variant"),
  llamaLib,
  scratch,
});
await waitForModels(pair.llamaServer!);
const modelIds = await Promise.all(
  [pair.superfluid, pair.llamaServer!].map(
    async (url) =>
      (
        (await (await fetch(`${url}/v1/models`)).json()) as {
          data: { id: string; runtime?: { cpu?: { variant: string | null } } }[];
        }
      ).data[0]!,
  ),
);
const sides = [
  { label: "superfluid", url: pair.superfluid, model: modelIds[0]!.id, variant: modelIds[0]!.runtime?.cpu?.variant },
  { label: "llama-server", url: pair.llamaServer!, model: modelIds[1]!.id, variant: pair.llamaVariant },
];

let promptNo = 0;
function newPrompt(): string {
  const id = promptNo++;
  const rand = uniform(0x51ed27 ^ Math.imul(id + 1, 0x2c1b3c6d));
  const out = [LEAD_WORDS[id % LEAD_WORDS.length]!, NUMBER_WORDS[(id * 7) % NUMBER_WORDS.length]!];
  while (out.length < words) out.push(NUMBER_WORDS[Math.floor(rand() * NUMBER_WORDS.length)]!);
  return out.join(" ");
}

/** Milliseconds to the first streamed token, and the prompt tokens the server counted. */
async function ttft(side: (typeof sides)[number], prompt: string): Promise<{ ms: number; promptTokens: number }> {
  const t0 = performance.now();
  const res = await fetch(`${side.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: side.model,
      prompt,
      max_tokens: 2,
      ignore_eos: true,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal: AbortSignal.timeout(600_000),
    // A fresh connection each time: Bun's pooled connections to llama-server are reset on reuse now and then.
    keepalive: false,
  });
  if (!res.ok || !res.body) throw new Error(`${side.label}: HTTP ${res.status} ${await res.text()}`);
  let first: number | undefined;
  let promptTokens = 0;
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of res.body) {
    first ??= performance.now();
    buf += decoder.decode(chunk, { stream: true });
  }
  for (const m of buf.matchAll(/"prompt_tokens":\s*(\d+)/g)) promptTokens = Number(m[1]);
  return { ms: first! - t0, promptTokens };
}

const cold: number[][] = [[], []];
const warm: number[][] = [[], []];
let tokens = 0;
for (let r = -1; r < rounds; r++) {
  for (let i = 0; i < sides.length; i++) {
    const prompt = newPrompt();
    const c = await ttft(sides[i]!, prompt);
    const w = await ttft(sides[i]!, `${prompt}\nand one more line ${r}`);
    tokens = c.promptTokens || tokens;
    process.stderr.write(
      `  ${r < 0 ? "warm-up" : `round ${r + 1}/${rounds}`} ${sides[i]!.label}: cold ${c.ms.toFixed(0)} ms (${c.promptTokens} tokens), warm ${w.ms.toFixed(0)} ms\n`,
    );
    if (r >= 0) {
      cold[i]!.push(c.ms);
      warm[i]!.push(w.ms);
    }
  }
}

const range = (xs: number[]) =>
  `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)})`;
const ratios = (a: number[], b: number[]) => a.map((x, i) => b[i]! / x); // llama-server time / ours: > 1 favours superfluid
const lines = [
  `${machineLine()}; ggml CPU variant: superfluid ${sides[0]!.variant ?? "one CPU backend"}, llama-server ${sides[1]!.variant ?? "one CPU backend"}`,
  `superfluid's libllama: ${llamaLib ?? "its own (shipped)"}; ${threads} threads, ${lanes} lanes of ${contextPerLane} tokens on both`,
  "",
  `Prompts of ${words} words (${tokens} tokens), time to first token, median of ${rounds} rounds, rounds alternating`,
  "",
  "| prefill | superfluid ms | llama-server ms | superfluid tok/s | llama-server tok/s | speed superfluid/llama-server per round, median (range) |",
  "|---|---:|---:|---:|---:|---:|",
  `| cold | ${median(cold[0]!).toFixed(0)} | ${median(cold[1]!).toFixed(0)} | ${((tokens * 1000) / median(cold[0]!)).toFixed(0)} | ${((tokens * 1000) / median(cold[1]!)).toFixed(0)} | ${range(ratios(cold[0]!, cold[1]!))} |`,
  `| warm (same prompt, new last line) | ${median(warm[0]!).toFixed(0)} | ${median(warm[1]!).toFixed(0)} | | | ${range(ratios(warm[0]!, warm[1]!))} |`,
];
console.log(lines.join("\n"));
process.exit(0);
