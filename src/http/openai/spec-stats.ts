// `superfluid.spec` on OpenAI replies (docs/api/openai.md#the-superfluid-reply-extension):
// speculative decoding's draft tokens proposed and accepted over a reply's
// choices, present only when one of them drafted.
import type { SpecTally } from "../../engine/jobs.ts";

export interface SpecStats {
  proposed: number;
  accepted: number;
  /** accepted / proposed, to 3 decimals. */
  acceptance_rate: number;
}

/** `{spec}` to spread into a reply's `superfluid` object, or `{}` when no choice drafted. */
export function specField(ends: readonly { spec?: SpecTally }[]): { spec?: SpecStats } {
  let proposed = 0;
  let accepted = 0;
  for (const end of ends) {
    if (!end?.spec) continue;
    proposed += end.spec.proposed;
    accepted += end.spec.accepted;
  }
  if (proposed === 0) return {};
  return { spec: { proposed, accepted, acceptance_rate: Math.round((accepted / proposed) * 1000) / 1000 } };
}
