// `superfluid serve`'s flags are declared once (src/cli/serve-flags.ts): the parser accepts
// exactly the declared flags, every option a flag sets has its declaration, and the grouped
// --help hides the expert tuning that --help-all lists (docs/cli.md#serve).
import { describe, expect, test } from "bun:test";
import { helpLines, synopsis } from "../../src/cli/flag-decl.ts";
import { FlagError, parseFlags } from "../../src/cli/flags.ts";
import { DERIVED_KEYS, parseServeOptions, serveUsage, type ServeOptions } from "../../src/cli/serve-options.ts";
import { HELP_FLAGS, SERVE_FLAGS, SERVE_SECTIONS } from "../../src/cli/serve-flags.ts";

const help = serveUsage();
const helpAll = serveUsage(true);
/** The flags a help text lists: the first column of its flag lines. */
const listed = (text: string) => [...text.matchAll(/^ {2}(-\S.*?)(?: {2,}|$)/gm)].map((m) => m[1]!.trimEnd());
const isExpert = (d: (typeof SERVE_FLAGS)[number]) => "expert" in d && d.expert === true;

describe("serve flag declarations", () => {
  test("each flag, alias and key is declared once", () => {
    const names = SERVE_FLAGS.flatMap((d) => [d.flag, ...("aliases" in d ? d.aliases : [])]);
    const negated = SERVE_FLAGS.filter((d) => "negatable" in d && d.negatable).map((d) => `no-${d.flag}`);
    const all = [...names, ...negated, ...HELP_FLAGS];
    expect(all.filter((n, i) => all.indexOf(n) !== i)).toEqual([]);
    const keys = SERVE_FLAGS.map((d) => d.key);
    expect(keys.filter((k, i) => keys.indexOf(k) !== i)).toEqual([]);
  });

  test("the parser accepts the declared flags and nothing else", () => {
    const negated = SERVE_FLAGS.filter((d) => "negatable" in d && d.negatable).map((d) => `--no-${d.flag}`);
    const spellings = [
      ...SERVE_FLAGS.flatMap((d) => [d.flag, ...("aliases" in d ? d.aliases : [])].map((n) => `--${n}`)),
      ...negated,
    ];
    for (const flag of spellings) {
      try {
        parseServeOptions([flag, "x"], { HOME: "/h" });
      } catch (err) {
        expect((err as Error).message).not.toContain("unknown flag");
      }
    }
    expect(() => parseServeOptions(["--not-declared"], { HOME: "/h" })).toThrow("unknown flag --not-declared");
    expect(() => parseServeOptions(["--no-verbose"], { HOME: "/h" })).toThrow("unknown flag --no-verbose");
  });

  test("every option comes from a declared flag or is one of the derived ones", () => {
    const o = parseServeOptions(
      ["--web", "127.0.0.1:0", "--max-context", "4096", "--kv-pool", "8192", "--max-tokens", "9"]
        .concat(["--class-lanes", "agent=1"])
        .concat(["--fim-model", "f", "--fim-max-context", "9", "--files-max-bytes", "9", "--files-expiry", "9"])
        .concat(["--host-cache-mb", "9", "--log-dir", "/l", "--log-file", "/f", "--ready-file", "/r"])
        .concat(["--speculate", "auto", "--spec-max-temperature", "1"])
        .concat(["--device", "Vulkan0", "--tensor-split", "1", "--rpc", "127.0.0.1:50052"]),
      { HOME: "/h" },
    ) as ServeOptions;
    const direct = SERVE_FLAGS.filter((d) => !("internal" in d)).map((d) => d.key as string);
    const known = new Set([...direct, ...DERIVED_KEYS]);
    expect(Object.keys(o).filter((k) => !known.has(k))).toEqual([]);
    // Every flag copied into the options as it is shows up there when given.
    expect(direct.filter((k) => !(k in o))).toEqual([]);
    expect(DERIVED_KEYS.filter((k) => !(k in o))).toEqual([]);
  });

  test("-v is a switch only where it is declared: other one-dash arguments stay bare", () => {
    const specs = { verbose: { short: "v" } };
    const parsed = parseFlags(["-v", "-x", "m"], specs);
    expect(parsed).toMatchObject({ switches: new Set(["verbose"]), positional: ["-x", "m"] });
    expect(() => parseFlags(["--verbose=1"], specs)).toThrow(FlagError);
  });
});

describe("serve --help and --help-all", () => {
  test("--help and --help-all win over anything else on the line", () => {
    expect(parseServeOptions(["--help", "--max-batch", "lots"])).toBe("help");
    expect(parseServeOptions(["--kv-bits", "8", "--help-all"])).toBe("help-all");
  });

  test("the help is grouped under the sections' titles, in order; --help leaves out the refused section", () => {
    const titles = SERVE_SECTIONS.map((s) => s.title);
    const headings = (text: string) => [...text.matchAll(/^(\w[\w -]*):$/gm)].map((m) => m[1]);
    expect(headings(helpAll)).toEqual(titles);
    expect(headings(help)).toEqual(titles.filter((t) => t !== "Refused by this runtime"));
  });

  test("--help-all lists every declared flag under its section's heading", () => {
    const inSection = (id: string) => SERVE_FLAGS.filter((d) => d.section === id).map((d) => synopsis(d));
    expect(listed(helpAll)).toEqual(SERVE_SECTIONS.flatMap((s) => inSection(s.id)));
    for (const s of SERVE_SECTIONS) {
      const section = helpAll.split(`\n${s.title}:\n`)[1]!.split("\n\n")[0]!;
      for (const d of SERVE_FLAGS.filter((d) => d.section === s.id)) expect(section).toContain(synopsis(d));
    }
  });

  test("--help hides the expert tuning (--spec-* beyond --speculate, --spec-draft-tokens) and refused flags", () => {
    expect(listed(help)).toEqual(
      SERVE_FLAGS.filter((d) => !isExpert(d))
        .map((d) => synopsis(d))
        .sort(byHelpOrder),
    );
    for (const d of SERVE_FLAGS.filter(isExpert)) expect(help).not.toContain(`--${d.flag} `);
    const spec = SERVE_FLAGS.filter((d) => d.flag.startsWith("spec"));
    expect(spec.filter((d) => !isExpert(d)).map((d) => d.flag)).toEqual(["speculate", "spec-draft-tokens"]);
    expect(SERVE_FLAGS.filter((d) => "refused" in d && !isExpert(d)).map((d) => d.flag)).toEqual([]);
    expect(help).toContain("--help-all");
  });

  test("lines fit in 100 columns and every flag's notes name its default and variable", () => {
    for (const line of helpAll.split("\n")) expect(line.length).toBeLessThanOrEqual(100);
    const quiet = helpLines(SERVE_FLAGS.find((d) => d.flag === "quiet")!).join(" ");
    expect(quiet).toContain("SUPERFLUID_QUIET=1");
    const batch = helpLines(SERVE_FLAGS.find((d) => d.flag === "max-batch")!).join(" ");
    expect(batch).toContain("alias --max-batch-size; default 8");
  });
});

/** Sorts synopses as --help lists them: by section, then declaration order. */
function byHelpOrder(a: string, b: string): number {
  const rank = (s: string) => {
    const i = SERVE_FLAGS.findIndex((d) => synopsis(d) === s);
    return SERVE_SECTIONS.findIndex((s) => s.id === SERVE_FLAGS[i]!.section) * 1000 + i;
  };
  return rank(a) - rank(b);
}
