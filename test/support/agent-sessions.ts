// Multi-turn agent sessions for the scale-out test: each session keeps its
// own chat history over a long system prompt shared by all of them, sends its
// session key on every turn, and appends each reply to its history, as an
// agent loop does. Every turn records which replica served it, how much of
// its prompt came from that replica's cache, and its first-token time.
import { uniform } from "../../src/fixtures/prng.ts";
import { COMMON_WORDS } from "../../src/fixtures/words.ts";
import { REPLICA_HEADER, SESSION_KEY_HEADER } from "../../src/http/replica.ts";

export interface Turn {
  /** The session's x-superfluid-session-key (unique across runs). */
  key: string;
  session: number;
  turn: number;
  status: number;
  replica: string;
  prompt: number;
  cached: number;
  /** ms from sending the request to the first text of the reply (streams only). */
  ttftMs?: number;
  error?: string;
}

/** `n` words of plain prose from the fixture vocabulary (about one token each), the same for the same seed. */
export function prose(seed: number, n: number): string {
  const next = uniform(seed);
  return Array.from({ length: n }, () => COMMON_WORDS[Math.floor(next() * COMMON_WORDS.length)]!).join(" ");
}

export interface SessionPlan {
  /** The router's base URL. */
  url: string;
  model: string;
  /** Distinguishes one run's prompts from another's, so no run finds another's prefixes cached. */
  run: string;
  sessions: number;
  turns: number;
  systemWords: number;
  userWords: number;
  maxTokens: number;
  stream: boolean;
  /** Called after each turn (all sessions' turns interleave): a test acts on progress, e.g. kills a replica. */
  onTurn?: (t: Turn, done: Turn[]) => void | Promise<void>;
}

type Message = { role: "system" | "user" | "assistant"; content: string };

async function sendTurn(
  plan: SessionPlan,
  key: string,
  messages: Message[],
): Promise<Omit<Turn, "key" | "session" | "turn"> & { reply: string }> {
  const started = performance.now();
  const res = await fetch(`${plan.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", [SESSION_KEY_HEADER]: key },
    body: JSON.stringify({
      model: plan.model,
      messages,
      max_tokens: plan.maxTokens,
      temperature: 0,
      ...(plan.stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
  });
  const replica = res.headers.get(REPLICA_HEADER) ?? "?";
  if (res.status !== 200)
    return { status: res.status, replica, prompt: 0, cached: 0, reply: "", error: await res.text() };
  if (!plan.stream) {
    const body = (await res.json()) as {
      choices: { message: { content: string } }[];
      usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } };
    };
    return {
      status: 200,
      replica,
      prompt: body.usage.prompt_tokens,
      cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0,
      reply: body.choices[0]!.message.content ?? "",
    };
  }
  let ttftMs: number | undefined;
  let reply = "";
  let usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | undefined;
  let buffer = "";
  for await (const chunk of res.body!.pipeThrough(new TextDecoderStream())) {
    buffer += chunk;
    const events = buffer.split("\n\n");
    buffer = events.pop()!;
    for (const event of events) {
      const data = event.replace(/^data: /, "");
      if (!data.startsWith("{")) continue;
      const json = JSON.parse(data) as {
        choices: { delta?: { content?: string } }[];
        usage?: typeof usage;
      };
      const content = json.choices[0]?.delta?.content;
      // The first delta (the role, at admission) has empty content: the first token is the first text.
      if (content) {
        ttftMs ??= performance.now() - started;
        reply += content;
      }
      if (json.usage) usage = json.usage;
    }
  }
  return {
    status: 200,
    replica,
    prompt: usage?.prompt_tokens ?? 0,
    cached: usage?.prompt_tokens_details?.cached_tokens ?? 0,
    ...(ttftMs === undefined ? {} : { ttftMs }),
    reply,
  };
}

/** Runs every session's turns, the sessions concurrently and each one's turns in order; returns every turn. */
export async function runSessions(plan: SessionPlan): Promise<Turn[]> {
  const system = `${plan.run}: ${prose(7, plan.systemWords)}`;
  const done: Turn[] = [];
  await Promise.all(
    Array.from({ length: plan.sessions }, async (_, session) => {
      const key = `${plan.run}-agent-${session}`;
      const messages: Message[] = [{ role: "system", content: system }];
      for (let turn = 0; turn < plan.turns; turn++) {
        messages.push({ role: "user", content: prose(1000 * session + turn + 11, plan.userWords) });
        const { reply, ...result } = await sendTurn(plan, key, messages);
        const t: Turn = { key, session, turn, ...result };
        done.push(t);
        await plan.onTurn?.(t, done);
        if (t.status !== 200) return;
        messages.push({ role: "assistant", content: reply });
      }
    }),
  );
  return done;
}

/** The share of prompt tokens served from a replica's cache. */
export function cacheShare(turns: Turn[]): number {
  const prompt = turns.reduce((a, t) => a + t.prompt, 0);
  return prompt === 0 ? 0 : turns.reduce((a, t) => a + t.cached, 0) / prompt;
}

/** The q-quantile (0-1) of `values`, nearest rank. */
export function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}
