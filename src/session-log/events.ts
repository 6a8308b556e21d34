// Session log records (docs/design.md#session-records, docs/api/sessions.md#events). Each
// line of <sessions>/wal.log holds one SessionEvent as JSON. HTTP generations
// write Created, Appended and Generated; the session API writes the rest. The
// log reader accepts any body object, so kinds added later replay without a
// format change.

/** Sampling of a session (docs/api/sessions.md#params): all five fields, nothing filled in from model defaults. */
export interface SessionParams {
  temperature: number;
  top_p: number;
  min_p: number;
  top_k: number;
  seed: number;
}

/** One edit of a Rebase: half-open event ranges, sorted, never event 0. */
export type RebaseEdit =
  | { Drop: { from: number; to: number } }
  | { Replace: { from: number; to: number; role: number; text: string } };

export type EventBody =
  | { Created: { parent: number | null; params: Record<string, unknown> } }
  | { Forked: { parent: number; fork_at: number; params: Record<string, unknown> } }
  | { Rebased: { parent: number; fork_at: number; params: Record<string, unknown>; edits: RebaseEdit[] } }
  /** role: 0 system, 1 user, 2 assistant, 3 tool; a system message may declare tools (JSON strings). */
  | { Message: { role: number; text: string; span: number[]; tools?: string[] } }
  | { GenerationPrompt: { span: number[] } }
  | { Appended: { text: string; span: number[] } }
  | { Generated: { span: number[]; text: string; finish: number; channel?: number } } // finish: see FINISH
  | { ToolUse: { name: string; arguments: string } }
  /** A call the model wrote whose arguments are not a JSON object: shown, never answered. */
  | { ToolParseFailure: { name: string; text: string } }
  /** outcome: absent for a result, 1 failed, 2 cancelled (AppendToolOutcome). */
  | { ToolResult: { call_id: number; content: string; span: number[]; outcome?: number } }
  | { QosSet: { class: number } }
  | { EpochBump: Record<string, never> }
  // Store-wide records (session 0):
  | { SessionMeta: { session: number; version: number; title: string | null; archived: boolean } }
  | { Purged: { sessions: number[]; mode: "Cascade" | "Reroot" } };

export interface SessionEvent {
  /** Session id; 0 holds store-wide records (EpochBump, SessionMeta, Purged). Sessions count from 1. */
  session: number;
  /** Counts from 0 (= Created) within a session; a fork's own records continue its parent's ids. */
  event_id: number;
  epoch: number;
  ts_unix_ms: number;
  body: EventBody;
}

/** `Generated.finish` codes: 0 while the turn is still open. */
export const FINISH = { open: 0, endOfTurn: 1, maxTokens: 2, grammar: 3, cancelled: 4, error: 5 } as const;
export type FinishCode = (typeof FINISH)[keyof typeof FINISH];

/** `Generated.channel` codes. */
export const CHANNEL = { text: 0, reasoning: 1, toolCall: 2 } as const;
