// Agent turns over Anthropic's Messages API: one 20-turn agent conversation
// (a long cached system prompt and tools resent every turn, the cache
// breakpoint moving to the newest user block) streamed from superfluid and
// from llama.cpp's own llama-server on the same model, same machine, same
// lanes, context and threads; per-turn first-token times, medians of rounds.
//
//   bun bench/anthropic-turns.ts [--model tiny-chat|large-vocab|PATH] [--rounds 3] [--turns 20]
//                                [--max-tokens 64] [--system-words 1500] [--threads 1] [--lanes 1]
//                                [--ctx 16384] [--llama DIR] [--shipped-lib] [--force-tools N]
//                                [--no-cache-control] [--gap-ms 50] [--timeout 120] [--json out.json]
//
// Both servers are started fresh each round (and stopped after it), so every
// round is the same cold agent session: turn 1 finds nothing cached, turns
// 2..N find what the earlier turns left. A warm-up request first takes each
// process through the same code (a short system prompt with the same tools
// and breakpoints, so it shares only the template's first tokens with the
// conversation): turn 1 then times an uncached prompt, not a process's first
// request, which is reported apart (turn 0). Within a round the two conversations
// advance turn by turn, the servers alternating (which one goes first
// alternates by round), so load from elsewhere on the machine lands on both;
// --gap-ms between requests lets a server finish its after-reply work before
// the other is timed, as an agent's tool run would. Every request opens its
// own connection: Bun's pooled connections to llama-server are now and then
// reset on reuse (ECONNRESET), and a fresh loopback connection costs both the
// same.
//
// The servers, the round loop and the summary are bench/turns.ts's, shared
// with responses-turns.ts. Progress goes to stderr, the Markdown tables to
// stdout. Exit status 1 when a turn failed.
import {
  AGENT_TOOLS,
  type Arm,
  byTurn,
  COMMON_USAGE,
  f1,
  f2,
  finish,
  libraryNote,
  printSpans,
  ratio,
  readSetup,
  type Server,
  startLlama,
  startSuperfluid,
  stepText,
  systemText,
  type TimedTurn,
  tableHead,
  timedSse,
  runRounds,
} from "./turns.ts";

// ---------------------------------------------------------------- arguments

const USAGE = `usage: bun bench/anthropic-turns.ts [options]

${COMMON_USAGE}
  --no-cache-control the same conversation without cache_control breakpoints`;

const setup = await readSetup("turns", USAGE, [], ["no-cache-control"]);
const { turns, maxTokens, forceTools, timeoutS, haveLlama } = setup;
const cacheControl = !setup.opts.has("no-cache-control");

// ---------------------------------------------------------------- the conversation

const SYSTEM = [
  {
    type: "text",
    text: systemText(setup.systemWords),
    ...(cacheControl ? { cache_control: { type: "ephemeral" } } : {}),
  },
];
const TOOLS = AGENT_TOOLS.map((t) => ({ name: t.name, description: t.description, input_schema: t.schema }));

type Block = Record<string, unknown> & { type: string };
interface Message {
  role: "user" | "assistant";
  content: string | Block[];
}

interface Turn extends TimedTurn {
  stopReason?: string;
  blocks: string[];
  /** Usage as the server gave it: message_start's, overridden by message_delta's where present. */
  inputTokens?: number;
  cacheRead?: number;
  cacheCreation?: number;
  outputTokens?: number;
}

/** Streams one Messages request, timing it to its first content delta; returns the content blocks. */
async function stream(sys: Server, body: Record<string, unknown>, turn: Turn): Promise<Block[]> {
  const content: Block[] = [];
  const partial = new Map<number, string>(); // tool_use input JSON by block index
  let stopped = false;
  const headers = { "anthropic-version": "2023-06-01", "x-api-key": "unused" };
  const onEvent = (e: any, ms: number) => {
    const usage = e.type === "message_start" ? e.message?.usage : e.type === "message_delta" ? e.usage : undefined;
    if (usage) {
      turn.inputTokens = usage.input_tokens ?? turn.inputTokens;
      turn.cacheRead = usage.cache_read_input_tokens ?? turn.cacheRead;
      turn.cacheCreation = usage.cache_creation_input_tokens ?? turn.cacheCreation;
      turn.outputTokens = usage.output_tokens ?? turn.outputTokens;
    }
    if (e.type === "content_block_start") content[e.index] = { ...e.content_block };
    else if (e.type === "content_block_delta") {
      turn.ttftMs ??= ms;
      const b = content[e.index]!;
      const d = e.delta;
      if (d.type === "text_delta") b.text = `${b.text ?? ""}${d.text}`;
      else if (d.type === "thinking_delta") b.thinking = `${b.thinking ?? ""}${d.thinking}`;
      else if (d.type === "signature_delta") b.signature = `${b.signature ?? ""}${d.signature}`;
      else if (d.type === "input_json_delta") partial.set(e.index, (partial.get(e.index) ?? "") + d.partial_json);
    } else if (e.type === "message_delta") turn.stopReason = e.delta?.stop_reason;
    else if (e.type === "message_stop") stopped = true;
    else if (e.type === "error") throw new Error(`error event: ${JSON.stringify(e.error).slice(0, 300)}`);
  };
  const onEnd = () => {
    if (!stopped) throw new Error("stream ended without message_stop");
    for (const [i, json] of partial) content[i]!.input = json ? JSON.parse(json) : {};
  };
  await timedSse(`${sys.url}/v1/messages`, headers, body, turn, timeoutS, onEvent, onEnd);
  turn.blocks = content.filter(Boolean).map((b) => b.type);
  return content.filter(Boolean);
}

const newTurn = (sys: Server, round: number, n: number): Turn => ({
  system: sys.label,
  round,
  turn: n,
  ok: false,
  totalMs: 0,
  blocks: [],
});

/** One system's conversation: its history grows with what that system returns. */
class Conversation {
  messages: Message[] = [];
  constructor(
    readonly sys: Server,
    readonly round: number,
  ) {}

  async turn(n: number): Promise<Turn> {
    // The breakpoint moves to the newest user block, as agents move it.
    for (const m of this.messages) if (Array.isArray(m.content)) for (const b of m.content) delete b.cache_control;
    this.messages.push({
      role: "user",
      content: [{ type: "text", text: stepText(n), ...(cacheControl ? { cache_control: { type: "ephemeral" } } : {}) }],
    });
    const body = {
      model: this.sys.model,
      max_tokens: maxTokens,
      temperature: 0,
      stream: true,
      system: SYSTEM,
      tools: TOOLS,
      tool_choice: forceTools && n % forceTools === 0 ? { type: "any" } : { type: "auto" },
      messages: this.messages,
    };
    const turn = newTurn(this.sys, this.round, n);
    const content = await stream(this.sys, body, turn);
    // The assistant content as returned (an empty reply would be refused as history).
    this.messages.push({
      role: "assistant",
      content: content.length ? content : [{ type: "text", text: "(no reply)" }],
    });
    const calls = content.filter((b) => b.type === "tool_use");
    if (calls.length) {
      this.messages.push({
        role: "user",
        content: calls.map((c) => ({
          type: "tool_result",
          tool_use_id: c.id,
          content: `output of ${c.name} at step ${n}`,
        })),
      });
      this.messages.push({ role: "assistant", content: "Noted." });
    }
    return turn;
  }
}

// ---------------------------------------------------------------- the run

const startedAt = new Date().toISOString();
const lib = libraryNote(setup) + (cacheControl ? "" : "; no cache_control");
const { modelPath, rounds, lanes, ctx, threads } = setup;
console.error(
  `turns: ${modelPath}, ${rounds} rounds x ${turns} turns, max_tokens ${maxTokens}, ${lanes} lane(s) x ${ctx} tokens, ${threads} thread(s); superfluid on ${lib}`,
);

const arm = (label: string, start: (round: number) => Promise<Server>): Arm<Turn> => ({
  label,
  start,
  // A short system prompt with the same tools and breakpoints.
  warmUp: async (s, round) => {
    const system = [{ ...SYSTEM[0], text: "Warm-up request." }];
    const body = {
      model: s.model,
      max_tokens: 8,
      temperature: 0,
      stream: true,
      system,
      tools: TOOLS,
      messages: [{ role: "user", content: "Warm up." }],
    };
    const turn = newTurn(s, round, 0);
    await stream(s, body, turn);
    return turn;
  },
  conversation: (s, round) => new Conversation(s, round),
});
const arms = [arm("superfluid", (round) => startSuperfluid(setup, "superfluid", `sessions-${round}`))];
if (haveLlama) arms.push(arm("llama-server", () => startLlama(setup)));

const results = await runRounds(setup, arms, (t) => {
  const use = `in ${t.inputTokens ?? "-"} read ${t.cacheRead ?? "-"} created ${t.cacheCreation ?? "-"} out ${t.outputTokens ?? "-"}`;
  return `ttft ${t.ttftMs?.toFixed(1)} ms, total ${t.totalMs.toFixed(1)} ms, ${t.stopReason} [${t.blocks.join(",")}], ${use}`;
});

// ---------------------------------------------------------------- report

const labels = arms.map((a) => a.label);
const { med, counts } = byTurn(results);
const prompt = (t: Turn) => (t.inputTokens ?? 0) + (t.cacheRead ?? 0) + (t.cacheCreation ?? 0);

console.log(
  `${modelPath.split("/").at(-1)}, ${rounds} rounds (servers fresh each round), ${turns} turns, max_tokens ${maxTokens}, temperature 0, ` +
    `${lanes} lane(s) x ${ctx} tokens, ${threads} thread(s); superfluid on ${lib}. TTFT: request start to the first content_block_delta, median of rounds.\n`,
);
console.log(
  tableHead(
    haveLlama
      ? [
          "turn",
          "superfluid TTFT ms",
          "llama-server TTFT ms",
          "ratio sf/llama",
          "superfluid total ms",
          "llama-server total ms",
          "superfluid prompt / cache_read / created",
          "llama-server prompt / cache_read",
          "output tokens sf / llama",
        ]
      : [
          "turn",
          "superfluid TTFT ms",
          "superfluid total ms",
          "superfluid prompt / cache_read / created",
          "output tokens",
        ],
  ),
);
for (let n = 1; n <= turns; n++) {
  const [sf, ls] = labels.map((l) => med(l, n, (t) => t.ttftMs));
  const sfUse = `${counts("superfluid", n, prompt)} / ${counts("superfluid", n, (t) => t.cacheRead)} / ${counts("superfluid", n, (t) => t.cacheCreation)}`;
  if (haveLlama) {
    const lsUse = `${counts("llama-server", n, prompt)} / ${counts("llama-server", n, (t) => t.cacheRead)}`;
    const out = `${counts("superfluid", n, (t) => t.outputTokens)} / ${counts("llama-server", n, (t) => t.outputTokens)}`;
    const totals = labels.map((l) => f1(med(l, n, (t) => t.totalMs)));
    console.log(
      `| ${n} | ${f1(sf)} | ${f1(ls)} | ${f2(ratio(sf, ls))} | ${totals.join(" | ")} | ${sfUse} | ${lsUse} | ${out} |`,
    );
  } else
    console.log(
      `| ${n} | ${f1(sf)} | ${f1(med("superfluid", n, (t) => t.totalMs))} | ${sfUse} | ${counts("superfluid", n, (t) => t.outputTokens)} |`,
    );
}

const summary = printSpans(results, labels, turns, haveLlama ? [["ratio sf/llama", "superfluid", "llama-server"]] : []);
finish(setup, results, summary, { cacheControl, startedAt });
