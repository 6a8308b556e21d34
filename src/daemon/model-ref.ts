// What a MODEL argument names (docs/cli.md#the-model-argument): a GGUF path, or a reference
// `org/repo[:TAG]` found in local folders. A reference found nowhere here is pulled by
// model-pull.ts; this module only looks.
import { existsSync, readdirSync, statSync, type Stats } from "node:fs";
import { homedir } from "node:os";
import { basename, join, resolve } from "node:path";

export interface ModelPath {
  path: string;
  /** The name requests use: a path's file stem, a reference without its tag. */
  id: string;
}

export class ModelNotFoundError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ModelNotFoundError";
  }
}

/** docs/cli.md#the-model-argument: a token is a reference only when it cannot be a path. */
export function isReference(token: string): boolean {
  if (existsSync(token)) return false;
  if (/^[./~]/.test(token)) return false;
  // `org/repo:model-Q4_K_M.gguf` (a tag that is a whole file name) is a reference; `dir/model.gguf` is a path.
  const name = token.split(":")[0]!;
  if (/\.(gguf|base)$/i.test(name)) return false;
  return name.includes("/");
}

export function servedIdOfPath(path: string): string {
  return basename(path).replace(/\.gguf$/i, "");
}

/** A split model's first part (`-00001-of-00003.gguf`) and a single file alike: the id without the shard suffix. */
export function servedIdOfFile(path: string): string {
  return servedIdOfPath(path).replace(/-\d{5}-of-\d{5}$/i, "");
}

/** Folders a reference is looked up in: each --model-dir, then the Hugging Face cache. */
export function searchRoots(modelDirs: string[], env = process.env): string[] {
  const hub =
    env.HF_HUB_CACHE ??
    join(env.HF_HOME ?? join(env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "huggingface"), "hub");
  return [...modelDirs.map((d) => resolve(d)), hub];
}

/** A path's stat, or undefined where it cannot be read (missing, no permission, a symlink loop, a name too long). */
function statOrNothing(path: string): Stats | undefined {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/**
 * The GGUF files under a folder, at most `depth` levels down, in name order
 * (projector files left out). Folders and entries the server may not read
 * are skipped: a client may name any folder (POST /v1/models/load), `/` and
 * `/proc` included.
 */
export function ggufFilesUnder(dir: string, depth = 3): string[] {
  const budget = { entries: MAX_WALK_ENTRIES };
  return walk(dir, depth, budget);
}

/**
 * Entries one walk looks at, at most. The walk is synchronous: a folder such
 * as `/` would otherwise hold the event loop for seconds. A models folder
 * holds far fewer.
 */
export const MAX_WALK_ENTRIES = 20_000;

function walk(dir: string, depth: number, budget: { entries: number }): string[] {
  if (!statOrNothing(dir)?.isDirectory()) return [];
  let entries: string[];
  try {
    entries = readdirSync(dir).sort();
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const entry of entries) {
    if (--budget.entries < 0) break;
    const full = join(dir, entry);
    const st = statOrNothing(full);
    if (!st) continue;
    if (st.isDirectory() && depth > 0) out.push(...walk(full, depth - 1, budget));
    else if (st.isFile() && /\.gguf$/i.test(entry) && !/mmproj/i.test(entry)) out.push(full);
  }
  return out;
}

/** Candidate folders for org/repo under one root (plain, repo-only, and Hugging Face cache layouts). */
function repoFolders(root: string, org: string, repo: string): string[] {
  return [join(root, org, repo), join(root, repo), join(root, `models--${org}--${repo}`, "snapshots")];
}

/** Picks the file for a quant tag; with split files, the first part. */
export function pickFile(files: string[], tag: string | undefined): string | undefined {
  const matching = tag ? files.filter((f) => basename(f).toLowerCase().includes(tag.toLowerCase())) : files;
  const firstParts = matching.filter((f) => !/-\d{5}-of-\d{5}\.gguf$/i.test(f) || /-00001-of-\d{5}\.gguf$/i.test(f));
  return firstParts[0];
}

export function resolveModel(token: string, modelDirs: string[] = [], env = process.env): ModelPath {
  if (!isReference(token)) {
    const path = resolve(token.replace(/^~(?=\/)/, homedir()));
    const st = statOrNothing(path);
    if (!st) throw new ModelNotFoundError(`model file ${path} does not exist`);
    if (st.isDirectory()) {
      const file = pickFile(ggufFilesUnder(path), undefined);
      if (!file) throw new ModelNotFoundError(`no .gguf file in ${path}`);
      // The root folder has no name of its own: it is served as `/`.
      return { path: file, id: basename(path) || path };
    }
    return { path, id: servedIdOfPath(path) };
  }
  const [name, tag] = token.split(":") as [string, string | undefined];
  const [org, ...rest] = name.split("/");
  const repo = rest.join("/");
  const looked: string[] = [];
  for (const root of searchRoots(modelDirs, env)) {
    for (const folder of repoFolders(root, org!, repo)) {
      looked.push(folder);
      const file = pickFile(ggufFilesUnder(folder), tag);
      if (file) return { path: file, id: name };
    }
  }
  throw new ModelNotFoundError(
    `model ${token} was not found locally (nothing is downloaded); looked in: ${looked.join(", ")}` +
      (tag ? ` for a .gguf file whose name contains ${tag}` : ""),
  );
}
