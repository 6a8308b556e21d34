import { describe, expect, test } from "bun:test";
import {
  GbnfSyntaxError,
  checkGbnf,
  jsonObjectGrammar,
  parseGbnf,
  printGbnf,
  sourceLocation,
} from "../../grammar/index.ts";
import { recognizes } from "./recognizer.ts";

describe("GBNF parser", () => {
  test("parses rules, literals, classes, groups and repetitions", () => {
    const g = parseGbnf(`root ::= "a" [b-d] [^x] . item* ( "p" | "q" )+ x? y{2} y{1,} y{0,3}
item ::= "i"
x ::= "x"
y ::= "y"`);
    expect(g.rules.map((r) => r.name)).toEqual(["root", "item", "x", "y"]);
    const body = g.rules[0]!.body;
    expect(body.kind).toBe("seq");
    if (body.kind !== "seq") throw new Error();
    expect(body.items[0]).toEqual({ kind: "lit", value: "a" });
    expect(body.items[1]).toEqual({ kind: "class", negated: false, ranges: [[98, 100]] });
    expect(body.items[2]).toEqual({ kind: "class", negated: true, ranges: [[120, 120]] });
    expect(body.items[3]).toEqual({ kind: "any" });
    expect(body.items[4]).toEqual({ kind: "repeat", body: { kind: "ref", name: "item" }, min: 0, max: null });
    expect(body.items[5]).toEqual({
      kind: "repeat",
      min: 1,
      max: null,
      body: {
        kind: "alt",
        alts: [
          { kind: "lit", value: "p" },
          { kind: "lit", value: "q" },
        ],
      },
    });
    expect(body.items.slice(6)).toEqual([
      { kind: "repeat", body: { kind: "ref", name: "x" }, min: 0, max: 1 },
      { kind: "repeat", body: { kind: "ref", name: "y" }, min: 2, max: 2 },
      { kind: "repeat", body: { kind: "ref", name: "y" }, min: 1, max: null },
      { kind: "repeat", body: { kind: "ref", name: "y" }, min: 0, max: 3 },
    ]);
  });

  test("decodes every escape", () => {
    const g = parseGbnf(String.raw`root ::= "\n\t\r\"\\\x41\u00e9\U0001F600\[\]\-" [\]\-\x5E\u4E2D]`);
    const body = g.rules[0]!.body;
    if (body.kind !== "seq") throw new Error();
    expect(body.items[0]).toEqual({ kind: "lit", value: '\n\t\r"\\Aé😀[]-' });
    expect(body.items[1]).toEqual({
      kind: "class",
      negated: false,
      ranges: [
        [93, 93],
        [45, 45],
        [94, 94],
        [0x4e2d, 0x4e2d],
      ],
    });
  });

  test("raw UTF-8 in literals and classes", () => {
    const g = parseGbnf(`root ::= "héllo 😀" [à-ÿ]`);
    const body = g.rules[0]!.body;
    if (body.kind !== "seq") throw new Error();
    expect(body.items[0]).toEqual({ kind: "lit", value: "héllo 😀" });
    expect(body.items[1]).toEqual({ kind: "class", negated: false, ranges: [[0xe0, 0xff]] });
  });

  test("comments, blank lines, continuation after | and inside parentheses", () => {
    const g = parseGbnf(`# leading comment

root ::= a |   # trailing comment
  b
a ::= ( "x"
  "y" # inside
  | "z" )

b ::= "b"
`);
    expect(g.rules.map((r) => r.name)).toEqual(["root", "a", "b"]);
    expect(g.rules[0]!.body).toEqual({
      kind: "alt",
      alts: [
        { kind: "ref", name: "a" },
        { kind: "ref", name: "b" },
      ],
    });
    expect(recognizes(g, "xy")).toBe(true);
    expect(recognizes(g, "z")).toBe(true);
  });

  test("token references are parsed (and flagged by the checker)", () => {
    const g = parseGbnf(`root ::= <[42]> !<[7]> <think> "x"`);
    const body = g.rules[0]!.body;
    if (body.kind !== "seq") throw new Error();
    expect(body.items.slice(0, 3)).toEqual([
      { kind: "token", negated: false, id: 42 },
      { kind: "token", negated: true, id: 7 },
      { kind: "token", negated: false, text: "think" },
    ]);
    expect(checkGbnf(g).map((p) => p.code)).toEqual(["token-reference", "token-reference", "token-reference"]);
  });

  test("records source locations", () => {
    const g = parseGbnf(`root ::= item\n\n  item ::= "a"`);
    expect(sourceLocation(g.rules[1]!)).toEqual({ line: 3, column: 3 });
  });

  const errors: [string, string, number, number, RegExp][] = [
    ["unterminated literal", `root ::= "abc`, 1, 10, /unterminated string literal/],
    ["missing ::=", `root = "a"`, 1, 6, /expected '::='/],
    ["unknown escape", `root ::= "\\q"`, 1, 11, /unknown escape '\\q'/],
    ["bad hex escape", `root ::= "\\x4"`, 1, 11, /expected 2 hex digits/],
    ["unclosed group", `root ::= ( "a" | "b"`, 1, 10, /unclosed '\('/],
    ["unbalanced paren", `root ::= "a" )`, 1, 14, /unbalanced '\)'/],
    ["repeat with nothing before", `root ::= * "a"`, 1, 10, /nothing to repeat/],
    ["bad repetition", `root ::= "a"{x}`, 1, 14, /expected an integer after '\{'/],
    ["unclosed repetition", `root ::= "a"{2,3`, 1, 17, /expected '\}'/],
    ["repetition min > max", `root ::= "a"{3,1}`, 1, 13, /max below min/],
    ["repetition over llama.cpp limit", `root ::= "a"{1,5000}`, 1, 13, /above 2000/],
    ["unterminated class", `root ::= [a-z`, 1, 10, /unterminated character class/],
    ["empty negated class", `root ::= [^]*`, 1, 10, /empty character class/],
    ["empty class", `root ::= []`, 1, 10, /empty character class/],
    ["range out of order", `root ::= [z-a]`, 1, 12, /out of order/],
    ["garbage after rule on second line", `root ::= "a"\nx ::= "b" @`, 2, 11, /unexpected '@'/],
    ["rule without name", `::= "a"`, 1, 1, /expected a rule name/],
    ["token not closed", `root ::= <[12`, 1, 14, /expected '\]'/],
    ["bang without token", `root ::= !"a"`, 1, 11, /expected '<' after '!'/],
    ["error column counts code points", `root ::= "é😀" @`, 1, 15, /unexpected '@'/],
  ];
  for (const [name, src, line, column, msg] of errors) {
    test(`syntax error: ${name}`, () => {
      let err: unknown;
      try {
        parseGbnf(src);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(GbnfSyntaxError);
      const e = err as GbnfSyntaxError;
      expect(e.detail).toMatch(msg);
      expect([e.line, e.column]).toEqual([line, column]);
      expect(e.message.startsWith(`${line}:${column}: `)).toBe(true);
    });
  }
});

describe("GBNF printer round trip", () => {
  const grammars: [string, string][] = [
    [
      "arithmetic",
      `root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")"
number ::= [0-9]+ ("." [0-9]+)?`,
    ],
    ["json object", jsonObjectGrammar()],
    [
      "list",
      `root ::= item+
item ::= "- " [^\\n]+ "\\n"`,
    ],
    ["escapes", String.raw`root ::= "\"quoted\" \\ \t\n\r" [\x00-\x1F\x7F] "\u00e9\U0001F600" [^\]\[\\"] [\x2D\x5E]`],
    [
      "empty alternatives",
      `root ::= "a" | () | "b"
opt ::= ()
x ::= ("a" | ) "b"`,
    ],
    ["nested groups", `root ::= (("a" "b") ("c" | ("d" | "e"))) (("f"))`],
    ["repetition forms", `root ::= "a"* "b"+ "c"? "d"{3} "e"{2,} "f"{0,4} ("g" "h"){1,2} ("i"*)? ("j"{2})+`],
    ["any and classes", `root ::= . [a-zA-Z_] [^0-9] [\\-] [a\\-z] ["]`],
    ["tokens", `root ::= <[1]> !<[2]> <hello> ("x" | !<[3]>)*`],
    ["unicode", `root ::= "日本語" [ぁ-ん]+ "😀"`],
    [
      "comments",
      `# c
root ::= a # c
a ::= "x" | # c
  "y"`,
    ],
    [
      "multiline group",
      `root ::= (
  "a"
  | "b"
)`,
    ],
  ];
  for (const [name, src] of grammars) {
    test(name, () => {
      const once = parseGbnf(src);
      const printed = printGbnf(once);
      const twice = parseGbnf(printed);
      expect(twice).toEqual(once);
      // Printing is a fixpoint after one round.
      expect(printGbnf(twice)).toBe(printed);
    });
  }

  test("printed output is ASCII", () => {
    const printed = printGbnf(parseGbnf(`root ::= "日本語😀" [ぁ-ん]`));
    expect(/^[\x00-\x7f]*$/.test(printed)).toBe(true);
    expect(printed).toBe('root ::= "\\u65E5\\u672C\\u8A9E\\U0001F600" [\\u3041-\\u3093]\n');
  });
});

describe("GBNF checks", () => {
  const codes = (src: string) => checkGbnf(parseGbnf(src)).map((p) => `${p.severity}:${p.code}:${p.rule ?? ""}`);

  test("a clean grammar has no problems", () => {
    expect(checkGbnf(parseGbnf(jsonObjectGrammar()))).toEqual([]);
    expect(codes(`root ::= "a" rest\nrest ::= "b" rest | ()`)).toEqual([]);
  });

  test("undefined rule, with location", () => {
    const p = checkGbnf(parseGbnf(`root ::= "a" |\n  missing`));
    // root still matches "a", so the undefined rule is the only problem.
    expect(p).toHaveLength(1);
    expect(p[0]).toMatchObject({ severity: "error", code: "undefined-rule", rule: "root", line: 2, column: 3 });
  });

  test("unused rule is a warning", () => {
    expect(codes(`root ::= "a"\nextra ::= "b"`)).toEqual(["warning:unused-rule:extra"]);
  });

  test("missing root", () => {
    expect(codes(`start ::= "a"`)).toEqual(["error:missing-root:"]);
  });

  test("root option", () => {
    expect(checkGbnf(parseGbnf(`start ::= "a"`), { root: "start" })).toEqual([]);
  });

  test("rules that can match nothing", () => {
    expect(codes(`root ::= "a" loop\nloop ::= "b" loop`)).toEqual([
      "error:empty-language:root",
      "error:empty-language:loop",
    ]);
    expect(codes(`root ::= x | "ok"\nx ::= "(" x ")"`)).toEqual(["error:empty-language:x"]);
  });

  test("direct left recursion", () => {
    expect(codes(`root ::= root "a" | "b"`)).toEqual(["error:left-recursion:root"]);
  });

  test("left recursion through a nullable prefix", () => {
    expect(codes(`root ::= e? root "a" | "b"\ne ::= "x"`)).toEqual(["error:left-recursion:root"]);
  });

  test("indirect left recursion", () => {
    const p = checkGbnf(parseGbnf(`root ::= a\na ::= b "x" | "y"\nb ::= c\nc ::= a "z"`));
    expect(p.map((x) => x.code)).toEqual(["left-recursion"]);
    expect(p[0]!.message).toMatch(/indirect left recursion: (a -> c -> b -> a|a -> b -> c -> a)/);
  });

  test("right recursion is fine", () => {
    expect(codes(`root ::= "a" root | "b"`)).toEqual([]);
  });

  test("star over something that can match empty", () => {
    expect(codes(`root ::= ("a"?)*`)).toEqual(["error:left-recursion:root"]);
    expect(codes(`root ::= ("a"?){0,5}`)).toEqual([]);
  });

  test("duplicate definitions", () => {
    expect(codes(`root ::= "a"\nroot ::= "b"`)).toEqual(["error:duplicate-rule:root"]);
  });

  test("repetition budget mirrors llama.cpp", () => {
    expect(codes(`root ::= "a"{0,1999}`)).toEqual([]);
    expect(codes(`root ::= ("a"{0,100}){0,30}`)).toEqual(["error:repetition-limit:root"]);
    expect(codes(`root ::= x{0,30}\nx ::= "a"{0,100}`)).toEqual([]);
  });
});
