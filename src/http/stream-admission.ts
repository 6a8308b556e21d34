// When a streamed generation's headers go out: once it has a lane (so
// x-superfluid-warm carries the exact reused-prefix count), once it failed
// (then the reply is a plain error with its own status, not an error frame),
// or after a second in the queue, whichever comes first. Every family's
// streaming chat route starts its stream through this.
import type { ChoiceDelta, ChoiceEnd } from "../pipeline/choice-stream.ts";

/** How long a stream's headers wait for admission. */
const HEADER_WAIT_MS = 1000;

export interface StartedStream {
  /** The choice's deltas; its first step is `first`. */
  stream: AsyncGenerator<ChoiceDelta, ChoiceEnd>;
  first: Promise<IteratorResult<ChoiceDelta, ChoiceEnd>>;
  /** Prompt tokens found in the cache at admission; undefined until admitted. */
  readonly cachedAtAdmission: number | undefined;
  /** The headers to send: x-superfluid-warm when admitted in time. */
  headers: Record<string, string>;
}

/**
 * Opens the choice's stream (`open` gets the admission callback) and waits
 * as above. Throws what the generation failed with when it failed first.
 */
export async function startStream(
  open: (onAdmitted: (cachedTokens: number) => void) => AsyncGenerator<ChoiceDelta, ChoiceEnd>,
): Promise<StartedStream> {
  let cachedAtAdmission: number | undefined;
  let onAdmit!: () => void;
  const admitted = new Promise<void>((resolve) => (onAdmit = resolve));
  const stream = open((cached) => {
    cachedAtAdmission = cached;
    onAdmit();
  });
  const first = stream.next();
  let failedEarly: unknown;
  let waited: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    admitted,
    first.then(
      () => undefined,
      (err) => void (failedEarly = err ?? new Error("failed")),
    ),
    new Promise<void>((resolve) => (waited = setTimeout(resolve, HEADER_WAIT_MS))),
  ]);
  clearTimeout(waited);
  if (failedEarly) throw failedEarly;
  const headers: Record<string, string> =
    cachedAtAdmission === undefined ? {} : { "x-superfluid-warm": String(cachedAtAdmission) };
  return {
    stream,
    first,
    get cachedAtAdmission() {
      return cachedAtAdmission;
    },
    headers,
  };
}
