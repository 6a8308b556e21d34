// A byte-level tokenizer for codec tests: each UTF-8 byte is one token
// (id 256 + byte, like byte fallback), control tokens get ids from 1, and,
// like llama.cpp, control-token text is only recognized with parseSpecial and
// renders as nothing unless asked for with `special`.
import type { Tokenizer } from "../../src/codec/tokenizer.ts";

export class FakeTokenizer implements Tokenizer {
  private readonly controls: string[];

  constructor(controls: string[] = ["<s>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]) {
    this.controls = controls;
  }

  id(control: string): number {
    const i = this.controls.indexOf(control);
    if (i < 0) throw new Error(`no control token ${control}`);
    return i + 1;
  }

  tokenize(text: string, opts: { addSpecial?: boolean; parseSpecial?: boolean }): number[] {
    const out: number[] = [];
    const bytes = (s: string) => {
      for (const b of new TextEncoder().encode(s)) out.push(256 + b);
    };
    if (!opts.parseSpecial) {
      bytes(text);
      return out;
    }
    let plain = "";
    for (let i = 0; i < text.length; ) {
      const hit = this.controls.filter((c) => text.startsWith(c, i)).sort((a, b) => b.length - a.length)[0];
      if (hit) {
        bytes(plain);
        plain = "";
        out.push(this.id(hit));
        i += hit.length;
      } else {
        plain += text[i];
        i++;
      }
    }
    bytes(plain);
    return out;
  }

  tokenBytes(token: number, special = true): Uint8Array {
    if (token >= 256) return Uint8Array.of(token - 256);
    const text = this.controls[token - 1];
    if (text === undefined) throw new Error(`unknown token ${token}`);
    return special ? new TextEncoder().encode(text) : new Uint8Array();
  }
}
