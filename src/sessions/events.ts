// Session log records (docs/design.md#session-records). Each line of <sessions>/wal.log holds one
// SessionEvent as JSON. Only the record kinds written today are typed here; the log
// reader accepts any body object, so kinds added later (Forked, Message, ToolUse, ...)
// replay without a format change.

export type EventBody =
  | { Created: { parent: number | null; params: Record<string, unknown> } }
  | { Appended: { text: string; span: number[] } }
  | { Generated: { span: number[]; text: string; finish: number } } // finish: see FINISH
  | { EpochBump: Record<string, never> };

export interface SessionEvent {
  /** Session id; 0 holds store-wide records (EpochBump). Sessions count from 1. */
  session: number;
  /** Counts from 0 (= Created) within a session. */
  event_id: number;
  epoch: number;
  ts_unix_ms: number;
  body: EventBody;
}

/** `Generated.finish` codes: 0 while the turn is still open. */
export const FINISH = { open: 0, endOfTurn: 1, maxTokens: 2, grammar: 3, cancelled: 4, error: 5 } as const;
export type FinishCode = (typeof FINISH)[keyof typeof FINISH];
