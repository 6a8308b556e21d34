// Multi-turn agent sessions for the scale-out test: each session keeps its
// own chat history over a long system prompt shared by all of them, sends its
// session key on every turn, and appends each reply to its history, as an
// agent loop does. Every turn records which replica served it, how much of
// its prompt came from that replica's cache, and its first-token time.
import { REPLICA_HEADER, SESSION_KEY_HEADER } from "../../src/http/replica.ts";
import { type Message, postChat, prose, streamChat } from "../scenarios/support.ts";

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

type Usage = { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } };

async function sendTurn(
  plan: SessionPlan,
  key: string,
  messages: Message[],
): Promise<Omit<Turn, "key" | "session" | "turn"> & { reply: string }> {
  const body = { model: plan.model, messages, max_tokens: plan.maxTokens, temperature: 0 };
  const headers = { [SESSION_KEY_HEADER]: key };
  const counts = (usage: Usage | undefined) => ({
    prompt: usage?.prompt_tokens ?? 0,
    cached: usage?.prompt_tokens_details?.cached_tokens ?? 0,
  });
  if (!plan.stream) {
    const r = await postChat(plan.url, body, headers);
    const replica = r.headers.get(REPLICA_HEADER) ?? "?";
    if (r.status !== 200)
      return { status: r.status, replica, ...counts(undefined), reply: "", error: JSON.stringify(r.json) };
    return { status: 200, replica, ...counts(r.json.usage), reply: r.json.choices[0].message.content ?? "" };
  }
  const r = await streamChat(plan.url, { ...body, stream_options: { include_usage: true } }, undefined, headers);
  const replica = r.headers.get(REPLICA_HEADER) ?? "?";
  if (r.status !== 200) return { status: r.status, replica, ...counts(undefined), reply: "", error: r.error ?? "" };
  const usage = r.sse.events.findLast((e: { usage?: Usage }) => e?.usage)?.usage as Usage | undefined;
  return {
    status: 200,
    replica,
    ...counts(usage),
    ...(r.firstTokenMs === undefined ? {} : { ttftMs: r.firstTokenMs }),
    reply: r.content,
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
