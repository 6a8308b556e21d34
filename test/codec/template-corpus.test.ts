// Real chat templates against Python Jinja2's reference renders
// (../shared/templates, outside the repository: its README says how the
// reference was made). Every case the reference rendered must come out byte
// for byte the same, both as given (tool-call arguments as objects, content
// "") and in the form OpenAI clients send (arguments as a JSON string, an
// assistant tool-call turn's content null), which the server turns into the
// former. Cases where the reference itself raised are not compared.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ChatTemplate, type ChatMessage, type ToolDef } from "../../src/codec/template.ts";

const dir = join(import.meta.dir, "../../../shared/templates");
const present = existsSync(join(dir, "expected.json"));

interface Case {
  messages: ChatMessage[];
  tools?: ToolDef[];
  add_generation_prompt: boolean;
  [kwarg: string]: unknown;
}
interface Corpus {
  bos_token: string;
  eos_token: string;
  strftime_now: string;
  cases: Record<string, Case>;
}
type Expected = Record<string, Record<string, { text?: string; error?: string }>>;

/** The conversation as an OpenAI client sends it. */
function openAiForm(messages: ChatMessage[]): ChatMessage[] {
  return messages.map((m) => {
    if (!m.tool_calls) return m;
    return {
      ...m,
      content: m.content === "" ? null : m.content,
      tool_calls: m.tool_calls.map((c) => ({
        ...c,
        function: { ...c.function, arguments: JSON.stringify(c.function.arguments) },
      })),
    };
  });
}

describe.skipIf(!present)("real chat templates render as Python Jinja2 does", () => {
  const corpus: Corpus = present ? JSON.parse(readFileSync(join(dir, "cases.json"), "utf8")) : { cases: {} };
  const expected: Expected = present ? JSON.parse(readFileSync(join(dir, "expected.json"), "utf8")) : {};
  // The reference's fixed time, read as local time as strftime_now reads it.
  const loadedAt = new Date(corpus.strftime_now);
  const names = present
    ? readdirSync(dir)
        .filter((f) => f.endsWith(".jinja"))
        .map((f) => f.slice(0, -".jinja".length))
        .sort()
    : [];
  let compared = 0;

  for (const name of names) {
    test(name, () => {
      const template = new ChatTemplate(readFileSync(join(dir, `${name}.jinja`), "utf8"), {
        bosToken: corpus.bos_token,
        eosToken: corpus.eos_token,
        loadedAt,
      });
      const mismatches: string[] = [];
      for (const [caseName, reference] of Object.entries(expected[name] ?? {})) {
        if (reference.text === undefined) continue;
        const { messages, tools, add_generation_prompt, ...kwargs } = corpus.cases[caseName]!;
        for (const [form, msgs] of [
          ["as given", messages],
          ["OpenAI form", openAiForm(messages)],
        ] as const) {
          let text: string;
          try {
            text = template.render({ messages: msgs, tools, addGenerationPrompt: add_generation_prompt, kwargs }).text;
          } catch (err) {
            text = `<threw: ${(err as Error).message}>`;
          }
          if (text !== reference.text) mismatches.push(`${caseName} (${form}): ${JSON.stringify(text).slice(0, 300)}`);
        }
        compared++;
      }
      expect(mismatches).toEqual([]);
    });
  }

  test("every reference render was compared", () => {
    const total = Object.values(expected).reduce(
      (n, rows) => n + Object.values(rows).filter((r) => r.text !== undefined).length,
      0,
    );
    console.log(`template corpus: ${compared} of ${total} reference renders compared, as given and in OpenAI form`);
    expect(total).toBeGreaterThan(0);
    expect(compared).toBe(total);
  });
});
