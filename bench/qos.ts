// QoS benchmark (issue #7): the first-token time of an interactive chat sent
// while agents with long prompts hold every lane, beside the same chat on an
// idle server, for superfluid and (optionally) another OpenAI-compatible
// server such as llama-server, rounds interleaved.
//
//   bun bench/qos.ts --url URL [--url2 URL2] [--agents 8] [--agent-words 1500]
//                    [--agent-tokens 128] [--rounds 3] [--settle-ms 300]
//
// superfluid gets the chat with `x-superfluid-qos: interactive`; a server that
// does not read the header treats it as one more request. Agents stream with
// `ignore_eos`, so each must return exactly --agent-tokens tokens.
import { COMMON_WORDS } from "../src/fixtures/words.ts";
import { timedChat } from "./sse.ts";
import { flag } from "./support.ts";

const systems = [flag("url"), flag("url2")].filter((u): u is string => !!u);
if (systems.length === 0) {
  console.error(
    "usage: bun bench/qos.ts --url URL [--url2 URL2] [--agents 8] [--agent-words 1500] [--agent-tokens 128] [--rounds 3] [--settle-ms 300]",
  );
  process.exit(2);
}
const agentsN = Number(flag("agents", "8"));
const agentWords = Number(flag("agent-words", "1500"));
const agentTokens = Number(flag("agent-tokens", "128"));
const rounds = Number(flag("rounds", "3"));
const settleMs = Number(flag("settle-ms", "300"));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function words(seed: number, n: number): string {
  let x = seed >>> 0;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out.push(COMMON_WORDS[x % COMMON_WORDS.length]!);
  }
  return out.join(" ");
}

async function modelOf(url: string): Promise<string> {
  const res = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
  return res.data[0]!.id;
}

/** A greedy streamed chat of one user message, `ignore_eos` so it runs to `maxTokens`. */
function chat(url: string, model: string, content: string, maxTokens: number, headers: Record<string, string> = {}) {
  return timedChat(
    url,
    { model, messages: [{ role: "user", content }], temperature: 0, max_tokens: maxTokens, ignore_eos: true },
    headers,
  );
}

const results = new Map<string, { idle: number[]; busy: number[]; agentsOk: number; agentsTotal: number }>();
for (const url of systems) results.set(url, { idle: [], busy: [], agentsOk: 0, agentsTotal: 0 });
const models = new Map<string, string>();
for (const url of systems) models.set(url, await modelOf(url));

for (let r = 0; r < rounds; r++) {
  for (const url of systems) {
    const model = models.get(url)!;
    const res = results.get(url)!;
    const question = `quick question number ${r}: ${words(9000 + r, 8)}`;
    res.idle.push((await chat(url, model, question, 8, { "x-superfluid-qos": "interactive" })).firstMs);
    const agents = Array.from({ length: agentsN }, (_, i) =>
      chat(url, model, words(r * 1000 + i + (url === systems[0] ? 0 : 500), agentWords), agentTokens),
    );
    await Bun.sleep(settleMs);
    const urgent = await chat(url, model, `${question} again`, 8, { "x-superfluid-qos": "interactive" });
    res.busy.push(urgent.firstMs);
    const done = await Promise.all(agents);
    res.agentsTotal += done.length;
    res.agentsOk += done.filter((d) => d.status === 200 && d.completionTokens === agentTokens).length;
    console.error(`round ${r} ${url}: idle ${res.idle.at(-1)!.toFixed(1)} ms, busy ${urgent.firstMs.toFixed(1)} ms`);
  }
}

console.log(
  `${agentsN} agents x ~${agentWords}-word prompts, ${agentTokens}-token replies; chat sent ${settleMs} ms after them; medians of ${rounds} rounds`,
);
console.log("| system | idle chat TTFT ms | chat TTFT among agents ms | ratio | agents with full replies |");
console.log("|---|---:|---:|---:|---:|");
for (const [url, r] of results) {
  const idle = median(r.idle);
  const busy = median(r.busy);
  console.log(
    `| ${url} | ${idle.toFixed(1)} | ${busy.toFixed(1)} | ${(busy / idle).toFixed(1)}x | ${r.agentsOk}/${r.agentsTotal} |`,
  );
}
