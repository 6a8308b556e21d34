// GBNF parser following llama.cpp's grammar syntax (src/llama-grammar.cpp):
//
//   rule     ::= name ws "::=" alternates (newline | end)
//   alternates ::= sequence ("|" sequence)*
//   sequence ::= (atom postfix*)*
//   atom     ::= "literal" | [class] | [^class] | . | name | ( alternates )
//              | <[id]> | <text> | !<...>
//   postfix  ::= * | + | ? | {m} | {m,} | {m,n}
//
// Whitespace rules mirror llama.cpp: inside parentheses and after "|" or
// "::=" newlines are allowed; at the top level of a rule a newline ends it.
// "#" starts a comment that runs to the end of the line.

import type { CodeRange, Expr, Grammar, Rule } from "./ast.ts";
import { setLocation } from "./ast.ts";

export class GbnfSyntaxError extends Error {
  readonly line: number;
  readonly column: number;
  /** The message without the position prefix. */
  readonly detail: string;
  constructor(detail: string, line: number, column: number) {
    super(`${line}:${column}: ${detail}`);
    this.name = "GbnfSyntaxError";
    this.detail = detail;
    this.line = line;
    this.column = column;
  }
}

// llama.cpp rejects a single repetition count above this.
const MAX_COUNT = 2000;

function isWordChar(c: string | undefined): boolean {
  if (c === undefined) return false;
  const k = c.charCodeAt(0);
  return (k >= 97 && k <= 122) || (k >= 65 && k <= 90) || (k >= 48 && k <= 57) || k === 45;
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= "0" && c <= "9";
}

class Parser {
  private pos = 0;
  private readonly lineStarts: number[] = [0];
  /** Surrogate pairs ended before each offset (only when the source has any), so columns cost O(1). */
  private readonly lowSurrogates?: Int32Array;

  constructor(private readonly src: string) {
    let surrogates = false;
    for (let i = 0; i < src.length; i++) {
      const c = src.charCodeAt(i);
      if (c === 0x0a) this.lineStarts.push(i + 1);
      else if (c >= 0xdc00 && c <= 0xdfff) surrogates = true;
    }
    if (surrogates) {
      const counts = new Int32Array(src.length + 1);
      for (let i = 0; i < src.length; i++) {
        const c = src.charCodeAt(i);
        const p = i > 0 ? src.charCodeAt(i - 1) : 0;
        counts[i + 1] = counts[i]! + (c >= 0xdc00 && c <= 0xdfff && p >= 0xd800 && p <= 0xdbff ? 1 : 0);
      }
      this.lowSurrogates = counts;
    }
  }

  private locAt(offset: number): { line: number; column: number } {
    let lo = 0;
    let hi = this.lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.lineStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    // Columns count code points, 1-based: UTF-16 units less the second halves of pairs.
    const start = this.lineStarts[lo]!;
    const pairs = this.lowSurrogates ? this.lowSurrogates[offset]! - this.lowSurrogates[start]! : 0;
    return { line: lo + 1, column: offset - start - pairs + 1 };
  }

  private fail(detail: string, offset = this.pos): never {
    const { line, column } = this.locAt(offset);
    throw new GbnfSyntaxError(detail, line, column);
  }

  private peek(k = 0): string | undefined {
    return this.src[this.pos + k];
  }

  private describeHere(): string {
    const c = this.peek();
    if (c === undefined) return "end of input";
    if (c === "\n" || c === "\r") return "end of line";
    return `'${String.fromCodePoint(this.src.codePointAt(this.pos)!)}'`;
  }

  private space(newlineOk: boolean): void {
    for (;;) {
      const c = this.peek();
      if (c === " " || c === "\t" || (newlineOk && (c === "\n" || c === "\r"))) {
        this.pos++;
      } else if (c === "#") {
        while (this.pos < this.src.length && this.peek() !== "\n" && this.peek() !== "\r") this.pos++;
      } else {
        return;
      }
    }
  }

  private name(): string {
    const start = this.pos;
    while (isWordChar(this.peek())) this.pos++;
    if (this.pos === start) this.fail(`expected a rule name, found ${this.describeHere()}`);
    return this.src.slice(start, this.pos);
  }

  private int(): number {
    const start = this.pos;
    while (isDigit(this.peek())) this.pos++;
    if (this.pos === start) this.fail(`expected an integer, found ${this.describeHere()}`);
    return Number(this.src.slice(start, this.pos));
  }

  private hex(count: number, escStart: number): number {
    const digits = this.src.slice(this.pos, this.pos + count);
    if (digits.length !== count || !/^[0-9a-fA-F]+$/.test(digits)) {
      this.fail(`expected ${count} hex digits in escape`, escStart);
    }
    this.pos += count;
    const v = parseInt(digits, 16);
    if (v > 0x10ffff) this.fail(`code point U+${digits} is out of range`, escStart);
    return v;
  }

  /** One (possibly escaped) character inside a literal or class. */
  private char(context: string): number {
    const start = this.pos;
    const c = this.peek();
    if (c === undefined) this.fail(`unterminated ${context}`);
    if (c === "\\") {
      const e = this.peek(1);
      this.pos += 2;
      switch (e) {
        case "x":
          return this.hex(2, start);
        case "u":
          return this.hex(4, start);
        case "U":
          return this.hex(8, start);
        case "t":
          return 9;
        case "r":
          return 13;
        case "n":
          return 10;
        case "\\":
        case '"':
        case "[":
        case "]":
        case "-":
          return e.charCodeAt(0);
        default:
          this.fail(`unknown escape '\\${e ?? ""}'`, start);
      }
    }
    const cp = this.src.codePointAt(this.pos)!;
    this.pos += cp > 0xffff ? 2 : 1;
    return cp;
  }

  parseGrammar(): Grammar {
    const rules: Rule[] = [];
    this.space(true);
    while (this.pos < this.src.length) {
      rules.push(this.rule());
    }
    return { rules };
  }

  private rule(): Rule {
    const start = this.pos;
    if (!isWordChar(this.peek())) this.fail(`expected a rule name, found ${this.describeHere()}`);
    const name = this.name();
    this.space(false);
    if (this.src.slice(this.pos, this.pos + 3) !== "::=") {
      this.fail(`expected '::=' after rule name '${name}', found ${this.describeHere()}`);
    }
    this.pos += 3;
    this.space(true);
    const body = this.alternates(false);
    const c = this.peek();
    if (c === "\r") this.pos += this.peek(1) === "\n" ? 2 : 1;
    else if (c === "\n") this.pos++;
    else if (c !== undefined) {
      this.fail(c === ")" ? "unbalanced ')'" : `unexpected ${this.describeHere()} in rule '${name}'`);
    }
    this.space(true);
    const rule: Rule = { name, body };
    setLocation(rule, this.locAt(start));
    return rule;
  }

  private alternates(nested: boolean): Expr {
    const alts: Expr[] = [this.sequence(nested)];
    while (this.peek() === "|") {
      this.pos++;
      this.space(true);
      alts.push(this.sequence(nested));
    }
    return alts.length === 1 ? alts[0]! : { kind: "alt", alts };
  }

  private sequence(nested: boolean): Expr {
    const items: Expr[] = [];
    for (;;) {
      const start = this.pos;
      const c = this.peek();
      let atom: Expr | undefined;
      if (c === '"') {
        this.pos++;
        let value = "";
        while (this.peek() !== '"') {
          if (this.pos >= this.src.length) this.fail("unterminated string literal", start);
          value += String.fromCodePoint(this.char("string literal"));
        }
        this.pos++;
        atom = { kind: "lit", value };
      } else if (c === "[") {
        this.pos++;
        let negated = false;
        if (this.peek() === "^") {
          negated = true;
          this.pos++;
        }
        const ranges: CodeRange[] = [];
        while (this.peek() !== "]") {
          if (this.pos >= this.src.length) this.fail("unterminated character class", start);
          const lo = this.char("character class");
          let hi = lo;
          if (this.peek() === "-" && this.peek(1) !== "]") {
            this.pos++;
            if (this.pos >= this.src.length) this.fail("unterminated character class", start);
            const rangeStart = this.pos;
            hi = this.char("character class");
            if (hi < lo) this.fail("character range is out of order", rangeStart - 1);
          }
          ranges.push([lo, hi]);
        }
        // llama.cpp's parser emits no element for an empty class: `[^]*` fails to
        // load there and a bare `[^]` matches nothing. Refused here instead.
        if (ranges.length === 0) this.fail("empty character class", start);
        this.pos++;
        atom = { kind: "class", negated, ranges };
      } else if (c === "<" || c === "!") {
        let negated = false;
        if (c === "!") {
          negated = true;
          this.pos++;
          if (this.peek() !== "<") this.fail(`expected '<' after '!', found ${this.describeHere()}`);
        }
        this.pos++;
        if (this.peek() === "[") {
          this.pos++;
          const id = this.int();
          if (this.peek() !== "]") this.fail(`expected ']' in token reference, found ${this.describeHere()}`);
          this.pos++;
          if (this.peek() !== ">") this.fail(`expected '>' in token reference, found ${this.describeHere()}`);
          this.pos++;
          atom = { kind: "token", negated, id };
        } else {
          const end = this.src.indexOf(">", this.pos);
          if (end < 0) this.fail("unterminated token reference", start);
          const text = this.src.slice(this.pos, end);
          if (text === "") this.fail("empty token reference", start);
          this.pos = end + 1;
          atom = { kind: "token", negated, text };
        }
      } else if (isWordChar(c)) {
        atom = { kind: "ref", name: this.name() };
      } else if (c === "(") {
        this.pos++;
        this.space(true);
        atom = this.alternates(true);
        if (this.peek() !== ")") {
          this.fail(
            this.pos >= this.src.length ? "unclosed '('" : `expected ')', found ${this.describeHere()}`,
            this.pos >= this.src.length ? start : this.pos,
          );
        }
        this.pos++;
      } else if (c === ".") {
        this.pos++;
        atom = { kind: "any" };
      } else if (c === "*" || c === "+" || c === "?" || c === "{") {
        if (items.length === 0) this.fail(`'${c}' has nothing to repeat`);
        const last = items.pop()!;
        const [min, max] = this.postfix();
        const rep: Expr = { kind: "repeat", body: last, min, max };
        setLocation(rep, this.locAt(start));
        items.push(rep);
        this.space(nested);
        continue;
      } else {
        break;
      }
      setLocation(atom, this.locAt(start));
      items.push(atom);
      this.space(nested);
    }
    return items.length === 1 ? items[0]! : { kind: "seq", items };
  }

  private postfix(): [number, number | null] {
    const c = this.peek()!;
    const start = this.pos;
    this.pos++;
    if (c === "*") return [0, null];
    if (c === "+") return [1, null];
    if (c === "?") return [0, 1];
    // {m}, {m,}, {m,n}
    this.space(false);
    if (!isDigit(this.peek())) this.fail(`expected an integer after '{', found ${this.describeHere()}`);
    const min = this.int();
    this.space(false);
    let max: number | null = min;
    if (this.peek() === ",") {
      this.pos++;
      this.space(false);
      max = isDigit(this.peek()) ? this.int() : null;
      this.space(false);
    }
    if (this.peek() !== "}") this.fail(`expected '}' to close repetition, found ${this.describeHere()}`);
    this.pos++;
    if (min > MAX_COUNT || (max !== null && max > MAX_COUNT)) {
      this.fail(`repetition count above ${MAX_COUNT} (llama.cpp's limit)`, start);
    }
    if (max !== null && max < min) this.fail(`repetition {${min},${max}} has max below min`, start);
    return [min, max];
  }
}

/** Parse GBNF source text; throws GbnfSyntaxError with line and column. */
export function parseGbnf(src: string): Grammar {
  return new Parser(src).parseGrammar();
}

/**
 * How many rules the text defines (its `::=` outside literals, classes and
 * comments), found in one pass without building anything: lets a client's
 * grammar with far too many rules be refused before it is parsed.
 */
export function countRuleHeads(src: string): number {
  let n = 0;
  for (let i = 0; i < src.length; i++) {
    const c = src.charCodeAt(i);
    if (c === 0x22 || c === 0x5b) {
      // "literal" or [class]: skip to the closing quote or bracket, over escapes.
      const close = c === 0x22 ? 0x22 : 0x5d;
      for (i++; i < src.length && src.charCodeAt(i) !== close; i++) if (src.charCodeAt(i) === 0x5c) i++;
    } else if (c === 0x23) {
      while (i < src.length && src.charCodeAt(i) !== 0x0a) i++;
    } else if (c === 0x3a && src.startsWith("::=", i)) {
      n++;
      i += 2;
    }
  }
  return n;
}
