// Known models from disk (docs/cli.md#several-models): every GGUF under a
// --model-dir, and a path or reference POST /v1/models/load names, each as
// a ModelSource (served id, file, GGUF header facts). Only the header is
// read (metadata and tensor infos, never weights), so knowing a model
// loads nothing.
import { statSync } from "node:fs";
import { basename } from "node:path";
import { describeModel, readGguf, type GgufFile } from "../gguf/index.ts";
import { RequestError } from "./request-error.ts";
import {
  ggufFilesUnder,
  ModelNotFoundError,
  pickFile,
  resolveModel,
  servedIdOfFile,
  type ModelPath,
} from "./model-ref.ts";
import type { ModelSource } from "./registry.ts";
import { HubError } from "../hub/errors.ts";
import { pullRequestError, resolveOrPull, type PullPolicy } from "./model-pull.ts";

/** Reads a resolved model's GGUF header; a file that is not GGUF is 400 `unsupported_runtime`. */
export async function sourceOf(resolved: ModelPath): Promise<ModelSource> {
  const name = basename(resolved.path);
  const notGguf = (why: string) =>
    new RequestError(
      400,
      `runtime llamacpp cannot serve ${name}: it reads a GGUF file, and this one is not (${why})`,
      "unsupported_runtime",
      "id",
    );
  // Only a regular file is opened: a FIFO would block the read until someone writes to it, a device never ends.
  let regular: boolean;
  try {
    regular = statSync(resolved.path).isFile();
  } catch {
    regular = false;
  }
  if (!regular) throw notGguf("not a regular file");
  let file: GgufFile;
  try {
    file = await readGguf(resolved.path);
  } catch (err) {
    // The reader's message names the file by its full path; the client is told only its name.
    throw notGguf((err as Error).message.replaceAll(resolved.path, name));
  }
  return { id: resolved.id, path: resolved.path, info: describeModel(file), file };
}

/** The token as the client is told it back: control characters escaped, a very long one cut. */
function printable(token: string): string {
  const shown = JSON.stringify(token).slice(1, -1);
  return shown.length > 200 ? `${shown.slice(0, 200)}...` : shown;
}

/**
 * A path or reference (POST /v1/models/load): 404 `model_not_found` when nothing is there. With a pull policy, a
 * reference found nowhere locally is pulled (docs/cli.md#pulling-models); a failed pull answers its own status.
 */
export async function describeToken(token: string, modelDirs: string[], pulling?: PullPolicy): Promise<ModelSource> {
  let resolved: ModelPath;
  try {
    resolved = pulling ? await resolveOrPull(token, modelDirs, pulling) : resolveModel(token, modelDirs);
  } catch (err) {
    if (err instanceof HubError) throw pullRequestError(err, pulling?.env);
    // The fit check a pull runs before its first byte (507 insufficient_memory) answers as the load's own would.
    if (err instanceof RequestError) throw err;
    // The lookup's own message names this machine's folders; the client is told only what it asked for.
    // A path the file system refuses outright (a NUL in it, too long) names no model either.
    if (!(err instanceof ModelNotFoundError) && !(err as NodeJS.ErrnoException).code) throw err;
    throw new RequestError(
      404,
      `no model file or local reference '${printable(token)}' was found${pulling ? "" : " (nothing is downloaded)"}`,
      "model_not_found",
      "id",
    );
  }
  return sourceOf(resolved);
}

/**
 * Every GGUF under the --model-dir folders (three levels down; a split
 * model by its first part), served by file stem. A stem already taken is
 * registered under its full file name instead; a file that is not a
 * readable GGUF is skipped. `log` says both.
 */
export async function modelDirSources(
  dirs: string[],
  taken: Set<string>,
  log: (line: string) => void,
): Promise<ModelSource[]> {
  const out: ModelSource[] = [];
  for (const dir of dirs) {
    const files = ggufFilesUnder(dir).filter((f) => pickFile([f], undefined) !== undefined);
    for (const path of files) {
      let id = servedIdOfFile(path);
      if (taken.has(id)) {
        const full = basename(path);
        log(`superfluid: --model-dir ${dir}: ${full} is registered as '${full}': the id '${id}' is taken`);
        id = full;
        if (taken.has(id)) continue;
      }
      try {
        out.push(await sourceOf({ id, path }));
        taken.add(id);
      } catch (err) {
        log(`superfluid: --model-dir ${dir}: skipping ${basename(path)}: ${(err as Error).message}`);
      }
    }
  }
  return out;
}
