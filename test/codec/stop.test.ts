// Stop strings across token boundaries.
import { describe, expect, test } from "bun:test";
import { StopMatcher } from "../../src/codec/stop.ts";

/** Feeds chunks, returning everything emitted (including the final flush) and whether it stopped. */
function run(stops: string[], chunks: string[]): { text: string; stopped: boolean; emits: string[] } {
  const m = new StopMatcher(stops);
  const emits: string[] = [];
  let stopped = false;
  for (const c of chunks) {
    const r = m.push(c);
    emits.push(r.emit);
    if (r.stopped) {
      stopped = true;
      break;
    }
  }
  if (!stopped) emits.push(m.flush());
  return { text: emits.join(""), stopped, emits };
}

describe("StopMatcher", () => {
  test("an empty stop list passes text straight through", () => {
    const m = new StopMatcher([]);
    expect(m.push("abc")).toEqual({ emit: "abc", stopped: false });
    expect(m.flush()).toBe("");
    expect(new StopMatcher([""]).push("x")).toEqual({ emit: "x", stopped: false });
  });

  test("matches within one chunk, dropping the match and what follows", () => {
    const m = new StopMatcher(["END"]);
    expect(m.push("hello END and more")).toEqual({ emit: "hello ", stopped: true, match: "END" });
    expect(m.push("later")).toEqual({ emit: "", stopped: true });
    expect(m.flush()).toBe("");
  });

  test("matches across token boundaries, holding back only what could still match", () => {
    const m = new StopMatcher(["</answer>"]);
    expect(m.push("The answer is 4</")).toEqual({ emit: "The answer is 4", stopped: false });
    expect(m.push("ans")).toEqual({ emit: "", stopped: false });
    expect(m.push("wer> trailing")).toEqual({ emit: "", stopped: true, match: "</answer>" });
  });

  test("releases a held tail as soon as it cannot become a stop string", () => {
    const m = new StopMatcher(["STOP"]);
    expect(m.push("go ST")).toEqual({ emit: "go ", stopped: false });
    expect(m.push("A")).toEqual({ emit: "STA", stopped: false });
    expect(m.push("S")).toEqual({ emit: "", stopped: false });
    expect(m.push("T")).toEqual({ emit: "", stopped: false });
    expect(m.push("ARS")).toEqual({ emit: "STAR", stopped: false });
    expect(m.flush()).toBe("S");
  });

  test("a held tail is released at the end of generation", () => {
    expect(run(["\n\nUser:"], ["Hi", "\n\nUs"])).toEqual({
      text: "Hi\n\nUs",
      stopped: false,
      emits: ["Hi", "", "\n\nUs"],
    });
  });

  test("holds the longest tail that could start any stop string", () => {
    const m = new StopMatcher(["abc", "bcd", "cde"]);
    expect(m.push("xab")).toEqual({ emit: "x", stopped: false });
    expect(m.push("c")).toEqual({ emit: "", stopped: true, match: "abc" });
  });

  test("overlapping stop strings: the first one completed wins, however the text is chunked", () => {
    for (const chunks of [["abcd"], ["a", "b", "c", "d"], ["ab", "cd"], ["abc", "d"]]) {
      expect(run(["abcd", "bc"], chunks)).toMatchObject({ text: "a", stopped: true });
    }
    // Completed at the same place: the longer (earlier-starting) match is cut.
    expect(run(["xyz", "yz"], ["wxyz"])).toMatchObject({ text: "w", stopped: true });
  });

  test("a stop string that is a prefix of a longer one stops at the shorter", () => {
    expect(run(["<|end|>", "<|end"], ["ok<|e", "nd|>"])).toMatchObject({ text: "ok", stopped: true });
  });

  test("every chunking of a text gives the same result", () => {
    const text = "one two</s>three";
    const stops = ["</s>", "two<", "wo</x"];
    const expected = run(stops, [text]);
    expect(expected).toMatchObject({ text: "one ", stopped: true });
    // All ways to cut the text into two or three chunks.
    for (let i = 1; i < text.length; i++) {
      for (let j = i; j < text.length; j++) {
        const chunks = [text.slice(0, i), text.slice(i, j), text.slice(j)].filter((c) => c !== "");
        expect(run(stops, chunks)).toMatchObject({ text: expected.text, stopped: true });
      }
    }
  });

  test("multi-character code points and repeated prefixes", () => {
    expect(run(["😀!"], ["a😀", "b😀", "!c"])).toMatchObject({ text: "a😀b", stopped: true });
    expect(run(["aab"], ["a", "a", "a", "a", "b"])).toMatchObject({ text: "aa", stopped: true });
  });
});
