// Manual cross-check against llama.cpp's own server (not part of `bun test`).
//
// Start the server first, e.g.
//   LD_LIBRARY_PATH=/work/shared/anchors/llama.cpp /work/shared/anchors/llama.cpp/llama-server \
//     -m /work/shared/models/stories260K.gguf -c 2048 -np 1 -t 2 --host 127.0.0.1 --port 18710 &
// then
//   bun test/grammar/llama-crosscheck.ts [--url http://127.0.0.1:18710] [--seeds 2] [--n-predict 200]
//
// For every accepted corpus schema (plus json_object) it sends the compiled
// grammar to /completion and reports whether llama.cpp's grammar parser took
// it, and whether the constrained output (when generation finished within
// n_predict) is JSON that ajv validates.

import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { compileJsonSchema, jsonObjectGrammar } from "../../grammar/index.ts";
import { accepted } from "./corpus/index.ts";

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const url = arg("--url", "http://127.0.0.1:18710");
const seeds = Number(arg("--seeds", "2"));
const nPredict = Number(arg("--n-predict", "200"));
const only = arg("--only", "");
// When no run finished within n-predict, try once more with this many tokens.
const retryPredict = Number(arg("--retry-n-predict", "0"));

const a20 = new Ajv2020({ strict: false });
addFormats(a20);
const a07 = new Ajv({ strict: false });
addFormats(a07);

type Row = {
  name: string;
  parsed: boolean;
  runs: number;
  complete: number;
  valid: number;
  invalid: string[];
  error?: string;
};
const rows: Row[] = [];

const cases = [
  {
    name: "json_object",
    gbnf: jsonObjectGrammar(),
    validate: (v: unknown) => v !== null && typeof v === "object" && !Array.isArray(v),
  },
  ...accepted
    .filter((c) => !c.ignored?.length && (only === "" || c.name.includes(only)))
    .map((c) => {
      const v = (c.draft === "07" ? a07 : a20).compile(c.schema as object);
      return {
        name: c.name,
        gbnf: compileJsonSchema(c.schema, c.options).gbnf,
        validate: (x: unknown) => v(x) as boolean,
      };
    }),
];

for (const c of cases) {
  const row: Row = { name: c.name, parsed: true, runs: 0, complete: 0, valid: 0, invalid: [] };
  const plan = Array.from({ length: seeds }, (_, i) => ({ seed: i + 1, n: nPredict }));
  if (retryPredict > 0) plan.push({ seed: 100, n: retryPredict });
  for (const [i, { seed, n }] of plan.entries()) {
    if (i === seeds && row.complete > 0) break; // the retry is only for schemas with no finished run
    const res = await fetch(`${url}/completion`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Once", n_predict: n, grammar: c.gbnf, temperature: 1, seed }),
    });
    const body = (await res.json()) as { content?: string; stop_type?: string; error?: { message?: string } };
    if (!res.ok) {
      row.parsed = false;
      row.error = body.error?.message ?? `HTTP ${res.status}`;
      break;
    }
    row.runs++;
    const text = body.content ?? "";
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      continue; // generation stopped at n_predict before the grammar finished
    }
    row.complete++;
    if (c.validate(value)) row.valid++;
    else row.invalid.push(text.slice(0, 200));
  }
  rows.push(row);
  const status = row.parsed ? `complete ${row.complete}/${row.runs}, valid ${row.valid}` : `REJECTED: ${row.error}`;
  console.log(
    `${row.invalid.length ? "!!" : "  "} ${c.name}: ${status}${row.invalid.length ? ` INVALID: ${row.invalid.join(" | ")}` : ""}`,
  );
}

const parsed = rows.filter((r) => r.parsed).length;
const complete = rows.reduce((n, r) => n + r.complete, 0);
const valid = rows.reduce((n, r) => n + r.valid, 0);
const invalid = rows.reduce((n, r) => n + r.invalid.length, 0);
console.log(
  `\ngrammars sent: ${rows.length}, accepted by llama.cpp: ${parsed}, runs: ${rows.reduce((n, r) => n + r.runs, 0)}, complete outputs: ${complete}, valid: ${valid}, invalid: ${invalid}`,
);
console.log(`schemas with at least one complete, valid output: ${rows.filter((r) => r.valid > 0).length}`);
