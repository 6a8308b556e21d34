// Which wire a template gets: the most specific markers win, the generic JSON
// fallback only when no known marker shows.
import { describe, expect, test } from "bun:test";
import { detectToolDialect } from "../../../src/codec/tool-dialects/index.ts";

const none = () => false;

describe("tool dialect detection", () => {
  test("each family's markers pick its parser", () => {
    expect(detectToolDialect("{{ '<tool_call>' }}{{ tool_call | tojson }}{{ '</tool_call>' }} tools", none)?.name).toBe(
      "hermes",
    );
    expect(detectToolDialect("{{ '[TOOL_CALLS]' }} tools", none)?.name).toBe("mistral");
    expect(detectToolDialect("{{ '<｜tool▁calls▁begin｜>' }} tools", none)?.name).toBe("deepseek");
    expect(
      detectToolDialect("<|start_header_id|>ipython<|end_header_id|> {{ '<|python_tag|>' }} tools", none)?.name,
    ).toBe("llama3");
    expect(
      detectToolDialect("<|start|>assistant<|channel|>final<|message|>{{ m.content }}<|end|> tools", none),
    ).toMatchObject({ name: "gpt-oss", alwaysParse: true });
    expect(detectToolDialect("{% if tools %}{{ tools | tojson }}{% endif %}", none)?.name).toBe("generic-json");
  });

  test("a template with no tools has no tool wire", () => {
    expect(detectToolDialect("{% for m in messages %}{{ m.content }}{% endfor %}", none)).toBeUndefined();
  });
});
