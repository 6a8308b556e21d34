// Agent turns over OpenAI's Responses API: one 20-turn conversation
// (long instructions and function tools resent every turn, as an agent sends
// them; each turn a new user message) streamed three ways on the same model,
// same machine, same lanes, context and threads:
//
//   sf-chained  superfluid, `previous_response_id`: only the new user message
//               is sent each turn (`store: true`), and superfluid continues the
//               stored conversation warm from its own tokens
//               (docs/api/responses.md#conversation-state);
//   sf-resent   superfluid, the whole history resent with `store: false`, as
//               Codex does: the earlier turns' input items and the output items
//               as returned, then the new user message;
//   llama       llama.cpp's own llama-server on POST /v1/responses, the whole
//               history resent the same way. llama-server refuses
//               `previous_response_id` (400 "llama.cpp does not support
//               'previous_response_id'"), so it gets only this arm; otherwise
//               its request is the same as sf-resent's (it accepts `store`,
//               `tool_choice`, `max_output_tokens` and output items as input).
//               Its stream has no `response.incomplete`: a reply cut by
//               `max_output_tokens` ends with `response.completed` too.
//
//   bun bench/responses-turns.ts [--model tiny-chat|large-vocab|PATH] [--rounds 3] [--turns 20]
//                                [--max-tokens 64] [--system-words 1500] [--threads 1] [--lanes 1]
//                                [--ctx 16384] [--llama DIR] [--shipped-lib] [--force-tools N]
//                                [--gap-ms 50] [--timeout 120] [--json out.json]
//
// Each arm runs on its own server process (the two superfluid arms too, so
// neither arm's cache holds the other's conversation), all three started fresh
// each round and stopped after it, so every round is the same cold session:
// turn 1 finds nothing cached. A warm-up request first (short instructions,
// the same tools, not stored) takes each process through the same code, so
// turn 1 times an uncached prompt, not a process's first request (reported
// apart as turn 0). The conversations advance turn by turn, the arms taking
// turns (the arm that goes first rotates by round), one request in flight at a
// time, each on a fresh connection; the round loop, servers and summary are
// bench/turns.ts's, shared with anthropic-turns.ts.
//
// Per turn: TTFT (request start to the first `.delta` event: output text,
// reasoning text or call arguments), total time (to the terminal event; on
// sf-chained that includes storing the response durably before
// `response.completed` is sent), the terminal status, and the usage of the
// final response (input tokens, `input_tokens_details.cached_tokens`, output
// tokens); on sf-chained also `x-superfluid-continued` (warm or rebuilt); and
// the CPU time of the server's processes from sending the request to --gap-ms
// after its reply (bench/turns.ts groupCpuMs), which the machine's other load
// does not move as it moves wall times. A
// turn fails unless the reply is 200 and its stream ends with
// `response.completed` (or superfluid's `response.incomplete` for
// `max_output_tokens`).
//
// Progress goes to stderr, the Markdown tables to stdout. Exit status 1 when a
// turn failed.
import {
  AGENT_TOOLS,
  type Arm,
  byTurn,
  COMMON_USAGE,
  f1,
  f2,
  finish,
  groupCpuMs,
  libraryNote,
  median,
  printSpans,
  ratio,
  readSetup,
  runRounds,
  type Server,
  startLlama,
  startSuperfluid,
  stepText,
  systemText,
  tableHead,
  type TimedTurn,
  timedSse,
} from "./turns.ts";

const USAGE = `usage: bun bench/responses-turns.ts [options]

${COMMON_USAGE}`;

const setup = await readSetup("responses-turns", USAGE);
const { modelPath, rounds, turns, maxTokens, lanes, ctx, threads, forceTools, timeoutS, haveLlama } = setup;

// ---------------------------------------------------------------- the conversation

const INSTRUCTIONS = systemText(setup.systemWords);
const TOOLS = AGENT_TOOLS.map((t) => ({
  type: "function",
  name: t.name,
  description: t.description,
  parameters: t.schema,
}));

type Item = Record<string, unknown>;

interface Turn extends TimedTurn {
  /** The terminal event's response status (completed, incomplete, failed). */
  status?: string;
  /** The output item types, in order. */
  items: string[];
  inputTokens?: number;
  cachedTokens?: number;
  outputTokens?: number;
  /** sf-chained: x-superfluid-continued (warm or rebuilt). */
  continued?: string;
  /** The final response's id. */
  id?: string;
  /** CPU time of the server's processes from sending to --gap-ms after the reply. */
  cpuMs?: number;
}

const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed"]);

/** Streams one Responses request, timing it to its first delta; returns the final response's output items. */
async function stream(sys: Server, body: Record<string, unknown>, turn: Turn): Promise<Item[]> {
  let final: any;
  const onEvent = (e: any, ms: number) => {
    if (typeof e.type === "string" && e.type.endsWith(".delta")) turn.ttftMs ??= ms;
    if (e.type === "error") throw new Error(`error event: ${JSON.stringify(e).slice(0, 300)}`);
    if (TERMINAL.has(e.type)) final = e.response;
  };
  const onEnd = () => {
    if (!final) throw new Error("stream ended without response.completed");
    turn.status = final.status;
    turn.id = final.id;
    turn.inputTokens = final.usage?.input_tokens;
    turn.cachedTokens = final.usage?.input_tokens_details?.cached_tokens;
    turn.outputTokens = final.usage?.output_tokens;
    const cut = final.status === "incomplete" && final.incomplete_details?.reason === "max_output_tokens";
    if (final.status !== "completed" && !cut)
      throw new Error(`response ${final.status}: ${JSON.stringify(final.error ?? final.incomplete_details)}`);
  };
  const res = await timedSse(
    `${sys.url}/v1/responses`,
    { authorization: "Bearer unused" },
    body,
    turn,
    timeoutS,
    onEvent,
    onEnd,
  );
  turn.continued = res?.headers.get("x-superfluid-continued") ?? undefined;
  const output: Item[] = Array.isArray(final?.output) ? final.output : [];
  turn.items = output.map((i) => String(i.type));
  return output;
}

const newTurn = (sys: Server, round: number, n: number): Turn => ({
  system: sys.label,
  round,
  turn: n,
  ok: false,
  totalMs: 0,
  items: [],
});

/** One arm's conversation: its history grows with what its server returns. */
class Conversation {
  /** The whole history (the resending arms): input items, then output items as returned. */
  history: Item[] = [];
  /** What goes before the next user message: the outputs of the calls the last reply made. */
  pending: Item[] = [];
  previousId?: string;
  constructor(
    readonly sys: Server,
    readonly round: number,
    readonly chained: boolean,
  ) {}

  async turn(n: number): Promise<Turn> {
    const input = [
      ...this.pending,
      { type: "message", role: "user", content: [{ type: "input_text", text: stepText(n) }] },
    ];
    this.pending = [];
    const body = {
      model: this.sys.model,
      instructions: INSTRUCTIONS,
      tools: TOOLS,
      tool_choice: forceTools && n % forceTools === 0 ? "required" : "auto",
      max_output_tokens: maxTokens,
      temperature: 0,
      stream: true,
      ...(this.chained
        ? { store: true, ...(this.previousId ? { previous_response_id: this.previousId } : {}), input }
        : { store: false, input: [...this.history, ...input] }),
    };
    const turn = newTurn(this.sys, this.round, n);
    const cpu0 = groupCpuMs(this.sys);
    const output = await stream(this.sys, body, turn);
    // The reply's after-work (storing it, the session log) counts too.
    await Bun.sleep(setup.gapMs);
    const cpu1 = groupCpuMs(this.sys);
    if (cpu0 !== undefined && cpu1 !== undefined) turn.cpuMs = cpu1 - cpu0;
    // A failed turn leaves the conversation where it was (the next turn continues the last stored
    // response), its call outputs still to send.
    if (!turn.ok) this.pending = input.slice(0, -1);
    else {
      this.previousId = turn.id;
      this.history.push(...input, ...output);
      for (const call of output.filter((i) => i.type === "function_call")) {
        this.pending.push({
          type: "function_call_output",
          call_id: call.call_id,
          output: `output of ${call.name} at step ${n}`,
        });
      }
    }
    return turn;
  }
}

// ---------------------------------------------------------------- the run

const startedAt = new Date().toISOString();
const lib = libraryNote(setup);
console.error(
  `responses-turns: ${modelPath}, ${rounds} rounds x ${turns} turns, max_output_tokens ${maxTokens}, ${lanes} lane(s) x ${ctx} tokens, ${threads} thread(s); superfluid on ${lib}`,
);

const CHAINED = "sf-chained";
const RESENT = "sf-resent";
const LLAMA = "llama";

const arm = (label: string, chained: boolean, start: (round: number) => Promise<Server>): Arm<Turn> => ({
  label,
  start,
  warmUp: async (s, round) => {
    const input = [{ type: "message", role: "user", content: [{ type: "input_text", text: "Warm up." }] }];
    const body = {
      model: s.model,
      instructions: "Warm-up request.",
      tools: TOOLS,
      max_output_tokens: 8,
      temperature: 0,
      stream: true,
      store: false,
      input,
    };
    const turn = newTurn(s, round, 0);
    await stream(s, body, turn);
    return turn;
  },
  conversation: (s, round) => new Conversation(s, round, chained),
});
const arms = [
  arm(CHAINED, true, (round) => startSuperfluid(setup, CHAINED, `sessions-${round}-chained`)),
  arm(RESENT, false, (round) => startSuperfluid(setup, RESENT, `sessions-${round}-resent`)),
];
if (haveLlama) arms.push(arm(LLAMA, false, () => startLlama(setup, LLAMA)));

const results = await runRounds(setup, arms, (t) => {
  const use = `in ${t.inputTokens ?? "-"} cached ${t.cachedTokens ?? "-"} out ${t.outputTokens ?? "-"}`;
  const cpu = t.cpuMs === undefined ? "" : `, cpu ${t.cpuMs.toFixed(1)} ms`;
  return `ttft ${t.ttftMs?.toFixed(1)} ms, total ${t.totalMs.toFixed(1)} ms${cpu}, ${t.status} [${t.items.join(",")}], ${use}${t.continued ? `, ${t.continued}` : ""}`;
});

// ---------------------------------------------------------------- report

const labels = arms.map((a) => a.label);
const { med, counts } = byTurn(results);

console.log(
  `${modelPath.split("/").at(-1)}, ${rounds} rounds (servers fresh each round), ${turns} turns, max_output_tokens ${maxTokens}, temperature 0, ` +
    `${lanes} lane(s) x ${ctx} tokens, ${threads} thread(s); superfluid on ${lib}. ` +
    `TTFT: request start to the first delta event, median of rounds. sf-chained: previous_response_id; sf-resent: whole history, store false; llama: llama-server, whole history.\n`,
);
const ttftCols = labels.map((l) => `${l} TTFT ms`);
const ratioCols = haveLlama ? ["chained/llama", "resent/llama"] : ["chained/resent"];
const totalCols = labels.map((l) => `${l} total ms`);
const useCols = labels.map((l) => `${l} prompt / cached`);
const cpuCol = `server CPU ms ${labels.join(" / ")}`;
console.log(
  tableHead([
    "turn",
    ...ttftCols,
    ...ratioCols,
    ...totalCols,
    cpuCol,
    ...useCols,
    "output tokens",
    "sf-chained continued",
  ]),
);
for (let n = 1; n <= turns; n++) {
  const ttft = labels.map((l) => med(l, n, (t) => t.ttftMs));
  const ratios = haveLlama ? [ratio(ttft[0], ttft[2]), ratio(ttft[1], ttft[2])] : [ratio(ttft[0], ttft[1])];
  const totals = labels.map((l) => f1(med(l, n, (t) => t.totalMs)));
  const cpu = labels.map((l) => f1(med(l, n, (t) => t.cpuMs))).join(" / ");
  const use = labels.map((l) => `${counts(l, n, (t) => t.inputTokens)} / ${counts(l, n, (t) => t.cachedTokens)}`);
  const out = labels.map((l) => counts(l, n, (t) => t.outputTokens)).join(" / ");
  console.log(
    `| ${n} | ${[...ttft.map(f1), ...ratios.map(f2), ...totals, cpu, ...use, out, counts(CHAINED, n, (t) => t.continued)].join(" | ")} |`,
  );
}

const spanRatios: [string, string, string][] = haveLlama
  ? [
      ["ratio chained/llama", CHAINED, LLAMA],
      ["ratio resent/llama", RESENT, LLAMA],
    ]
  : [["ratio chained/resent", CHAINED, RESENT]];
const summary = printSpans(results, labels, turns, spanRatios);

// Total time (to the terminal event) and server CPU too, turns 2..N, the same way.
if (turns > 1) {
  const later = Array.from({ length: turns - 1 }, (_, i) => i + 2);
  const spanMedian = (l: string, pick: (t: Turn) => number | undefined) =>
    median(later.map((n) => med(l, n, pick)).filter((x): x is number => x !== undefined));
  console.log("");
  for (const [name, pick] of [
    ["total ms", (t: Turn) => t.totalMs],
    ["server CPU ms", (t: Turn) => t.cpuMs],
  ] as const) {
    const ms = labels.map((l) => spanMedian(l, pick));
    console.log(
      `${name[0]!.toUpperCase()}${name.slice(1)}, turns 2-${turns} (median of per-turn medians): ${labels.map((l, i) => `${l} ${f1(ms[i])}`).join(", ")}`,
    );
    summary[`${name} 2-${turns}`] = Object.fromEntries(labels.map((l, i) => [l, ms[i]]));
  }
}
const statuses = labels.map(
  (l) =>
    `${l} ${[...new Set(results.filter((t) => t.system === l && t.turn > 0 && t.ok).map((t) => t.status))].join("/")}`,
);
console.log(`Terminal status of the turns: ${statuses.join(", ")}`);

finish(setup, results, summary, { startedAt, arms: labels });
