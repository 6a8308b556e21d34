// Stop strings, matched across token boundaries.
//
// Generation ends at the first stop string to be completed; the match and
// anything after it are dropped. "First completed" (not "leftmost") makes the
// result independent of how the text was chunked: with stops ["abcd", "bc"],
// "bc" ends first whether "abcd" arrives in one piece or four. While
// streaming, the longest tail that could still grow into a stop string is
// held back, and released as soon as it cannot.
import { partialSuffixLength } from "./holdback.ts";

export interface StopResult {
  /** Text now safe to pass on. */
  emit: string;
  /** A stop string was matched: generation should end (later pushes emit nothing). */
  stopped: boolean;
  /** The stop string matched, when stopped. */
  match?: string;
}

export class StopMatcher {
  private readonly stops: string[];
  private held = "";
  private done = false;

  constructor(stops: string[]) {
    // An empty stop string would match before any text; ignore it.
    this.stops = [...new Set(stops.filter((s) => s.length > 0))];
  }

  get stopped(): boolean {
    return this.done;
  }

  push(text: string): StopResult {
    if (this.done) return { emit: "", stopped: true };
    if (this.stops.length === 0) return { emit: text, stopped: false };
    const buffer = this.held + text;

    let best: { start: number; end: number; stop: string } | undefined;
    for (const stop of this.stops) {
      const start = buffer.indexOf(stop);
      if (start < 0) continue;
      const end = start + stop.length;
      if (!best || end < best.end || (end === best.end && start < best.start)) best = { start, end, stop };
    }
    if (best) {
      this.done = true;
      this.held = "";
      return { emit: buffer.slice(0, best.start), stopped: true, match: best.stop };
    }

    const keep = partialSuffixLength(buffer, this.stops);
    this.held = buffer.slice(buffer.length - keep);
    return { emit: buffer.slice(0, buffer.length - keep), stopped: false };
  }

  /** The held-back tail, when generation ended without a stop string. */
  flush(): string {
    const rest = this.done ? "" : this.held;
    this.held = "";
    return rest;
  }
}
