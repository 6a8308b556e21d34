// docs/cli.md's serve flag tables are generated from src/cli/serve-flags.ts
// (docs/cli.md#serve): this fails while they differ, naming the command that rewrites them.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { CLI_DOC, flagTable, regenerate, regions, REGENERATE } from "../../src/cli/flag-docs.ts";
import { SERVE_FLAGS, SERVE_TABLES } from "../../src/cli/serve-flags.ts";

const doc = readFileSync(CLI_DOC, "utf8");

describe("docs/cli.md flag tables", () => {
  test("each table has one region, in the order of SERVE_TABLES, and every flag is in one", () => {
    expect(regions(doc)).toEqual([...SERVE_TABLES]);
    const tables = new Set<string>(SERVE_TABLES);
    expect(SERVE_FLAGS.filter((d) => !tables.has(d.table)).map((d) => d.flag)).toEqual([]);
  });

  test("the tables are the ones the declarations generate", () => {
    const stale = regions(doc).filter((id) => !doc.includes(`<!-- serve-flags:${id} -->\n${flagTable(id)}\n`));
    if (regenerate(doc) !== doc) {
      throw new Error(`docs/cli.md is out of date (tables ${stale.join(", ")}); run: ${REGENERATE}`);
    }
    expect(stale).toEqual([]);
  });

  test("every flag has a row naming it, and a refused flag's row gives its message", () => {
    for (const d of SERVE_FLAGS) {
      const table = flagTable(d.table);
      expect(table).toContain(`\`--${d.flag}`);
      if (d.table === "refused" && "refused" in d) expect(table).toContain(d.refused.message);
    }
  });
});
