// What the Hugging Face cache holds, as references (`superfluid list`): every
// model GGUF in every snapshot (a split model once, by its first part, sized
// with all its parts), named `org/repo:QUANT` as a pull would name it.
// Projectors are not models and are left out. Makes no request.
import { cachedRepos, RepoCache, statOrNothing } from "./cache.ts";
import { quantOf } from "./choose.ts";

export interface CachedModel {
  /** `org/repo:QUANT` (the file name when the name carries no quant). */
  reference: string;
  quant?: string;
  /** Bytes of the model's files, every split part counted. */
  size: number;
  /** The first file, under snapshots/. */
  path: string;
  commit: string;
  /** refs/main points at this snapshot. */
  current: boolean;
}

const SPLIT = /-(\d{5})-of-(\d{5})\.gguf$/i;

export function listCached(cacheDir: string): CachedModel[] {
  const out: CachedModel[] = [];
  for (const repo of cachedRepos(cacheDir)) {
    const cache = new RepoCache(cacheDir, repo);
    const main = cache.readRef("main");
    for (const commit of cache.snapshots()) {
      const files = cache.snapshotFiles(commit);
      for (const path of files) {
        const name = path.slice(path.lastIndexOf("/") + 1);
        if (!/\.gguf$/i.test(name) || /mmproj/i.test(name)) continue;
        const split = SPLIT.exec(path);
        if (split && Number(split[1]) !== 1) continue;
        const parts = split ? files.filter((f) => f.replace(SPLIT, "") === path.replace(SPLIT, "")) : [path];
        const size = parts.reduce((n, p) => n + (statOrNothing(cache.snapshotPath(commit, p))?.size ?? 0), 0);
        const quant = quantOf(path);
        out.push({
          reference: `${repo}:${quant ?? path}`,
          ...(quant === undefined ? {} : { quant }),
          size,
          path: cache.snapshotPath(commit, path),
          commit,
          current: commit === main,
        });
      }
    }
  }
  return out;
}
