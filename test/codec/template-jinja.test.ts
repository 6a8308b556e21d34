// The Jinja2 behaviours the adapter over @huggingface/jinja reproduces
// (src/codec/jinja/): each template below with the text Python Jinja2 3.1
// renders from it, configured as transformers configures it
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, its tojson).
// The expected texts were produced by Jinja2 itself, not by this renderer.
import { describe, expect, test } from "bun:test";
import { ChatTemplate, TemplateError } from "../../src/codec/template.ts";

const render = (source: string) => new ChatTemplate(source).render({ messages: [] }).text;

/** [template, what Jinja2 renders] */
const RENDERS: [string, string][] = [
  [
    "{{ none }}|{{ true }}|{{ false }}|{{ [1, 'a', none, true, 1.5] }}|{{ {'a': 1, 2: 'b'} }}|{{ (1, 2) }}",
    "None|True|False|[1, 'a', None, True, 1.5]|{'a': 1, 2: 'b'}|(1, 2)",
  ],
  [
    '{{ "a\'b" | string }}|{{ ["a\'b", \'x"y\', "a\\nb\\x01é"] }}|{{ {\'k\': undefined_x} }}',
    "a'b|[\"a'b\", 'x\"y', 'a\\nb\\x01é']|{'k': Undefined}",
  ],
  [
    "{{ 123.0 }}|{{ 0.1 + 0.2 }}|{{ 1 / 3 }}|{{ 6 / 2 }}|{{ -7 // 2 }}|{{ -7 % 2 }}|{{ 2 ** -1 }}|{{ true + 1 }}",
    "123.0|0.30000000000000004|0.3333333333333333|3.0|-4|1|0.5|2",
  ],
  [
    "{{ undefined_x ~ 'a' }}|{{ none ~ 'a' }}|{{ 'a' ~ 1.0 }}|{{ 'ab' * 2 }}|{{ [1] * 2 }}|{{ 'a%sb%d' % ('x', 2) }}",
    "a|Nonea|a1.0|abab|[1, 1]|axb2",
  ],
  [
    "{{ 1 == 1.0 }}|{{ '1' == 1 }}|{{ none == undefined_x }}|{{ [1, 2] == [1, 2] }}|{{ [1, 2] == (1, 2) }}|{{ {'a': [1]} == {'a': [1]} }}",
    "True|False|False|True|False|True",
  ],
  [
    "{{ 'a' in undefined_x }}|{{ undefined_x in ['a'] }}|{{ none in [none] }}|{{ 1 in {1: 2} }}|{{ 'a' in 'cat' }}|{{ [1] in [[1]] }}",
    "False|False|True|True|True|True",
  ],
  [
    "{{ none.foo }}|{{ none[0] is defined }}|{{ 'abc'[5] is defined }}|{{ 'abc'.length }}|{{ [1, 2].length }}|{{ {'a': {'b': [5]}}.a.b.0 }}",
    "|False|False|||5",
  ],
  [
    "{{ {'items': 1}['items'] }}|{{ {'items': 1}.items is defined }}|{{ {'get': 3}.get('get') }}|{{ {1: 'a'}[1] }}|{{ {'1': 'a'}[1] is defined }}",
    "1|True|3|a|False",
  ],
  [
    "{{ [1, 2].append is defined }}|{{ [1, 2].append }}|{{ {'a': 1}.copy() }}|{{ [3, 4].index(4) }}",
    "False||{'a': 1}|1",
  ],
  ["{% for i in [1, 2] %}{% if i == 2 %}[{{ x }}]{% endif %}{% set x = i %}{% endfor %}[{{ x }}]", "[][]"],
  [
    "{% for x in [1] %}{% break %}{% else %}E{% endfor %}|{% for x in [1, 2] if x > 5 %}{% else %}E2{% endfor %}|{% for x in [1, 2, 3] %}{{ x }}{% if x == 2 %}{% break %}{% endif %}{% endfor %}|{% for x in [1, 2] %}{{ x }}{% if x == 1 %}{% continue %}{% endif %}-{% endfor %}",
    "E|E2|12|12-",
  ],
  [
    "{% for c in 'ab' %}{{ c }},{% endfor %}|{% for k in {'a': 1, 2: 3} %}{{ k }},{% endfor %}|{% for a, b in {'a': 1}.items() %}{{ a }}{{ b }}{% endfor %}|{% for a, b in [[1, 2], 'xy', (3, 4)] %}{{ a }}{{ b }}{% endfor %}|{% for x in undefined_x %}x{% else %}empty{% endfor %}",
    "a,b,|a,2,|a1|12xy34|empty",
  ],
  [
    "{% for i in [5, 6, 7] if i > 5 %}{{ loop.index }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.previtem }}{{ loop.cycle('a', 'b') }}{{ loop.length }};{% endfor %}",
    "11TrueFalsea2;20FalseTrue6b2;",
  ],
  [
    "{% macro m() %}{{ y }}{% endmacro %}{% set y = 1 %}{{ m() }}|{% for y in [2] %}{{ m() }}{% endfor %}|{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}in{% endcall %}",
    "1|1|[in]",
  ],
  [
    "{{ undefined_x | length }}|{{ undefined_x | trim }}|{{ undefined_x | upper }}|{{ undefined_x | list }}|{{ undefined_x | items | list }}|{{ undefined_x | join(',') }}|{{ undefined_x | min }}|{{ undefined_x | string }}",
    "0|||[]|[]|||",
  ],
  [
    "{{ none | string }}|{{ none | trim }}|{{ true | string }}|{{ none | default('d') }}|{{ '' | default('d', true) }}|{{ undefined_x | default('d') }}|{{ [1, [2, 'a'], {'k': (1, 2)}] | string }}|{{ namespace(a='x') | string }}",
    "None|None|True|None|d|d|[1, [2, 'a'], {'k': (1, 2)}]|<Namespace {'a': 'x'}>",
  ],
  [
    "{{ none | selectattr('a') | list }}|{{ none | map(attribute='a') | list }}|{{ undefined_x | reject | list }}|{{ [{'a': 1}, {'a': 0}, {}] | selectattr('a') | list }}|{{ [{'t': 'x'}, {'t': 'y'}] | rejectattr('t', 'equalto', 'x') | list }}|{{ [1, none, 2] | select | list }}|{{ ['a', none] | reject('none') | list }}",
    "[]|[]|[]|[{'a': 1}]|[{'t': 'y'}]|[1, 2]|['a']",
  ],
  [
    "{{ [1, 2] | map('string') | join('-') }}|{{ [{'a': 1}, {'b': 2}] | map(attribute='a') | list }}|{{ [{'a': 1}, {'b': 2}] | map(attribute='a', default=0) | list }}|{{ ['1', 'x'] | map('int', 7) | list }}",
    "1-2|[1, Undefined]|[1, 0]|[1, 7]",
  ],
  [
    "{{ {'b': 1, 'a': 2} | dictsort }}|{{ {'b': 1, 'a': 2} | dictsort(by='value', reverse=true) }}|{{ {2: 'x', 10: 'y'} | dictsort }}|{{ {'b': 1, 'a': 2} | items | list }}",
    "[('a', 2), ('b', 1)]|[('a', 2), ('b', 1)]|[(2, 'x'), (10, 'y')]|[('b', 1), ('a', 2)]",
  ],
  [
    "{{ [3, 1, 2] | min }}|{{ ['B', 'a'] | max }}|{{ ['B', 'a'] | max(case_sensitive=true) }}|{{ ['B', 'a'] | sort }}|{{ [3, 1, 2] | sort(reverse=true) }}|{{ [{'n': 'b'}, {'n': 'a'}] | sort(attribute='n') }}|{{ ['a', 'A', 'b'] | unique | list }}|{{ [1, 2] | sum }}|{{ [0.5, 1] | sum }}",
    "1|B|a|['a', 'B']|[3, 2, 1]|[{'n': 'a'}, {'n': 'b'}]|['a', 'b']|3|1.5",
  ],
  [
    "{{ [1, 2] | first }}|{{ [1, 2] | last }}|{{ 'ab' | first }}|{{ [] | first is defined }}|{{ 'ab' | reverse }}|{{ [1, 2] | reverse | list }}|{{ 'ab' | list }}|{{ {'a': 1} | list }}|{{ {'a': 1} | length }}",
    "1|2|a|False|ba|[2, 1]|['a', 'b']|['a']|1",
  ],
  [
    "{{ 'abc' | replace('b', 'X') }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'ab' | replace('', '-') }}|{{ 1.5 | int }}|{{ '3.7' | int }}|{{ '3.7' | float }}|{{ 'x' | int(5) }}|{{ '0x1A' | int(0, 16) }}|{{ true | int }}|{{ 2.5 | round }}|{{ 1.234 | round(2) }}|{{ -1 | abs }}",
    "aXc|bba|-a-b-|1|3|3.7|5|26|1|2.0|1.23|1",
  ],
  [
    '{{ "a\\nb\\n\\nc" | indent }}|{{ "a\\nb" | indent(2, true) }}|{{ "a\\n\\nb" | indent(2, blank=true) }}|{{ "a" | indent(\'--\', true) }}|{{ \'a\\r\\nb\\x0bc\' | indent(2) }}',
    "a\n    b\n\n    c|  a\n  b|a\n  \n  b|--a|a\n  b\n  c",
  ],
  [
    "{{ [1, 2, 3] | join }}|{{ [1, none, true] | join(', ') }}|{{ [{'a': 'x'}, {'a': 'y'}] | join(',', attribute='a') }}|{{ 'hello world-foo' | title }}|{{ \"they're\" | title }}|{{ \"they're\".title() }}|{{ 'hELLO' | capitalize }}|{{ 'a %s' | format(1) }}",
    "123|1, None, True|x,y|Hello World-Foo|They're|They'Re|Hello|a 1",
  ],
  [
    "{{ {'a': 1.0, 'b': [true, none], 'c': 'é'} | tojson }}|{{ {'é': 'ü'} | tojson(ensure_ascii=True) }}|{{ [1, [2], {}] | tojson(indent=2) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=True, separators=(',', ':')) }}|{{ {1: 2} | tojson }}|{{ [1] | tojson(indent='\\t') }}",
    '{"a": 1.0, "b": [true, null], "c": "é"}|{"\\u00e9": "\\u00fc"}|[\n  1,\n  [\n    2\n  ],\n  {}\n]|{"a":2,"b":1}|{"1": 2}|[\n\t1\n]',
  ],
  [
    "{{ 'x' | safe + '<\"&>' }}|{{ '<' | safe ~ '<' }}|{{ ('a' | safe | trim) + '<' }}|{{ ('a' | safe | string) + '<' }}|{{ 'x' + '<' | safe }}",
    "x&lt;&#34;&amp;&gt;|<<|a&lt;|a&lt;|x<",
  ],
  [
    "{{ '{}-{}-{x}'.format(1, 2, x=3) }}|{{ '{}'.format(undefined_x) }}|{{ '{{}}{}'.format(none) }}|{{ '{:>4}|{:<3}|{:^5}|{:.2f}|{:03d}'.format('a', 'b', 'c', 1.234, 7) }}",
    "1-2-3||{}None|   a|b  |  c  |1.23|007",
  ],
  [
    "{{ '\\n x \\n'.strip('\\n') }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'a b  c'.split() }}|{{ ' a b c '.split(none, 1) }}|{{ ' a b c '.rsplit(none, 1) }}|{{ 'a-b-c'.rsplit('-', 1) }}|{{ 'a\\x1cb'.splitlines() }}|{{ ' \\x85x\\x1f ' | trim }}|{{ '\\ufeffx' | trim | length }}",
    " x |axx|xxa|['a', 'b', 'c']|['a', 'b c ']|[' a b', 'c']|['a-b', 'c']|['a', 'b']|x|2",
  ],
  [
    "{{ 'abc'.startswith(('x', 'a')) }}|{{ 'abc'.endswith('c') }}|{{ 'abc'.find('c') }}|{{ 'aXbXc'.count('X') }}|{{ 'k=v'.partition('=') }}|{{ 'ab'.center(5, '*') }}|{{ '-5'.zfill(4) }}|{{ 'Héllo'.upper() }}|{{ ', '.join(['a', 'b']) }}",
    "True|True|2|2|('k', '=', 'v')|**ab*|-005|HÉLLO|a, b",
  ],
  [
    "{{ 5 is number }}|{{ true is number }}|{{ true is integer }}|{{ 1.5 is float }}|{{ undefined_x is iterable }}|{{ {} is iterable }}|{{ 5 is iterable }}|{{ {} is sequence }}|{{ 'aB' is lower }}|{{ '1' is lower }}|{{ 'AB' is upper }}|{{ {} is mapping }}|{{ none is none }}|{{ 3 is odd }}|{{ 'x' | safe is escaped }}",
    "True|True|False|True|True|True|False|True|False|False|True|True|True|True|True",
  ],
  [
    "{{ (1, 2, 3)[1:] }}|{{ 'hello'[1:3] }}|{{ [1, 2, 3][::2] }}|{{ [1, 2, 3][-1] }}|{{ 'abc'[::-1] }}",
    "(2, 3)|el|[1, 3]|3|cba",
  ],
  [
    "{{ -true }}|{{ not none }}|{{ not [] }}|{{ not {} }}|{{ 0.0 or 'x' }}|{{ [] and 1 }}|{{ 'a' if false }}|{{ 1 if none else 2 }}",
    "-1|True|True|True|x|[]||2",
  ],
  [
    "{% set ns = namespace(x=0, l=[]) %}{% for i in range(3) %}{% set ns.x = ns.x + i %}{% set ns.l = ns.l + [i] %}{% endfor %}{{ ns.x }} {{ ns.l }} {{ ns }}",
    "3 [0, 1, 2] <Namespace {'x': 3, 'l': [0, 1, 2]}>",
  ],
];

/** [template, the error Jinja2 raises]: these must fail here too. */
const REFUSALS: [string, string][] = [
  ["{{ 'a' + 1 }}", "TypeError"],
  ["{{ 1 in none }}", "TypeError"],
  ["{{ 3 / 0 }}", "ZeroDivisionError"],
  ["{{ 1 < 'a' }}", "TypeError"],
  ["{% set l = [1] %}{{ l.append(2) }}", "SecurityError"],
  ["{% set d = {'a': 1} %}{{ d.update({'b': 2}) }}", "SecurityError"],
  ["{% for x in none %}{{ x }}{% endfor %}", "TypeError"],
  ["{{ undefined_x | tojson }}", "TypeError"],
  ["{{ '{}-{0}'.format(1) }}", "ValueError"],
];

describe("renders as Python Jinja2 does", () => {
  for (const [source, expected] of RENDERS) {
    test(source.length > 90 ? `${source.slice(0, 90)}...` : source, () => {
      expect(render(source)).toBe(expected);
    });
  }
});

describe("fails where Python Jinja2 fails", () => {
  for (const [source, jinjaError] of REFUSALS) {
    test(`${source} (Jinja2: ${jinjaError})`, () => {
      expect(() => render(source)).toThrow(TemplateError);
    });
  }
});
