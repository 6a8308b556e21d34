// `superfluid pull REF...` fetches references into the Hugging Face cache
// without serving them (a CI cache step: pull, then cache the folder), and
// `superfluid list` shows what the cache holds (docs/cli.md#pull and #list).
// Progress goes to stderr; pull prints each model's path on stdout, so a
// script can take it.
import { formatBytes } from "../runtime/byte-size.ts";
import { HubError } from "../hub/errors.ts";
import { listCached } from "../hub/list.ts";
import { pull } from "../hub/pull.ts";
import { hubSettings } from "../hub/settings.ts";
import { FlagError, parseFlags } from "./flags.ts";
import { pullDisplay } from "./pull-progress.ts";

const PULL_USAGE = `usage: superfluid pull [--no-mmproj] [--offline] REF...

Fetches each reference org/repo[:TAG] from the Hugging Face Hub into the
Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else
~/.cache/huggingface/hub) and prints the model file's path. A reference
already in the cache makes no request. TAG is a quant (Q4_K_M) or a file name;
with none, Q4_K_M, else Q4_0, else the first GGUF. HF_TOKEN, HF_ENDPOINT,
HTTPS_PROXY and NO_PROXY are read.

  --no-mmproj   leave the vision projector (mmproj GGUF) out
  --offline     download nothing: only check that the cache holds each one`;

const LIST_USAGE = `usage: superfluid list [--json]

Lists the models the Hugging Face cache holds: reference, quant, size, path.

  --json        one JSON object per model, one per line`;

export async function runPull(argv: string[], env = process.env): Promise<number> {
  let flags;
  try {
    flags = parseFlags(argv, { "no-mmproj": {}, offline: {}, help: { aliases: ["h"] } });
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    console.error(`superfluid pull: ${err.message}\n${PULL_USAGE}`);
    return 2;
  }
  if (flags.switches.has("help")) {
    console.log(PULL_USAGE);
    return 0;
  }
  if (flags.positional.length === 0) {
    console.error(PULL_USAGE);
    return 2;
  }
  const settings = hubSettings(env, { offline: flags.switches.has("offline") });
  for (const reference of flags.positional) {
    const display = pullDisplay("", (line) => console.error(line));
    try {
      const pulled = await pull(reference, {
        settings,
        mmproj: !flags.switches.has("no-mmproj"),
        progress: (e) => display.event(e),
      });
      display.done();
      if (pulled.cached) console.error(`${pulled.reference}: in the cache already (${pulled.commit.slice(0, 12)})`);
      console.log(pulled.model[0]!.local);
    } catch (err) {
      display.done();
      if (!(err instanceof HubError)) throw err;
      console.error(`superfluid pull: ${err.message}`);
      return 1;
    }
  }
  return 0;
}

export async function runList(argv: string[], env = process.env): Promise<number> {
  let flags;
  try {
    flags = parseFlags(argv, { json: {}, help: { aliases: ["h"] } });
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    console.error(`superfluid list: ${err.message}\n${LIST_USAGE}`);
    return 2;
  }
  if (flags.switches.has("help") || flags.positional.length > 0) {
    console.log(LIST_USAGE);
    return flags.positional.length > 0 ? 2 : 0;
  }
  const cacheDir = hubSettings(env).cacheDir;
  const models = listCached(cacheDir);
  if (flags.switches.has("json")) {
    for (const m of models) console.log(JSON.stringify(m));
    return 0;
  }
  if (models.length === 0) {
    console.error(`no models in the Hugging Face cache at ${cacheDir}`);
    return 0;
  }
  const rows = [
    ["REFERENCE", "QUANT", "SIZE", "PATH"],
    ...models.map((m) => [
      m.current ? m.reference : `${m.reference} (${m.commit.slice(0, 8)})`,
      m.quant ?? "-",
      formatBytes(m.size),
      m.path,
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const r of rows)
    console.log(r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  "));
  return 0;
}
