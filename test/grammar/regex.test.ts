import { describe, expect, test } from "bun:test";
import { RegexError, checkGbnf, parseGbnf, regexToGbnf } from "../../grammar/index.ts";
import { Recognizer } from "./recognizer.ts";
import { Sampler, rng } from "./sampler.ts";

// pattern, strings that must match, strings that must not. Matching means
// ECMAScript `new RegExp(pattern, "u").test(s)` (JSON Schema semantics:
// unanchored unless ^ / $).
const TABLE: [string, string[], string[]][] = [
  ["abc", ["abc", "xxabcxx", "abc\n"], ["ab", "acb", ""]],
  ["^abc$", ["abc"], ["abcd", "xabc", "ab", "abc\n"]],
  ["^abc", ["abc", "abcdef"], ["xabc"]],
  ["abc$", ["abc", "xxabc"], ["abcx"]],
  ["^a|b$", ["a", "axx", "xxb", "b"], ["xa", "bx", ""]],
  ["^(a|b)+$", ["a", "abba", "b"], ["", "abc"]],
  ["^[a-z]{2,4}$", ["ab", "abcd"], ["a", "abcde", "aB"]],
  ["^\\d{3}-\\d{4}$", ["555-1234"], ["5551234", "55-1234", "abc-defg"]],
  ["^\\w+@\\w+\\.com$", ["joe@mail.com", "a_1@b2.com"], ["joe@mail.org", "@mail.com", "j.o@mail.com"]],
  ["^[^aeiou]*$", ["", "xyz", "ß中"], ["a", "xyzo"]],
  ["^\\s*$", ["", "  ", "\t\n\u00a0\u3000"], [" x"]],
  ["^\\S+$", ["abc", "中"], ["", "a b"]],
  ["^a.c$", ["abc", "a中c", "a😀c"], ["ac", "a\nc", "a\rc", "abbc"]],
  ["^(?:ab)*c?$", ["", "ab", "abab", "ababc", "c"], ["a", "abcab"]],
  ["^(?<year>\\d{4})-(\\d{2})$", ["2024-01"], ["24-01"]],
  ["^a+?b*?$", ["a", "aab", "abbb"], ["b", ""]],
  ["^x{3}$", ["xxx"], ["xx", "xxxx"]],
  ["^x{2,}$", ["xx", "xxxxxxx"], ["x"]],
  ["^x{0}y$", ["y"], ["xy"]],
  ["^[A-Z][a-z]*( [A-Z][a-z]*)*$", ["John", "John Smith", "A B C"], ["john", "John  Smith", "John "]],
  ["colou?r", ["color", "my colour"], ["colr"]],
  ["^\\$\\d+(\\.\\d{2})?$", ["$5", "$10.99"], ["$10.9", "10.99", "$"]],
  ["^[\\-+]?\\d+$", ["-1", "+2", "3"], ["--1", "1-", ""]],
  ["^[a\\-z]$", ["a", "-", "z"], ["b"]],
  ["^[-a]$", ["-", "a"], ["b"]],
  ["^\\u00e9+$", ["é", "ééé"], ["e", ""]],
  ["^\\u{1F600}$", ["😀"], ["😁", "\ud83d"]],
  ["^\\uD83D\\uDE00$", ["😀"], ["😁"]],
  ["^[😀-😂]$", ["😀", "😁", "😂"], ["😃", "a"]],
  ["^\\x41\\t$", ["A\t"], ["A ", "a\t"]],
  ["^[\\d\\s]+$", ["1 2\t3"], ["1a"]],
  ["^[^\\d]+$", ["abc", " "], ["a1"]],
  ["^\\W$", [" ", "-", "é"], ["a", "_", "5"]],
  ["^\\D\\d$", ["a1"], ["11", "a"]],
  ["^[\\w.]+$", ["a.b_c"], ["a-b"]],
  ["^[^\\s\\d]+$", ["abc"], ["a c", "a1"]],
  ["^(a|ab)(c|bcd)(d*)$", ["abcd", "ac", "abcdd"], ["ab", "abd"]],
  ["^\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\/\\\\\\^\\$$", [".*+?()[]{}|/\\^$"], ["a"]],
  ["^(a*)*$", ["", "a", "aaaa"], ["b", "ab"]],
  ["^(a?b?)+$", ["", "a", "b", "abba"], ["c"]],
  ["^(a*b*)*c$", ["c", "abc", "bac", "aabbbac"], ["ab", "cc"]],
  ["^[\\b]$", ["\b"], ["b"]],
  ["^\\cJ\\0$", ["\n\0"], ["\n"]],
  ["^[^]$", ["a", "\n", "😀"], ["", "ab"]],
  ["^$", [""], ["a"]],
  ["", ["", "anything"], []],
  ["a|", ["", "b", "a"], []],
  ["^(|a)$", ["", "a"], ["aa"]],
  ["^\\n\\r\\t\\v\\f$", ["\n\r\t\v\f"], ["nrtvf"]],
  ["^(?:[01]\\d|2[0-3]):[0-5]\\d$", ["00:00", "23:59", "19:30"], ["24:00", "12:60", "1:00"]],
  ["^[a-f]{1,3}(?:,[a-f]{1,3}){0,2}$", ["a", "abc,de,f"], ["abcd", "a,b,c,d", "a,"]],
  ["^.{2,5}$", ["ab", "a😀c", "abcde"], ["a", "abcdef", "a\nb"]],
  [
    "^(?:(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$",
    ["127.0.0.1", "255.255.255.255"],
    ["256.0.0.1", "1.2.3", "01.2.3.4"],
  ],
];

function grammarFor(pattern: string) {
  return parseGbnf(`root ::= ${regexToGbnf(pattern)}\n`);
}

describe("regexToGbnf: table", () => {
  for (const [pattern, yes, no] of TABLE) {
    test(`/${pattern}/`, () => {
      const re = new RegExp(pattern, "u");
      const g = grammarFor(pattern);
      expect(checkGbnf(g).filter((p) => p.severity === "error")).toEqual([]);
      const rec = new Recognizer(g);
      for (const s of yes) {
        expect(re.test(s)).toBe(true); // the table itself is right
        expect({ s, accepted: rec.accepts(s) }).toEqual({ s, accepted: true });
      }
      for (const s of no) {
        expect(re.test(s)).toBe(false);
        expect({ s, accepted: rec.accepts(s) }).toEqual({ s, accepted: false });
      }
    });
  }
});

describe("regexToGbnf: differential against RegExp", () => {
  // Random strings over the characters each pattern mentions (plus a few
  // others): the recognizer and RegExp must agree on every one, and every
  // string sampled from the grammar must match the RegExp.
  for (const [pattern] of TABLE) {
    test(`/${pattern}/`, () => {
      const re = new RegExp(pattern, "u");
      const g = grammarFor(pattern);
      const rec = new Recognizer(g);
      const alphabet = [
        ...new Set([...pattern.replace(/\\[dDwWsSuUxc]|[\\^$(){}[\]|*+?]/g, ""), "a", "b", "1", " ", "\n", "-", "é"]),
      ];
      const rand = rng(pattern.length * 7919 + 17);
      for (let i = 0; i < 60; i++) {
        const len = Math.floor(rand() * 7);
        let s = "";
        for (let j = 0; j < len; j++) s += alphabet[Math.floor(rand() * alphabet.length)];
        expect({ s, accepted: rec.accepts(s) }).toEqual({ s, accepted: re.test(s) });
      }
      const sampler = new Sampler(g, { maxExtra: 3 });
      for (let seed = 1; seed <= 10; seed++) {
        const s = sampler.sample(seed);
        expect({ s, matches: re.test(s) }).toEqual({ s, matches: true });
      }
    });
  }
});

describe("regexToGbnf: refused patterns", () => {
  const refused: [string, boolean, RegExp][] = [
    ["(?=a)a", true, /lookahead/],
    ["a(?!b)", true, /lookahead/],
    ["(?<=a)b", true, /lookbehind/],
    ["(?<!a)b", true, /lookbehind/],
    ["(a)\\1", true, /backreference/],
    ["(?<x>a)\\k<x>", true, /named backreference/],
    ["\\bword\\b", true, /word boundary/],
    ["a\\Bb", true, /word boundary/],
    ["^\\p{L}+$", true, /unicode property/],
    ["a^b", true, /'\^' after the start/],
    ["a$b", true, /'\$' before the end/],
    ["(^a)", true, /'\^' after the start/],
    ["(a$)", true, /'\$' inside a group/],
    ["(", false, /invalid regular expression/],
    ["a{2,1}", false, /invalid regular expression/],
    ["[z-a]", false, /invalid regular expression/],
    ["\\", false, /invalid regular expression/],
    ["a{", false, /invalid regular expression/],
    ["\\q", false, /invalid regular expression/],
    ["^[]$", false, /can never match/],
  ];
  for (const [pattern, unsupported, msg] of refused) {
    test(`/${pattern}/`, () => {
      let err: unknown;
      try {
        regexToGbnf(pattern);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(RegexError);
      expect((err as RegexError).message).toMatch(msg);
      expect((err as RegexError).unsupported).toBe(unsupported);
    });
  }
});

describe("regexToGbnf: output shape", () => {
  test("anchored patterns translate one-to-one", () => {
    expect(regexToGbnf("^[a-z]+(-[a-z]+)*$")).toBe('[a-z]+ ("-" [a-z]+)*');
    expect(regexToGbnf("^\\d{3}$")).toBe("[0-9]{3}");
    expect(regexToGbnf("abc")).toBe('.* "abc" .*');
    expect(regexToGbnf("^a.b$")).toBe('"a" [^\\n\\r\\u2028-\\u2029] "b"');
  });

  test("large counts are split below llama.cpp's repetition limit", () => {
    const body = regexToGbnf("^a{0,2500}$");
    const g = parseGbnf(`root ::= ${body}\n`);
    expect(checkGbnf(g)).toEqual([]);
    const rec = new Recognizer(g);
    expect(rec.accepts("a".repeat(2500))).toBe(true);
    expect(rec.accepts("a".repeat(2501))).toBe(false);
    expect(rec.accepts("a".repeat(1000))).toBe(true);
    expect(rec.accepts("")).toBe(true);
    const fixed = parseGbnf(`root ::= ${regexToGbnf("^b{2300}$")}\n`);
    expect(checkGbnf(fixed)).toEqual([]);
    expect(new Recognizer(fixed).accepts("b".repeat(2300))).toBe(true);
    expect(new Recognizer(fixed).accepts("b".repeat(2299))).toBe(false);
  });
});
