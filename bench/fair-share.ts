// Fair share (issue #34): how long a 2-token chat waits while one request's
// n choices could hold every lane. The big request (`n` choices of
// `max_tokens` with ignore_eos) goes first; after --delay-ms the small chat
// is sent and timed to its whole reply. Then the big request is read to its
// end (or, with --cancel-big, cancelled) and its choices are counted.
//
//   bun bench/fair-share.ts --url URL [--n 8] [--max-tokens 30000] [--delay-ms 1500] [--cancel-big]
//
// Before fair share (main at 6f64c3d, the built-in model's 8 lanes) the chat
// waited for the whole big request: 156.9 s in the measurement, 193.8 s
// on an AMD EPYC with 2 cores (zen4 variant); after, 26 ms there.
import { flag } from "./support.ts";

const url = flag("url");
if (!url) {
  console.error(
    "usage: bun bench/fair-share.ts --url URL [--n 8] [--max-tokens 30000] [--delay-ms 1500] [--cancel-big]",
  );
  process.exit(2);
}
const n = Number(flag("n", "8"));
const maxTokens = Number(flag("max-tokens", "30000"));
const delayMs = Number(flag("delay-ms", "1500"));
const cancelBig = process.argv.includes("--cancel-big");

const model = ((await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
const post = (body: object, signal?: AbortSignal) =>
  fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, ...body }),
    signal,
  });

const abort = new AbortController();
const bigStarted = performance.now();
const big = post(
  { messages: [{ role: "user", content: "Tell a very long story." }], n, max_tokens: maxTokens, ignore_eos: true },
  abort.signal,
)
  .then(async (res) => ({
    ms: performance.now() - bigStarted,
    json: (await res.json()) as { choices: { finish_reason: string }[]; usage: { completion_tokens: number } },
  }))
  .catch((err: Error) => ({ ms: performance.now() - bigStarted, error: err.name }));
await Bun.sleep(delayMs);
const smallStarted = performance.now();
const small = (await (await post({ messages: [{ role: "user", content: "Hi" }], max_tokens: 2 })).json()) as {
  usage: { completion_tokens: number };
};
const smallMs = performance.now() - smallStarted;
let bigDone = false;
void big.then(() => (bigDone = true));
await Bun.sleep(0);
const bigRunning = !bigDone;
if (cancelBig) abort.abort();
const bigResult = await big;
console.log(
  JSON.stringify({
    n,
    max_tokens: maxTokens,
    delay_ms: delayMs,
    small_wait_ms: Math.round(smallMs),
    small_tokens: small.usage.completion_tokens,
    big_running_when_small_answered: bigRunning,
    big_ms: Math.round(bigResult.ms),
    ...("json" in bigResult
      ? {
          big_choices: bigResult.json.choices.length,
          big_finish: [...new Set(bigResult.json.choices.map((c) => c.finish_reason))],
          big_tokens: bigResult.json.usage.completion_tokens,
        }
      : { big: bigResult.error }),
  }),
);
