// docs/cli.md's serve flag tables are generated from src/cli/serve-flags.ts
// (docs/cli.md#serve): this fails while they differ, naming the command that rewrites them.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { CLI_DOC, flagTable, regenerate, regions, REGENERATE } from "../../src/cli/flag-docs.ts";
import { SERVE_FLAGS, SERVE_SECTIONS } from "../../src/cli/serve-flags.ts";

const doc = readFileSync(CLI_DOC, "utf8");

describe("docs/cli.md flag tables", () => {
  test("each section has one region, in the order of SERVE_SECTIONS, and every flag is in one", () => {
    const ids = SERVE_SECTIONS.map((s) => s.id);
    expect(regions(doc)).toEqual(ids);
    expect(SERVE_FLAGS.filter((d) => !(ids as string[]).includes(d.section)).map((d) => d.flag)).toEqual([]);
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
      const table = flagTable(d.section);
      expect(table).toContain(`\`--${d.flag}`);
      if (d.section === "refused" && "refused" in d) expect(table).toContain(d.refused.message);
    }
  });
});
