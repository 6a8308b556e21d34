// Shared by the dialect tests: run a dialect's parser over a reply in any
// chunking and merge its events; the real chat templates (../shared/templates,
// outside the repository: tests skip without it) to detect, render and
// round-trip with.
import { expect } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseGbnf } from "../../../grammar/index.ts";
import { ChatTemplate, type ChatMessage, type ToolDef } from "../../../src/codec/index.ts";
import type { ParserOptions, ToolCallEvent, ToolDialect } from "../../../src/codec/tool-dialects/types.ts";
import { recognizes } from "../../grammar/recognizer.ts";

export interface MergedCall {
  id: string;
  name: string;
  /** The call-args fragments, joined. */
  args: string;
  /** The call-end arguments (undefined when the call never ended). */
  end: string | undefined;
}

export interface Merged {
  text: string;
  reasoning: string;
  calls: MergedCall[];
}

/**
 * The events of one reply merged; checks indexes count up, ids are distinct,
 * nothing follows a call's end, and every call ends with the arguments it streamed.
 */
export function merge(events: ToolCallEvent[]): Merged {
  const m: Merged = { text: "", reasoning: "", calls: [] };
  for (const e of events) {
    if (e.type === "text") m.text += e.text;
    else if (e.type === "reasoning") m.reasoning += e.text;
    else if (e.type === "call-start") {
      expect(e.index).toBe(m.calls.length);
      expect(m.calls.map((c) => c.id)).not.toContain(e.id);
      m.calls.push({ id: e.id, name: e.name, args: "", end: undefined });
    } else if (e.type === "call-args") {
      expect(m.calls[e.index]!.end).toBeUndefined();
      m.calls[e.index]!.args += e.text;
    } else {
      expect(m.calls[e.index]!.end).toBeUndefined();
      m.calls[e.index]!.end = e.arguments;
    }
  }
  for (const c of m.calls) expect(c.args).toBe(c.end!);
  return m;
}

/** The wires with a reasoning channel of their own; every other's reasoning is split out before its parser. */
const REASONING_WIRES = new Set(["gpt-oss"]);

/**
 * Parses `chunks` with a fresh parser (ids id0, id1, … unless the wire writes
 * its own; `newId: undefined` leaves the wire's default ids).
 */
export function run(dialect: ToolDialect, chunks: string[], opts: ParserOptions = {}): Merged {
  let n = 0;
  const parser = dialect.parser({ newId: () => `id${n++}`, ...opts });
  const events: ToolCallEvent[] = [];
  for (const c of chunks) events.push(...parser.push(c));
  events.push(...parser.flush());
  const m = merge(events);
  if (!REASONING_WIRES.has(dialect.name)) expect(m.reasoning).toBe("");
  return m;
}

/** Same result whole, character by character, and split in two at every point (empty ends included). */
export function parseAllWays(dialect: ToolDialect, text: string, opts: ParserOptions = {}): Merged {
  const whole = run(dialect, [text], opts);
  expect(run(dialect, [...text], opts)).toEqual(whole);
  for (let i = 0; i <= text.length; i++) expect(run(dialect, [text.slice(0, i), text.slice(i)], opts)).toEqual(whole);
  return whole;
}

/** Where a reply may be cut at a token boundary: 1 … length, never strictly inside one of `markers`. */
export function cutPoints(reply: string, markers: string[]): number[] {
  const inside = new Set<number>();
  for (const m of markers)
    for (let at = reply.indexOf(m); at >= 0; at = reply.indexOf(m, at + 1))
      for (let k = at + 1; k < at + m.length; k++) inside.add(k);
  return Array.from({ length: reply.length }, (_, k) => k + 1).filter((k) => !inside.has(k));
}

/** [name, arguments] of each call. */
export const callsOf = (m: Merged): [string, string | undefined][] => m.calls.map((c) => [c.name, c.end]);

// --- The real templates -------------------------------------------------

export const TEMPLATES_DIR = join(import.meta.dir, "../../../../shared/templates");
export const haveTemplates = existsSync(TEMPLATES_DIR);

/** Every template's name (file name without `.jinja`). */
export function templateNames(): string[] {
  if (!haveTemplates) return [];
  return readdirSync(TEMPLATES_DIR)
    .filter((f) => f.endsWith(".jinja"))
    .map((f) => f.slice(0, -".jinja".length))
    .sort();
}

export const templateSource = (name: string): string => readFileSync(join(TEMPLATES_DIR, `${name}.jinja`), "utf8");

/** The templates `dialect` detects (no vocabulary: hasToken says no). */
export const detectedBy = (dialect: ToolDialect): string[] =>
  templateNames().filter((name) => dialect.detect(templateSource(name), () => false));

/** A conversation rendered through a real template. */
export function render(
  name: string,
  messages: ChatMessage[],
  tools?: ToolDef[],
  kwargs: Record<string, unknown> = {},
): string {
  const template = new ChatTemplate(templateSource(name), { bosToken: "<BOS>", eosToken: "<EOS>" });
  return template.render({ messages, ...(tools ? { tools } : {}), addGenerationPrompt: false, kwargs }).text;
}

/** Whether GBNF text accepts `text` whole. */
export const grammarAccepts = (gbnf: string, text: string): boolean => recognizes(parseGbnf(gbnf), text);
