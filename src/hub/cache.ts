// The Hugging Face cache as huggingface_hub lays it out, so huggingface_hub,
// llama.cpp and superfluid share one copy of a model:
//
//   {cache}/models--{org}--{repo}/
//     blobs/{sha256}                 an LFS file's bytes, named by its sha256 (a small file: by its git oid)
//     blobs/{sha256}.incomplete      a download in progress (huggingface_hub's name; resumed from)
//     snapshots/{commit}/{path}      a relative symlink ../../blobs/{sha256} (a copy where symlinks fail)
//     refs/main                      the commit `main` pointed at when last pulled
//
// Everything here is local file work: no request is made.
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, relative } from "node:path";
import { HubError } from "./errors.ts";

export const COMMIT = /^[0-9a-f]{40}$/;

/** A repo-relative path the cache may hold: no absolute path, no `.` or `..` segment, no empty segment. */
export function safeRepoPath(path: string): boolean {
  if (path === "" || path.startsWith("/") || path.includes("\\") || path.includes("\0")) return false;
  return path.split("/").every((part) => part !== "" && part !== "." && part !== "..");
}

export class RepoCache {
  /** `models--{org}--{repo}`. */
  readonly dir: string;

  constructor(
    readonly cacheDir: string,
    readonly repo: string,
  ) {
    this.dir = join(cacheDir, `models--${repo.replace("/", "--")}`);
  }

  blobPath(blob: string): string {
    return join(this.dir, "blobs", blob);
  }

  /** huggingface_hub's name for a blob being downloaded. */
  incompletePath(blob: string): string {
    return `${this.blobPath(blob)}.incomplete`;
  }

  snapshotDir(commit: string): string {
    return join(this.dir, "snapshots", commit);
  }

  snapshotPath(commit: string, path: string): string {
    if (!safeRepoPath(path)) throw new HubError("hub", `the Hub listed a file path the cache cannot hold: '${path}'`);
    return join(this.snapshotDir(commit), path);
  }

  /** Where lock files for this repo's blobs live (beside huggingface_hub's own `.locks` folder). */
  lockPath(blob: string): string {
    return join(this.cacheDir, ".locks", `models--${this.repo.replace("/", "--")}`, `${blob}.superfluid.lock`);
  }

  hasBlob(blob: string): boolean {
    return statOrNothing(this.blobPath(blob))?.isFile() === true;
  }

  /** The commit refs/{name} holds, or undefined. */
  readRef(name = "main"): string | undefined {
    try {
      const commit = readFileSync(join(this.dir, "refs", name), "utf8").trim();
      return COMMIT.test(commit) ? commit : undefined;
    } catch {
      return undefined;
    }
  }

  /** Writes refs/{name} as huggingface_hub does: the commit, no newline; through a rename, so no reader sees half. */
  writeRef(commit: string, name = "main"): void {
    const path = join(this.dir, "refs", name);
    if (readOrNothing(path) === commit) return;
    mkdirSync(dirname(path), { recursive: true });
    const tmp = `${path}.${process.pid}.tmp`;
    writeFileSync(tmp, commit);
    renameSync(tmp, path);
  }

  /** Whether snapshots/{commit}/{path} is there and leads to a whole file. */
  hasSnapshotFile(commit: string, path: string): boolean {
    return statOrNothing(this.snapshotPath(commit, path))?.isFile() === true;
  }

  /**
   * Points snapshots/{commit}/{path} at blobs/{blob} with a relative symlink (`../../blobs/…`, one more `../` per
   * folder in path), as huggingface_hub does; a copy where the file system refuses symlinks.
   */
  linkSnapshot(commit: string, path: string, blob: string): void {
    const link = this.snapshotPath(commit, path);
    mkdirSync(dirname(link), { recursive: true });
    const target = relative(dirname(link), this.blobPath(blob));
    const existing = lstatOrNothing(link);
    if (existing) rmSync(link, { force: true });
    const tmp = `${link}.${process.pid}.tmp`;
    rmSync(tmp, { force: true });
    try {
      symlinkSync(target, tmp);
    } catch {
      copyFileSync(this.blobPath(blob), tmp);
    }
    renameSync(tmp, link);
  }

  /** Every file under snapshots/{commit}, as repo-relative paths (symlinks followed). */
  snapshotFiles(commit: string): string[] {
    const root = this.snapshotDir(commit);
    const out: string[] = [];
    const walk = (dir: string, prefix: string) => {
      let names: string[];
      try {
        names = readdirSync(dir).sort();
      } catch {
        return;
      }
      for (const name of names) {
        const full = join(dir, name);
        const st = statOrNothing(full);
        if (st?.isDirectory()) walk(full, `${prefix}${name}/`);
        else if (st?.isFile()) out.push(`${prefix}${name}`);
      }
    };
    walk(root, "");
    return out;
  }

  /** The commits this repo has snapshots of. */
  snapshots(): string[] {
    try {
      return readdirSync(join(this.dir, "snapshots")).filter((c) => COMMIT.test(c));
    } catch {
      return [];
    }
  }
}

/** Every repo the cache holds models of, as `org/repo`. */
export function cachedRepos(cacheDir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(cacheDir);
  } catch {
    return [];
  }
  return names
    .filter((n) => n.startsWith("models--") && n.split("--").length === 3)
    .map((n) => {
      const [, org, repo] = n.split("--");
      return `${org}/${repo}`;
    })
    .sort();
}

export function statOrNothing(path: string) {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

function lstatOrNothing(path: string) {
  try {
    return lstatSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

function readOrNothing(path: string): string | undefined {
  return existsSync(path) ? readFileSync(path, "utf8") : undefined;
}
