// A conversation with a tool call and its result, rendered through a test
// template per family (written for this test, in each family's documented
// shape): the call and the result come out in that family's wire, and the
// template is recognised as that family.
import { describe, expect, test } from "bun:test";
import { ChatTemplate } from "../../../src/codec/index.ts";
import { detectToolDialect } from "../../../src/codec/tool-dialects/index.ts";

const CONVERSATION = [
  { role: "user", content: "weather in Oslo?" },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "abcdefghi", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
    ],
  },
  { role: "tool", tool_call_id: "abcdefghi", content: '{"temp": 3}' },
  { role: "user", content: "thanks" },
];
const TOOLS = [
  {
    type: "function",
    function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
  },
];

const FAMILIES: { name: string; template: string; call: string; result: string }[] = [
  {
    name: "hermes",
    template:
      '{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}{% elif m.role == \'tool\' %}<tool_response>{{ m.content }}</tool_response>{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}',
    call: '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
    result: '<tool_response>{"temp": 3}</tool_response>',
  },
  {
    name: "mistral",
    template:
      '{% for m in messages %}{% if m.role == \'user\' %}[INST]{{ m.content }}[/INST]{% elif m.tool_calls %}[TOOL_CALLS][{% for c in m.tool_calls %}{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}, "id": "{{ c.id }}"}{% endfor %}]</s>{% elif m.role == \'tool\' %}[TOOL_RESULTS]{"call_id": "{{ m.tool_call_id }}", "content": {{ m.content }}}[/TOOL_RESULTS]{% endif %}{% endfor %}',
    call: '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "abcdefghi"}]',
    result: '[TOOL_RESULTS]{"call_id": "abcdefghi", "content": {"temp": 3}}[/TOOL_RESULTS]',
  },
  {
    name: "llama3",
    template:
      '{% for m in messages %}{% if m.tool_calls %}<|start_header_id|>assistant<|end_header_id|>\n\n{% for c in m.tool_calls %}{"name": "{{ c.function.name }}", "parameters": {{ c.function.arguments | tojson }}}{% endfor %}<|eot_id|>{% elif m.role == \'tool\' %}<|start_header_id|>ipython<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% else %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% endif %}{% endfor %}',
    call: '{"name": "get_weather", "parameters": {"city": "Oslo"}}',
    result: '<|start_header_id|>ipython<|end_header_id|>\n\n{"temp": 3}',
  },
  {
    name: "deepseek",
    template:
      "{% for m in messages %}{% if m.role == 'user' %}<｜User｜>{{ m.content }}{% elif m.tool_calls %}<｜Assistant｜><｜tool▁calls▁begin｜>{% for c in m.tool_calls %}<｜tool▁call▁begin｜>function<｜tool▁sep｜>{{ c.function.name }}\n```json\n{{ c.function.arguments | tojson }}\n```<｜tool▁call▁end｜>{% endfor %}<｜tool▁calls▁end｜><｜end▁of▁sentence｜>{% elif m.role == 'tool' %}<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{{ m.content }}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>{% endif %}{% endfor %}",
    call: '<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Oslo"}\n```<｜tool▁call▁end｜>',
    result: '<｜tool▁output▁begin｜>{"temp": 3}<｜tool▁output▁end｜>',
  },
  {
    name: "gpt-oss",
    template:
      "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}<|start|>assistant<|channel|>commentary to=functions.{{ c.function.name }} <|constrain|>json<|message|>{{ c.function.arguments | tojson }}<|call|>{% endfor %}{% elif m.role == 'tool' %}<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{{ m.content }}<|end|>{% else %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endif %}{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}",
    call: '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}<|call|>',
    result: '<|channel|>commentary<|message|>{"temp": 3}<|end|>',
  },
];

describe("multi-turn tool conversations render in each family's wire", () => {
  for (const f of FAMILIES) {
    test(f.name, () => {
      const text = new ChatTemplate(f.template).render({ messages: CONVERSATION, tools: TOOLS }).text;
      expect(text).toContain(f.call);
      expect(text).toContain(f.result);
      expect(text).toContain("thanks");
      expect(detectToolDialect(f.template, () => false)?.name).toBe(f.name);
    });
  }
});
