// The flag tables of docs/cli.md#serve, generated from the declarations in serve-flags.ts.
// Each table sits between `<!-- serve-flags:ID -->` and `<!-- /serve-flags -->`; the prose
// around them is written by hand. `bun run docs:cli` (bun src/cli/flag-docs.ts --write)
// rewrites them; test/cli/flag-docs.test.ts fails while docs/cli.md differs.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { envNote, shownDefault, synopsis, type FlagDecl } from "./flag-decl.ts";
import { SERVE_FLAGS, SERVE_SECTIONS } from "./serve-flags.ts";

export const CLI_DOC = join(import.meta.dir, "../../docs/cli.md");
export const REGENERATE = "bun run docs:cli";

const REGION = /<!-- serve-flags:([a-z-]+) -->\n[\s\S]*?<!-- \/serve-flags -->/g;

const code = (s: string) => `\`${s}\``;
/** A table cell: a `|` would end it, inside code spans too. */
const cell = (s: string) => s.replace(/\|/g, "\\|");

function flagCell(d: FlagDecl): string {
  const aliases = (d.aliases ?? []).map((a) => `${code(`--${a}`)}`);
  return synopsis(d, code) + (aliases.length > 0 ? ` (alias ${aliases.join(", ")})` : "");
}

function defaultCell(d: FlagDecl): string {
  const env = envNote(d, code);
  return env === undefined ? shownDefault(d) : `${env}, else ${shownDefault(d)}`;
}

function meaningCell(d: FlagDecl): string {
  const text = d.help;
  return d.value !== undefined && d.repeatable ? `${text}; repeatable` : text;
}

/** One section's table rows: flag, default, meaning; the refused table gives each refusal's message. */
export function flagTable(section: string): string {
  const decls = (SERVE_FLAGS as readonly FlagDecl[]).filter((d) => d.section === section);
  if (section === "refused") {
    const rows = decls.map((d) => {
      const when = d.refused?.only ? ` (${d.refused.only.when})` : "";
      return `| ${cell(flagCell(d) + when)} | ${cell(code(d.refused!.message))} |`;
    });
    return ["| flag | message |", "|---|---|", ...rows].join("\n");
  }
  const rows = decls.map((d) => `| ${cell(flagCell(d))} | ${cell(defaultCell(d))} | ${cell(meaningCell(d))} |`);
  return ["| flag | default | meaning |", "|---|---|---|", ...rows].join("\n");
}

/** The document with every region's table generated again; throws on a region of no known table. */
export function regenerate(doc: string): string {
  return doc.replace(REGION, (_, id: string) => {
    if (!SERVE_SECTIONS.some((s) => s.id === id)) throw new Error(`docs/cli.md: no flag table '${id}'`);
    return `<!-- serve-flags:${id} -->\n${flagTable(id)}\n<!-- /serve-flags -->`;
  });
}

/** The table ids of the regions in the document, in order. */
export function regions(doc: string): string[] {
  return [...doc.matchAll(REGION)].map((m) => m[1]!);
}

if (import.meta.main) {
  const doc = readFileSync(CLI_DOC, "utf8");
  const next = regenerate(doc);
  if (process.argv.includes("--write")) {
    if (next !== doc) writeFileSync(CLI_DOC, next);
    console.log(next === doc ? "docs/cli.md is up to date" : "docs/cli.md: flag tables rewritten");
  } else if (next !== doc) {
    console.error(`docs/cli.md is out of date; run ${REGENERATE}`);
    process.exit(1);
  }
}
