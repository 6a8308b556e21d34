// A small flag parser for `superfluid serve`: `--flag value` or `--flag=value`,
// the last occurrence of a scalar wins, repeatable flags accumulate, and an
// unknown flag is refused naming the closest valid one. A single-dash spelling
// (the switch `-v`, llama-server's `-ctk VALUE`) is read only where a spec
// names it; any other `-x` stays a bare argument.

export interface FlagSpec {
  /** Takes a value (otherwise a switch). */
  value?: boolean;
  repeatable?: boolean;
  /** Other spellings of the same flag. */
  aliases?: readonly string[];
  /** A single-dash spelling (`v` for `-v`, `ctk` for `-ctk`). */
  short?: string;
}

/** A command line that cannot be run as given: exit 2 with the message. */
export class UsageError extends Error {}

/** A command line the parser itself refuses (an unknown flag, a missing value). */
export class FlagError extends UsageError {}

export interface ParsedFlags {
  values: Map<string, string[]>;
  switches: Set<string>;
  positional: string[];
}

function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
  return d[a.length]![b.length]!;
}

export function closestFlag(name: string, known: string[]): string {
  return known.reduce((best, k) => (distance(name, k) < distance(name, best) ? k : best), known[0]!);
}

export function parseFlags(argv: string[], specs: Record<string, FlagSpec>): ParsedFlags {
  const canonical = new Map<string, string>();
  const shorts = new Map<string, string>();
  for (const [name, spec] of Object.entries(specs)) {
    canonical.set(name, name);
    for (const a of spec.aliases ?? []) canonical.set(a, name);
    if (spec.short !== undefined) shorts.set(`-${spec.short}`, name);
  }
  const out: ParsedFlags = { values: new Map(), switches: new Set(), positional: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const short = shorts.get(arg);
    if (short !== undefined) {
      const spec = specs[short]!;
      if (!spec.value) {
        out.switches.add(short);
        continue;
      }
      const value = argv[++i];
      if (value === undefined) throw new FlagError(`${arg} needs a value`);
      const list = out.values.get(short) ?? [];
      out.values.set(short, spec.repeatable ? [...list, value] : [value]);
      continue;
    }
    if (!arg.startsWith("--") || arg === "--") {
      out.positional.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const given = eq > 0 ? arg.slice(2, eq) : arg.slice(2);
    const name = canonical.get(given);
    if (!name) {
      throw new FlagError(`unknown flag --${given}; did you mean --${closestFlag(given, [...canonical.keys()])}?`);
    }
    const spec = specs[name]!;
    if (!spec.value) {
      if (eq > 0) throw new FlagError(`--${given} takes no value`);
      out.switches.add(name);
      continue;
    }
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined) throw new FlagError(`--${given} needs a value`);
    const list = out.values.get(name) ?? [];
    out.values.set(name, spec.repeatable ? [...list, value] : [value]);
  }
  return out;
}
