// Flags declared once: the shape of a declaration, and what is derived from a
// list of them: the parser's specs, the values read from a command line (with
// the option type inferred from each declaration's parse function) and the
// help text, grouped by section. The markdown tables of docs/cli.md come from flag-docs.ts.
import { UsageError, type FlagSpec, type ParsedFlags } from "./flags.ts";

export type Env = Record<string, string | undefined>;

/** A flag llama.cpp cannot honour: refused at startup with this message (docs/cli.md#accepted-and-refused-flags). */
export interface Refusal {
  readonly message: string;
  /** When only some values are refused: which, in words for the docs, and the test. */
  readonly only?: { readonly when: string; readonly test: (raw: string) => boolean };
}

interface DeclBase {
  /** The long name, without the dashes. */
  readonly flag: string;
  /** The property its value is read into. */
  readonly key: string;
  /** The section it is listed in: a --help heading, and the docs/cli.md table it is a row of. */
  readonly section: string;
  /**
   * What it does, in markdown: the docs table's meaning column as it is; --help shows its first
   * sentence as plain text (helpText), with the notes (repeatable, alias, default, variable) added.
   */
  readonly help: string;
  /** Plain text for --help, only where the first sentence of `help` does not sum the flag up. */
  readonly brief?: string;
  /** The default as shown (markdown; backticks are dropped in --help); else derived from `default`. */
  readonly shown?: string;
  /** The environment variable read when the flag is not given; a repeatable flag's holds a comma-separated list. */
  readonly env?: string;
  /** Listed by --help-all only. */
  readonly expert?: boolean;
  readonly aliases?: readonly string[];
  /** Read by a step after parsing rather than copied into the options as it is. */
  readonly internal?: boolean;
  readonly refused?: Refusal;
}

/** A flag that takes a value: `--flag VALUE` or `--flag=VALUE`. */
export interface ValueDecl<T = unknown> extends DeclBase {
  /** The value's name in the synopsis (`N`, `ADDR:PORT`). */
  readonly value: string;
  /** Checks and converts one value; what it throws becomes a UsageError naming the flag (asUsage). */
  readonly parse: (raw: string, flag: string) => T;
  /** Every occurrence counts, in order; the value is then a list (empty when none). */
  readonly repeatable?: boolean;
  /** A single-dash spelling, as llama-server's `-ctk` (`ctk`). */
  readonly short?: string;
  /** When neither the flag nor its variable is given; a function is called with the environment. */
  readonly default?: T | ((env: Env) => T);
}

/**
 * A switch. A negatable one is a pair (`--park` / `--no-park`): giving both is refused, unless
 * `bothOff`; its variable must be 1 or 0. A plain switch's variable turns it on when it is 1.
 */
export interface SwitchDecl extends DeclBase {
  readonly value?: undefined;
  readonly negatable?: boolean;
  readonly bothOff?: boolean;
  readonly short?: string;
  readonly default?: boolean;
}

export type FlagDecl = ValueDecl | SwitchDecl;

/** What one declaration reads to: a parse function's result (a list when repeatable), or a switch's on/off. */
type ValueOf<D> = D extends { parse: (raw: string, flag: string) => infer T }
  ? D extends { repeatable: true }
    ? T[]
    : T
  : boolean;

/** Whether a value is always there: repeatable lists, declared defaults, and plain switches. */
type Always<D> = D extends { repeatable: true }
  ? true
  : D extends { default: unknown }
    ? true
    : D extends { parse: unknown }
      ? false
      : D extends { negatable: true }
        ? false
        : true;

/** Every declaration's value by its key; those that may be absent are optional. */
export type FlagValues<Ds extends readonly FlagDecl[]> = {
  [D in Ds[number] as Always<D> extends true ? D["key"] : never]: ValueOf<D>;
} & {
  [D in Ds[number] as Always<D> extends true ? never : D["key"]]?: Exclude<ValueOf<D>, undefined>;
};

/** The keys of the declarations not marked `internal`: copied into the options as they are. */
export type DirectKey<Ds extends readonly FlagDecl[]> = Exclude<Ds[number], { internal: true }>["key"];

/** The parser's specs: each flag, its aliases, a negatable switch's `no-` form, and the meta flags. */
export function flagSpecs(decls: readonly FlagDecl[], meta: readonly string[] = []): Record<string, FlagSpec> {
  const specs: Record<string, FlagSpec> = {};
  for (const d of decls) {
    if (d.value !== undefined) {
      const aliases = d.aliases ? { aliases: d.aliases } : {};
      const short = d.short ? { short: d.short } : {};
      specs[d.flag] = { value: true, ...(d.repeatable ? { repeatable: true } : {}), ...aliases, ...short };
      continue;
    }
    specs[d.flag] = { ...(d.aliases ? { aliases: d.aliases } : {}), ...(d.short ? { short: d.short } : {}) };
    if (d.negatable) specs[`no-${d.flag}`] = {};
  }
  for (const name of meta) specs[name] = {};
  return specs;
}

/** Throws the refusal of the first refused flag given, in declaration order. */
export function checkRefusals(decls: readonly FlagDecl[], flags: ParsedFlags): void {
  for (const d of decls) {
    if (!d.refused) continue;
    const raw = d.value === undefined ? (flags.switches.has(d.flag) ? "" : undefined) : flags.values.get(d.flag)?.[0];
    const refused = raw !== undefined && (d.refused.only === undefined || d.refused.only.test(raw));
    if (refused) throw new UsageError(d.refused.message);
  }
}

function readSwitch(d: SwitchDecl, flags: ParsedFlags, env: Env): boolean | undefined {
  const on = flags.switches.has(d.flag);
  const off = d.negatable === true && flags.switches.has(`no-${d.flag}`);
  if (on && off) {
    if (d.bothOff) return false;
    throw new UsageError(`--${d.flag} and --no-${d.flag} contradict each other; give one`);
  }
  if (on || off) return on;
  const raw = d.env === undefined ? undefined : env[d.env];
  if (raw !== undefined && d.negatable) {
    if (raw !== "0" && raw !== "1") throw new UsageError(`${d.env} expects 1 or 0, got '${raw}'`);
    return raw === "1";
  }
  if (raw === "1") return true;
  return d.default ?? (d.negatable ? undefined : false);
}

/** A repeatable flag's variable as its values: comma-separated, blanks dropped. */
function listOf(raw: string | undefined): string[] | undefined {
  return raw
    ?.split(",")
    .map((v) => v.trim())
    .filter((v) => v !== "");
}

/**
 * The one place an error becomes a usage error (exit 2): `read`'s UsageError as it is; another error's
 * message names the flag, unless it names one already (`--flag expects …`, `--flag: why`). With `only`,
 * other kinds of error pass through.
 */
export function asUsage<T>(flag: string, read: () => T, only: new (...args: never[]) => Error = Error): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof UsageError || !(err instanceof only)) throw err;
    const message = err.message;
    if (message.startsWith("--")) throw new UsageError(message);
    throw new UsageError(`--${flag}${message.startsWith("expects ") ? " " : ": "}${message}`);
  }
}

/** Each declaration's value, in declaration order: the flag given, else its variable, else its default. */
export function readFlags<Ds extends readonly FlagDecl[]>(decls: Ds, flags: ParsedFlags, env: Env): FlagValues<Ds> {
  const out: Record<string, unknown> = {};
  for (const d of decls) {
    let value: unknown;
    if (d.value === undefined) value = readSwitch(d, flags, env);
    else if (d.repeatable) {
      const given = flags.values.get(d.flag) ?? (d.env === undefined ? undefined : listOf(env[d.env]));
      value = (given ?? []).map((raw) => asUsage(d.flag, () => d.parse(raw, d.flag)));
    } else {
      const raw = flags.values.get(d.flag)?.[0] ?? (d.env === undefined ? undefined : env[d.env]);
      value =
        raw !== undefined
          ? asUsage(d.flag, () => d.parse(raw, d.flag))
          : typeof d.default === "function"
            ? d.default(env)
            : d.default;
    }
    if (value !== undefined) out[d.key] = value;
  }
  return out as FlagValues<Ds>;
}

/** `--flag VALUE`, `--park / --no-park`, `-v, --verbose`. */
export function synopsis(d: FlagDecl, code: (s: string) => string = (s) => s): string {
  if (d.value !== undefined)
    return d.short ? `${code(`-${d.short}`)}, ${code(`--${d.flag} ${d.value}`)}` : code(`--${d.flag} ${d.value}`);
  if (d.negatable) return `${code(`--${d.flag}`)} / ${code(`--no-${d.flag}`)}`;
  return d.short ? `${code(`-${d.short}`)}, ${code(`--${d.flag}`)}` : code(`--${d.flag}`);
}

/** The default as shown: `shown`, else a plain default (on/off for switches), else none. */
export function shownDefault(d: FlagDecl): string {
  if (d.shown !== undefined) return d.shown;
  if (typeof d.default === "boolean") return d.default ? "on" : "off";
  if (typeof d.default === "number" || typeof d.default === "string") return String(d.default);
  if (d.value === undefined && !d.negatable) return "off";
  return "none";
}

/**
 * The variable, as the docs and the help name it: `SUPERFLUID_QUIET=1`, `$SUPERFLUID_SPEC_GATE` (1/0),
 * `$SUPERFLUID_ALLOW_ORIGINS` (comma-separated).
 */
export function envNote(d: FlagDecl, code: (s: string) => string = (s) => s): string | undefined {
  if (d.env === undefined) return undefined;
  if (d.value !== undefined) return d.repeatable ? `${code(`$${d.env}`)} (comma-separated)` : code(`$${d.env}`);
  return d.negatable ? `${code(`$${d.env}`)} (1/0)` : code(`${d.env}=1`);
}

const WIDTH = 100;
const COLUMN = 26;

function wrap(first: string, text: string): string[] {
  const lines: string[] = [];
  let line = first.length + 2 <= COLUMN ? first.padEnd(COLUMN) : `${first}  `;
  let fresh = true;
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    if (!fresh && line.length + 1 + word.length > WIDTH) {
      lines.push(line);
      line = " ".repeat(COLUMN);
      fresh = true;
    }
    line += fresh ? word : ` ${word}`;
    fresh = false;
  }
  lines.push(line.trimEnd());
  return lines;
}

/** Markdown as plain text: a parenthesized pointer into the docs dropped, links as their text, no backticks. */
export function plain(markdown: string): string {
  return markdown
    .replace(/ \(\[[^\]]*\]\([^)]*\)\)/g, "")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/`/g, "");
}

/** The --help text of a flag: `brief`, else its `help`'s first sentence, as plain text. */
export function helpText(d: FlagDecl): string {
  if (d.brief !== undefined) return d.brief;
  const end = d.help.search(/\.\s+(?=[A-Z`])/);
  return plain(end < 0 ? d.help : d.help.slice(0, end));
}

/** One flag's help lines: synopsis, text, then its notes in parentheses. */
export function helpLines(d: FlagDecl): string[] {
  const notes = [
    ...(d.value !== undefined && d.repeatable ? ["repeatable"] : []),
    ...(d.aliases ?? []).map((a) => `alias --${a}`),
    ...(d.refused || ["none", "off"].includes(shownDefault(d)) ? [] : [`default ${plain(shownDefault(d))}`]),
    ...(d.env ? [`variable ${plain(envNote(d)!)}`] : []),
  ];
  const text = helpText(d);
  return wrap(`  ${synopsis(d)}`, notes.length > 0 ? `${text} (${notes.join("; ")})` : text);
}

/**
 * The help text: the head, then each section's flags under its title (expert ones with `all`; a section
 * with none shown is left out), then the foot.
 */
export function renderHelp(
  decls: readonly FlagDecl[],
  sections: readonly { id: string; title: string }[],
  opts: { head: string; foot: string; all: boolean },
): string {
  const listed = sections.flatMap((s) => {
    const shown = decls.filter((d) => d.section === s.id && (opts.all || !d.expert));
    return shown.length === 0 ? [] : [[`${s.title}:`, ...shown.flatMap(helpLines)].join("\n")];
  });
  return [opts.head, ...listed, opts.foot].join("\n\n");
}
