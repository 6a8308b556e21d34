// Parser for the ECMAScript regular expression subset that JSON Schema
// `pattern` uses, with the semantics ajv gives it: the `u` flag, and search
// (RegExp.prototype.test) semantics — a pattern matches if it matches
// anywhere unless it is anchored with ^ / $.
//
// Supported: literals and escapes, classes (incl. \d \w \s and negations,
// ranges, [^...]), `.`, groups (capturing, named, non-capturing),
// alternation, quantifiers * + ? {m} {m,} {m,n} and their lazy forms, and
// anchors ^ / $ at the start / end of top-level alternatives. Refused with a
// RegexError: lookarounds, backreferences, word boundaries, unicode property
// escapes, anchors anywhere else.

import type { CharSet } from "../charset.ts";
import * as cs from "../charset.ts";
import { DEFAULT_LIMITS } from "../limits.ts";

export type RNode =
  | { t: "set"; set: CharSet }
  | { t: "seq"; items: RNode[] }
  | { t: "alt"; alts: RNode[] }
  | { t: "rep"; body: RNode; min: number; max: number | null };

/** Largest {m,n} count accepted: DEFAULT_LIMITS.maxCount (../limits.ts); beyond it counts lose precision. */
const MAX_QUANTIFIER = DEFAULT_LIMITS.maxCount;

export class RegexError extends Error {
  /** True for valid ECMAScript that this translator does not support. */
  readonly unsupported: boolean;
  constructor(message: string, unsupported: boolean) {
    super(message);
    this.name = "RegexError";
    this.unsupported = unsupported;
  }
}

const SYNTAX_CHARS = "^$\\.*+?()[]{}|/";

class RegexParser {
  private pos = 0;
  constructor(private readonly src: string) {}

  private peek(k = 0): string | undefined {
    return this.src[this.pos + k];
  }

  private unsupported(what: string): never {
    throw new RegexError(`${what} (at offset ${this.pos}) is not supported in patterns`, true);
  }

  private invalid(what: string): never {
    throw new RegexError(`invalid regular expression: ${what} at offset ${this.pos}`, false);
  }

  parseTop(): RNode {
    const alts: RNode[] = [];
    for (;;) {
      let start = false;
      let end = false;
      if (this.peek() === "^") {
        start = true;
        this.pos++;
      }
      const items = this.sequence(0);
      if (this.peek() === "$") {
        this.pos++;
        end = true;
        if (this.pos < this.src.length && this.peek() !== "|") this.unsupported("'$' before the end of the pattern");
      }
      // Search semantics: unanchored sides may be surrounded by anything.
      const anyStar: RNode = { t: "rep", body: { t: "set", set: cs.ANY_CHAR }, min: 0, max: null };
      alts.push(seqOf([...(start ? [] : [anyStar]), ...items, ...(end ? [] : [anyStar])]));
      if (this.peek() === "|") {
        this.pos++;
        continue;
      }
      if (this.pos < this.src.length) this.invalid(`unexpected '${this.peek()}'`);
      break;
    }
    return alts.length === 1 ? alts[0]! : { t: "alt", alts };
  }

  private alternation(depth: number): RNode {
    const alts: RNode[] = [seqOf(this.sequence(depth))];
    while (this.peek() === "|") {
      this.pos++;
      alts.push(seqOf(this.sequence(depth)));
    }
    return alts.length === 1 ? alts[0]! : { t: "alt", alts };
  }

  private sequence(depth: number): RNode[] {
    const items: RNode[] = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined || c === "|" || (c === ")" && depth > 0)) return items;
      if (c === "$" && depth === 0) return items;
      if (c === "^") this.unsupported("'^' after the start of the pattern");
      if (c === "$") this.unsupported("'$' inside a group");
      const atom = this.atom(depth);
      items.push(this.quantified(atom));
    }
  }

  private quantified(atom: RNode): RNode {
    let node = atom;
    const c = this.peek();
    let min: number;
    let max: number | null;
    if (c === "*") [min, max] = [0, null];
    else if (c === "+") [min, max] = [1, null];
    else if (c === "?") [min, max] = [0, 1];
    else if (c === "{") {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.pos));
      if (!m) this.invalid("lone '{'");
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === "" ? null : Number(m[3]);
      if (max !== null && max < min) this.invalid("quantifier range out of order");
      if ((max ?? min) > MAX_QUANTIFIER) {
        throw new RegexError(
          `quantifier count ${max ?? min} at offset ${this.pos} is above the limit of ${MAX_QUANTIFIER} (maxCount)`,
          true,
        );
      }
      this.pos += m[0].length - 1;
    } else {
      return node;
    }
    this.pos++;
    if (this.peek() === "?") this.pos++; // lazy: same language
    if ("*+?{".includes(this.peek() ?? "")) this.invalid("nothing to repeat");
    node = { t: "rep", body: node, min, max };
    return node;
  }

  private atom(depth: number): RNode {
    const c = this.peek()!;
    if (c === "(") {
      this.pos++;
      if (this.peek() === "?") {
        const rest = this.src.slice(this.pos, this.pos + 3);
        if (rest.startsWith("?:")) this.pos += 2;
        else if (rest.startsWith("?=") || rest.startsWith("?!")) this.unsupported("lookahead");
        else if (rest.startsWith("?<=") || rest.startsWith("?<!")) this.unsupported("lookbehind");
        else if (rest.startsWith("?<")) {
          const close = this.src.indexOf(">", this.pos);
          if (close < 0) this.invalid("unterminated group name");
          this.pos = close + 1;
        } else this.unsupported("group modifier '(?'");
      }
      const inner = this.alternation(depth + 1);
      if (this.peek() !== ")") this.invalid("missing ')'");
      this.pos++;
      return inner;
    }
    if (c === "[") return { t: "set", set: this.charClass() };
    if (c === ".") {
      this.pos++;
      return { t: "set", set: cs.DOT };
    }
    if (c === "\\") return { t: "set", set: this.atomEscape() };
    if (c === ")") this.invalid("unmatched ')'");
    if ("*+?{".includes(c)) this.invalid("nothing to repeat");
    if (c === "]" || c === "}") this.invalid(`lone '${c}'`);
    const cp = this.src.codePointAt(this.pos)!;
    this.pos += cp > 0xffff ? 2 : 1;
    return { t: "set", set: cs.single(cp) };
  }

  private atomEscape(): CharSet {
    const e = this.peek(1);
    if (e === "b" || e === "B") this.unsupported(`word boundary '\\${e}'`);
    if (e !== undefined && e >= "1" && e <= "9") this.unsupported("backreference");
    if (e === "k") this.unsupported("named backreference");
    return this.classEscape(false);
  }

  /** An escape inside or outside a class; returns its set. */
  private classEscape(inClass: boolean): CharSet {
    this.pos++; // backslash
    const e = this.peek();
    if (e === undefined) this.invalid("trailing backslash");
    this.pos++;
    switch (e) {
      case "d":
        return cs.DIGIT;
      case "D":
        return cs.complement(cs.DIGIT);
      case "w":
        return cs.WORD;
      case "W":
        return cs.complement(cs.WORD);
      case "s":
        return cs.SPACE;
      case "S":
        return cs.complement(cs.SPACE);
      case "p":
      case "P":
        this.pos -= 2;
        this.unsupported("unicode property escape");
    }
    return cs.single(this.charEscapeValue(e, inClass));
  }

  private charEscapeValue(e: string, inClass: boolean): number {
    switch (e) {
      case "t":
        return 9;
      case "n":
        return 10;
      case "v":
        return 11;
      case "f":
        return 12;
      case "r":
        return 13;
      case "b":
        if (inClass) return 8;
        break;
      case "0":
        if (!/[0-9]/.test(this.peek() ?? "")) return 0;
        this.invalid("octal escape");
        break;
      case "c": {
        const l = this.peek();
        if (l && /[a-zA-Z]/.test(l)) {
          this.pos++;
          return l.charCodeAt(0) % 32;
        }
        this.invalid("bad control escape");
        break;
      }
      case "x": {
        const h = this.src.slice(this.pos, this.pos + 2);
        if (!/^[0-9a-fA-F]{2}$/.test(h)) this.invalid("bad \\x escape");
        this.pos += 2;
        return parseInt(h, 16);
      }
      case "u":
        return this.unicodeEscape();
      case "-":
        if (inClass) return 0x2d;
        break;
    }
    if (SYNTAX_CHARS.includes(e)) return e.charCodeAt(0);
    this.invalid(`unknown escape '\\${e}'`);
  }

  private unicodeEscape(): number {
    if (this.peek() === "{") {
      const close = this.src.indexOf("}", this.pos);
      const h = this.src.slice(this.pos + 1, close);
      if (close < 0 || !/^[0-9a-fA-F]+$/.test(h) || parseInt(h, 16) > cs.MAX_CP) this.invalid("bad \\u{} escape");
      this.pos = close + 1;
      return parseInt(h, 16);
    }
    const h = this.src.slice(this.pos, this.pos + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(h)) this.invalid("bad \\u escape");
    this.pos += 4;
    const v = parseInt(h, 16);
    // A surrogate pair written as two escapes is one code point under /u.
    if (v >= 0xd800 && v <= 0xdbff) {
      const m = /^\\u(d[c-f][0-9a-f]{2})/i.exec(this.src.slice(this.pos));
      if (m) {
        this.pos += 6;
        return 0x10000 + ((v - 0xd800) << 10) + (parseInt(m[1]!, 16) - 0xdc00);
      }
    }
    return v;
  }

  private charClass(): CharSet {
    this.pos++; // [
    let negated = false;
    if (this.peek() === "^") {
      negated = true;
      this.pos++;
    }
    let set: CharSet = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined) this.invalid("unterminated character class");
      if (c === "]") {
        this.pos++;
        break;
      }
      const lo = this.classAtom();
      if (this.peek() === "-" && this.peek(1) !== "]" && this.peek(1) !== undefined) {
        this.pos++;
        const hi = this.classAtom();
        if (lo.length !== 1 || hi.length !== 1 || lo[0]![0] !== lo[0]![1] || hi[0]![0] !== hi[0]![1]) {
          this.invalid("class escape in a range");
        }
        if (hi[0]![0] < lo[0]![0]) this.invalid("range out of order in character class");
        set = cs.union(set, cs.range(lo[0]![0], hi[0]![0]));
      } else {
        set = cs.union(set, lo);
      }
    }
    return negated ? cs.complement(set) : set;
  }

  private classAtom(): CharSet {
    if (this.peek() === "\\") return this.classEscape(true);
    const cp = this.src.codePointAt(this.pos)!;
    this.pos += cp > 0xffff ? 2 : 1;
    return cs.single(cp);
  }
}

function seqOf(items: RNode[]): RNode {
  return items.length === 1 ? items[0]! : { t: "seq", items };
}

/**
 * Parse a JSON Schema pattern into a regex tree describing the full set of
 * strings it accepts (search semantics already folded in).
 */
export function parseRegex(pattern: string): RNode {
  try {
    new RegExp(pattern, "u");
  } catch (e) {
    throw new RegexError(`invalid regular expression: ${(e as Error).message}`, false);
  }
  return new RegexParser(pattern).parseTop();
}

/** Shortest and longest string lengths (in code points); null = unbounded. */
export function lengthRange(n: RNode): [number, number | null] {
  switch (n.t) {
    case "set":
      return [1, 1];
    case "seq":
      return n.items.reduce<[number, number | null]>(
        ([lo, hi], x) => {
          const [a, b] = lengthRange(x);
          return [lo + a, hi === null || b === null ? null : hi + b];
        },
        [0, 0],
      );
    case "alt": {
      const rs = n.alts.map(lengthRange);
      return [
        Math.min(...rs.map((r) => r[0])),
        rs.some((r) => r[1] === null) ? null : Math.max(...rs.map((r) => r[1]!)),
      ];
    }
    case "rep": {
      const [a, b] = lengthRange(n.body);
      const hi = b === 0 ? 0 : n.max === null || b === null ? null : b * n.max;
      return [a * n.min, hi];
    }
  }
}
