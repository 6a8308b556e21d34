import type { ServedModel } from "../daemon/served-model.ts";
import { renderChatPrompt, rendersTools, type ChatJob, type PrefixBreakpoint, type PrefixPin } from "./chat-job.ts";
import { commonPrefix } from "../engine/token-prefix.ts";
import { contentKey, Lru } from "./lru.ts";
import { RequestError } from "../daemon/request-error.ts";

/**
 * Renders of cut requests, per model, by a hash of what they render: an
 * agent sends the same system prompt and tools every turn, so the cut at a
 * breakpoint in them is rendered once, not on every turn (a render of a
 * 24k-token prompt takes tens of milliseconds). Least recently used first out.
 */
const cutRenders = new WeakMap<ServedModel, Lru<number[]>>();

async function cached(model: ServedModel, key: string, render: () => Promise<number[]>): Promise<number[]> {
  let renders = cutRenders.get(model);
  if (!renders) cutRenders.set(model, (renders = new Lru(64)));
  const hit = renders.get(key);
  if (hit) return hit;
  const tokens = await render();
  renders.set(key, tokens);
  return tokens;
}

/**
 * The cut request's tokens. A template that refuses a conversation without a
 * user turn (a breakpoint in the system prompt) gets an empty one after the
 * cut, which only adds tokens past it.
 */
function renderCut(model: ServedModel, job: ChatJob, bp: PrefixBreakpoint): Promise<number[]> {
  const cut: ChatJob = { ...job, messages: bp.messages, tools: bp.tools };
  const withTools = rendersTools(job);
  const key = contentKey([
    bp.messages,
    withTools ? bp.tools.map((t) => [t.template, t.unlisted === true]) : [],
    job.templateKwargs,
  ]);
  return cached(model, key, async () => {
    try {
      return (await renderChatPrompt(model, cut, withTools, false)).tokens;
    } catch (err) {
      if (!(err instanceof RequestError)) throw err;
      const padded: ChatJob = { ...cut, messages: [...bp.messages, { role: "user", content: "" }] };
      return (await renderChatPrompt(model, padded, withTools, false).catch(() => ({ tokens: [] as number[] }))).tokens;
    }
  });
}

/**
 * The tokens the template adds after a finished conversation to open the
 * reply (its generation prompt), learned from a one-message probe with the
 * job's template variables; undefined when the probe's render without it is
 * not a prefix of the render with it.
 */
async function generationPrompt(model: ServedModel, job: ChatJob): Promise<number[] | undefined> {
  const probe: ChatJob = { ...job, messages: [{ role: "user", content: "?" }], tools: [] };
  const key = contentKey(["generation prompt", job.templateKwargs]);
  const [open, closed] = await Promise.all([
    cached(model, `${key}+`, async () => (await renderChatPrompt(model, probe, false, true)).tokens),
    cached(model, `${key}-`, async () => (await renderChatPrompt(model, probe, false, false)).tokens),
  ]).catch(() => [[], [1]]);
  return commonPrefix(open, closed) === closed.length ? open.slice(closed.length) : undefined;
}

/**
 * How far a breakpoint's pin reaches into the prompt. On the last block it
 * is the whole prompt but its generation prompt, when the prompt ends in it
 * (the usual case: an agent's breakpoint moves to its newest block every
 * turn, so this saves a render of the whole conversation per turn);
 * elsewhere it is what the cut request's render shares with the prompt.
 */
async function pinLength(model: ServedModel, job: ChatJob, prompt: number[], bp: PrefixBreakpoint): Promise<number> {
  if (bp.last) {
    const opener = await generationPrompt(model, job);
    if (
      opener &&
      opener.length < prompt.length &&
      commonPrefix(opener, prompt.slice(prompt.length - opener.length)) === opener.length
    ) {
      return prompt.length - opener.length;
    }
  }
  return commonPrefix(await renderCut(model, job, bp), prompt);
}

/** The pins a request's breakpoints make, in breakpoint order; a breakpoint that covers no token pins nothing. */
export async function breakpointPins(
  model: ServedModel,
  job: ChatJob,
  prompt: number[],
  breakpoints: PrefixBreakpoint[],
): Promise<PrefixPin[]> {
  const lengths = await Promise.all(breakpoints.map((bp) => pinLength(model, job, prompt, bp)));
  return breakpoints.flatMap((bp, i) => (lengths[i]! > 0 ? [{ length: lengths[i]!, ttlMs: bp.ttlMs }] : []));
}
