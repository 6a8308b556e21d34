// Chat template rendering: the fixture's ChatML template, the Hugging Face
// helpers, kwargs, and how content is told apart from scaffolding.
import { describe, expect, test } from "bun:test";
import { CHATML_TOOLS_TEMPLATE } from "../../src/fixtures/chat-template.ts";
import {
  ChatTemplate,
  TemplateError,
  templateReads,
  type ChatMessage,
  type RenderedPrompt,
} from "../../src/codec/template.ts";
import { strftime } from "../../src/codec/strftime.ts";

const chatml = new ChatTemplate(CHATML_TOOLS_TEMPLATE, { bosToken: "<s>", eosToken: "<|im_end|>" });

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

const conversation: ChatMessage[] = [
  { role: "system", content: "You are terse." },
  {
    role: "user",
    content: [
      { type: "text", text: "Weather in Paris?" },
      { type: "text", text: "And Rome." },
    ],
  },
  {
    role: "assistant",
    content: null,
    reasoning_content: "Two cities.",
    tool_calls: [
      { id: "a", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } },
      { id: "b", type: "function", function: { name: "get_weather", arguments: { city: "Rome" } } },
    ],
  },
  { role: "tool", tool_call_id: "a", content: "18C" },
  { role: "tool", tool_call_id: "b", content: "24C" },
];

const untrusted = (r: RenderedPrompt) => r.segments.filter((s) => !s.trusted).map((s) => s.text);
const joined = (r: RenderedPrompt) => r.segments.map((s) => s.text).join("");

describe("ChatTemplate with the fixture's ChatML template", () => {
  test("renders a conversation with tools, tool calls and tool results", () => {
    const r = chatml.render({ messages: conversation, tools: [weatherTool] });
    expect(r.text).toBe(
      "<|im_start|>system\nYou are terse.\n\n# Tools\n\nYou may call the functions below. Each one is described as JSON on its own line:\n<tools>\n" +
        '{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}' +
        '\n</tools>\n\nTo call a function, reply with <tool_call>{"name": <function name>, "arguments": <arguments object>}</tool_call>, one per call.<|im_end|>\n' +
        "<|im_start|>user\nWeather in Paris?\nAnd Rome.<|im_end|>\n" +
        "<|im_start|>assistant\n<think>\nTwo cities.\n</think>\n\n" +
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n' +
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call><|im_end|>\n' +
        "<|im_start|>tool\n<tool_response>\n18C\n</tool_response><|im_end|>\n" +
        "<|im_start|>tool\n<tool_response>\n24C\n</tool_response><|im_end|>\n" +
        "<|im_start|>assistant\n",
    );
    expect(r.isolated).toBe(true);
    expect(joined(r)).toBe(r.text);
    // System, user and tool content is untrusted; assistant turns are scaffolding.
    expect(untrusted(r)).toEqual(["You are terse.", "Weather in Paris?\nAnd Rome.", "18C", "24C"]);
  });

  test("enable_thinking false closes an empty think block; true or unset leaves the prompt open", () => {
    const messages: ChatMessage[] = [{ role: "user", content: "hi" }];
    expect(chatml.render({ messages, kwargs: { enable_thinking: false } }).text).toEndWith(
      "<|im_start|>assistant\n<think>\n\n</think>\n\n",
    );
    expect(chatml.render({ messages, kwargs: { enable_thinking: true } }).text).toEndWith("<|im_start|>assistant\n");
    expect(chatml.render({ messages }).text).toEndWith("<|im_start|>assistant\n");
  });

  test("addGenerationPrompt false ends after the last message", () => {
    const r = chatml.render({ messages: [{ role: "user", content: "hi" }], addGenerationPrompt: false });
    expect(r.text).toBe("<|im_start|>user\nhi<|im_end|>\n");
  });

  test("an empty tools list renders like no tools", () => {
    const messages: ChatMessage[] = [{ role: "user", content: "hi" }];
    expect(chatml.render({ messages, tools: [] }).text).toBe(chatml.render({ messages }).text);
  });

  test("reads() reports the kwargs the template understands", () => {
    expect(chatml.reads("enable_thinking")).toBe(true);
    expect(chatml.reads("reasoning_effort")).toBe(false);
    expect(chatml.reads("tools")).toBe(true);
  });
});

describe("Hugging Face helpers", () => {
  test("raise_exception throws a TemplateError carrying the template's message", () => {
    const t = new ChatTemplate(
      "{%- if messages[0].role != 'user' -%}{{ raise_exception('Conversations must start with a user message.') }}{%- endif -%}ok",
    );
    expect(t.render({ messages: [{ role: "user", content: "x" }] }).text).toBe("ok");
    let caught: unknown;
    try {
      t.render({ messages: [{ role: "assistant", content: "x" }] });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(TemplateError);
    expect((caught as TemplateError).kind).toBe("raised");
    expect((caught as TemplateError).message).toBe("Conversations must start with a user message.");
  });

  test("a template can refuse a chat_template_kwargs value", () => {
    const t = new ChatTemplate(
      "{%- if reasoning_effort is defined and reasoning_effort not in ['low', 'medium', 'high'] -%}" +
        "{{ raise_exception('reasoning_effort must be low, medium or high') }}{%- endif -%}" +
        "effort={{ reasoning_effort | default('medium') }}",
    );
    expect(t.render({ messages: [], kwargs: { reasoning_effort: "high" } }).text).toBe("effort=high");
    expect(() => t.render({ messages: [], kwargs: { reasoning_effort: "extreme" } })).toThrow(
      "reasoning_effort must be low, medium or high",
    );
  });

  test("kwargs become top-level variables but may not replace the renderer's own", () => {
    const t = new ChatTemplate("{{ greeting }} {{ messages | length }}");
    expect(t.render({ messages: [], kwargs: { greeting: "hello" } }).text).toBe("hello 0");
    for (const key of ["messages", "tools", "add_generation_prompt", "bos_token", "raise_exception"]) {
      expect(() => t.render({ messages: [], kwargs: { [key]: 1 } })).toThrow(TemplateError);
    }
  });

  test("strftime_now formats the template's load time", () => {
    const loadedAt = new Date(2025, 6, 4, 9, 5, 7); // local time, 4 July 2025 09:05:07
    const t = new ChatTemplate("Today Date: {{ strftime_now('%d %b %Y') }} / {{ strftime_now('%B %d, %Y %H:%M') }}", {
      loadedAt,
    });
    expect(t.render({ messages: [] }).text).toBe("Today Date: 04 Jul 2025 / July 04, 2025 09:05");
  });

  test("strftime supports the common directives", () => {
    const d = new Date(2024, 1, 29, 15, 4, 9); // Thursday 29 February 2024, 15:04:09 local
    expect(strftime(d, "%Y-%m-%d %H:%M:%S")).toBe("2024-02-29 15:04:09");
    expect(strftime(d, "%y %b %B %a %A %j %e")).toBe("24 Feb February Thu Thursday 060 29");
    expect(strftime(d, "%I:%M %p %F %T %D 100%%")).toBe("03:04 PM 2024-02-29 15:04:09 02/29/24 100%");
    expect(strftime(d, "%Q stays")).toBe("%Q stays");
  });

  test("tojson, bos_token, eos_token, namespace and range are available", () => {
    const t = new ChatTemplate(
      "{{ bos_token }}{{ tools | tojson }}{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}{{ eos_token }}",
      { bosToken: "<s>", eosToken: "</s>" },
    );
    expect(t.render({ messages: [], tools: [{ a: [1, "x"] }] }).text).toBe('<s>[{"a": [1, "x"]}]3</s>');
  });

  test("a template that does not parse is a TemplateError of kind parse", () => {
    let caught: unknown;
    try {
      new ChatTemplate("{% for x in %}");
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(TemplateError);
    expect((caught as TemplateError).kind).toBe("parse");
  });

  test("a template failing at render time is a TemplateError of kind render", () => {
    const t = new ChatTemplate("{{ messages[0].content.nosuchmethod() }}");
    expect(() => t.render({ messages: [{ role: "user", content: "x" }] })).toThrow(TemplateError);
  });
});

describe("templateReads", () => {
  test("finds top-level variables, not attributes, filters or tests of that name", () => {
    const src =
      "{% if enable_thinking is defined and not enable_thinking %}x{% endif %}" +
      "{{ message.reasoning_effort }}{{ x | tojson(indent=indent_kw) }}{% if y is string %}{% endif %}";
    expect(templateReads(src, "enable_thinking")).toBe(true);
    expect(templateReads(src, "reasoning_effort")).toBe(false);
    expect(templateReads(src, "tojson")).toBe(false);
    expect(templateReads(src, "indent_kw")).toBe(true);
    expect(templateReads(src, "string")).toBe(false);
    expect(templateReads("{{ r['reasoning_effort'] }}", "reasoning_effort")).toBe(false);
    expect(templateReads("{{ foo(reasoning_effort=1) }}", "reasoning_effort")).toBe(false);
  });

  test("falls back to a text scan for a source that does not parse", () => {
    expect(templateReads("{% if enable_thinking %", "enable_thinking")).toBe(true);
    expect(templateReads("{% if enable_thinking %", "reasoning_effort")).toBe(false);
  });
});

describe("telling content from scaffolding", () => {
  test("content a template trims or JSON-escapes is still found", () => {
    const t = new ChatTemplate(
      "{%- for m in messages -%}" +
        "{%- if m.role == 'tool' -%}[tool]{{ m.content | tojson }}{%- else -%}[{{ m.role }}]{{ m.content | trim }}{%- endif -%}" +
        "{%- endfor -%}",
    );
    const r = t.render({
      messages: [
        { role: "user", content: "  padded\n" },
        { role: "tool", content: 'line1\n"quoted"' },
      ],
    });
    expect(r.text).toBe('[user]padded[tool]"line1\\n\\"quoted\\""');
    expect(r.isolated).toBe(true);
    expect(untrusted(r)).toEqual(["padded", 'line1\\n\\"quoted\\"']);
    expect(joined(r)).toBe(r.text);
  });

  test("content rendered twice (or not at all) is split at each place", () => {
    const t = new ChatTemplate("{{ messages[0].content }}|{{ messages[0].content }}|{{ messages | length }}");
    const r = t.render({
      messages: [
        { role: "user", content: "a" },
        { role: "system", content: "dropped" },
      ],
    });
    expect(r.text).toBe("a|a|2");
    expect(r.isolated).toBe(true);
    expect(r.segments).toEqual([
      { text: "a", trusted: false },
      { text: "|", trusted: true },
      { text: "a", trusted: false },
      { text: "|2", trusted: true },
    ]);
  });

  test("a template that transforms content falls back to one trusted segment", () => {
    const t = new ChatTemplate("{% for m in messages %}<{{ m.content | upper }}>{% endfor %}");
    const r = t.render({ messages: [{ role: "user", content: "shout" }] });
    expect(r.text).toBe("<SHOUT>");
    expect(r.isolated).toBe(false);
    expect(r.segments).toEqual([{ text: "<SHOUT>", trusted: true }]);
  });

  test("a template that branches on what the content says falls back", () => {
    const t = new ChatTemplate(
      "{% for m in messages %}{% if m.content.startswith('!') %}CMD {% endif %}{{ m.content }}{% endfor %}",
    );
    const r = t.render({ messages: [{ role: "user", content: "!run" }] });
    expect(r.text).toBe("CMD !run");
    expect(r.isolated).toBe(false);
  });

  test("sentinel-looking private-use text in content does not confuse the split", () => {
    const sneaky = "\uE000\uE100\uE101\uE010\uE001";
    const r = chatml.render({ messages: [{ role: "user", content: sneaky }] });
    expect(r.isolated).toBe(true);
    expect(untrusted(r)).toEqual([sneaky]);
  });

  test("null content of an assistant tool-call turn reaches the template as an empty string", () => {
    const t = new ChatTemplate(
      "{%- for m in messages -%}{%- if '</think>' in m.content -%}T{%- endif -%}[{{ m.role }}:{{ m.content | tojson }}]{%- endfor -%}",
    );
    const r = t.render({
      messages: [
        { role: "user", content: "q" },
        { role: "assistant", content: null, tool_calls: [{ function: { name: "f", arguments: "{}" } }] },
      ],
    });
    expect(r.text).toBe('[user:"q"][assistant:""]');
  });

  test("tool-call arguments reach the template as objects, as Hugging Face templates expect", () => {
    // OpenAI clients send a JSON string; transformers (the reference) passes an object.
    const src = "{%- for c in messages[0].tool_calls -%}{{ c.function.arguments | tojson }}{%- endfor -%}";
    const messages: ChatMessage[] = [
      { role: "assistant", content: null, tool_calls: [{ function: { name: "f", arguments: '{"x":1}' } }] },
    ];
    expect(new ChatTemplate(src).render({ messages }).text).toBe('{"x": 1}');
    // The fixture template, which also accepts strings, gets the object too.
    const r = chatml.render({ messages, addGenerationPrompt: false });
    expect(r.text).toContain('"arguments": {"x": 1}}');
    // Arguments that are not a JSON object are passed on as sent.
    const raw = new ChatTemplate("{%- for c in messages[-1].tool_calls -%}{{ c.function.arguments }}{%- endfor -%}");
    const notJson: ChatMessage[] = [
      { role: "assistant", content: null, tool_calls: [{ function: { name: "f", arguments: "not json" } }] },
    ];
    expect(raw.render({ messages: notJson }).text).toBe("not json");
  });

  test("without tools, `tools` is undefined in the template, as transformers leaves it", () => {
    const t = new ChatTemplate("{{ tools is defined }} {{ tools is none }}{% for t in tools %}x{% endfor %}");
    expect(t.render({ messages: [] }).text).toBe("False False");
    expect(t.render({ messages: [], tools: [] }).text).toBe("False False");
    expect(t.render({ messages: [], tools: [weatherTool] }).text).toBe("True Falsex");
  });

  test("a call's arguments go as the JSON string when the template cannot take the object", () => {
    // Functionary v3.2 concatenates them: an object cannot be added to a string.
    const t = new ChatTemplate(
      "{%- for c in messages[-1].tool_calls -%}{{ '>>>' + c.function.arguments }}{%- endfor -%}",
    );
    const messages: ChatMessage[] = [
      { role: "assistant", content: null, tool_calls: [{ function: { name: "f", arguments: '{"x":1}' } }] },
    ];
    expect(t.render({ messages }).text).toBe('>>>{"x":1}');
  });

  test("datetime and functions, which FireFunction v2 reads, are supplied as llama.cpp supplies them", () => {
    const loadedAt = new Date(Date.UTC(2026, 11, 7, 12));
    const t = new ChatTemplate("Today is {{ datetime }}.{{ functions }}", { loadedAt });
    expect(t.render({ messages: [] }).text).toBe(`Today is ${strftime(loadedAt, "%b %d %Y")}.`);
    expect(t.render({ messages: [], tools: [weatherTool] }).text).toContain('"name": "get_weather"');
    // The caller's own values win.
    expect(t.render({ messages: [], kwargs: { datetime: "then" } }).text).toBe("Today is then.");
  });
});
