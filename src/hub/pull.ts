// A reference to files on disk (docs/cli.md#pulling-models): the cache is
// asked first, with no request at all; only what it lacks is resolved on the
// Hub (main's commit, the file list, llama.cpp's file choice), checked
// against free disk, downloaded blob by blob under a lock each, and linked
// into snapshots/{commit}/ once every file of the model is whole, so a
// snapshot never shows half a split model. refs/main is written last.
import { join } from "node:path";
import type { GgufFile } from "../gguf/index.ts";
import { RepoCache } from "./cache.ts";
import { chooseFiles, quantsIn, type FileChoice } from "./choose.ts";
import { HubClient, type TreeEntry } from "./client.ts";
import { bytesOnDisk, checkDiskSpace, freeBytes } from "./disk.ts";
import { type BlobTarget, DEFAULT_TUNING, type DownloadTuning, downloadBlob, type FileOps } from "./download.ts";
import { HubError } from "./errors.ts";
import { readRemoteHeader } from "./header.ts";
import { acquireLock } from "./lock.ts";
import { formatReference, type HubReference, parseReference } from "./reference.ts";
import type { HubSettings } from "./settings.ts";

export interface PulledFile {
  /** The file's path in the repo. */
  path: string;
  /** Where it is on disk: snapshots/{commit}/{path}. */
  local: string;
  size: number;
}

export interface Pulled {
  /** The reference as written, tag included. */
  reference: string;
  repo: string;
  commit: string;
  /** The model's files (every part of a split model), the first one the file to load. */
  model: PulledFile[];
  mmproj?: PulledFile;
  /** True when the cache held it all and no request was made. */
  cached: boolean;
  /** Bytes fetched over the network by this pull. */
  fetched: number;
}

/** What a pull is doing, for a progress bar, a log line or an NDJSON status. */
export type PullEvent =
  | { kind: "resolving"; repo: string }
  | {
      kind: "file";
      /** The file's path in the repo. */
      path: string;
      /** Its blob name (the sha256 of an LFS file). */
      blob: string;
      /** `waiting`: another process holds this file's lock; `done` also for a blob the cache had. */
      state: "downloading" | "waiting" | "verifying" | "done";
      done: number;
      total: number;
    }
  | { kind: "linking"; commit: string };

export interface PullOptions {
  settings: HubSettings;
  /** Fetch the vision projector beside the model (default true; --no-mmproj turns it off). */
  mmproj?: boolean;
  tuning?: Partial<DownloadTuning>;
  progress?: (event: PullEvent) => void;
  signal?: AbortSignal;
  /** Seams for tests: the disk's writes and free space, the lock's timing, fetch itself. */
  fileOps?: FileOps;
  freeBytes?: (dir: string) => number;
  lockPollMs?: number;
  lockStaleMs?: number;
  fetch?: typeof fetch;
  /**
   * Called before the first byte of the model is downloaded, once the disk check passed, with the model's GGUF header
   * read off the Hub with Range requests (a split model's from its first part, which holds the metadata) and its
   * weights' bytes (every part's size): what throws refuses the pull, nothing downloaded. Not called when the cache
   * already holds every part of the model. The daemon's fit check goes here (src/daemon/model-pull.ts): the Hub
   * module knows nothing of memory. `superfluid pull` and /api/pull pass none: pulling is not loading.
   */
  beforeDownload?: (header: GgufFile, weightBytes: number) => void | Promise<void>;
  /** The first header request's bytes (default HEADER_FIRST_BYTES): a seam for tests. */
  headerFirstBytes?: number;
}

function pulledFile(cache: RepoCache, commit: string, path: string, size: number): PulledFile {
  return { path, local: cache.snapshotPath(commit, path), size };
}

/** The answer for `choice` at `commit`: where each file is, its size from `sizeOf`. */
function pulledOf(
  ref: HubReference,
  cache: RepoCache,
  commit: string,
  choice: FileChoice,
  mmproj: boolean,
  sizeOf: (path: string) => number,
  how: Pick<Pulled, "cached" | "fetched">,
): Pulled {
  const asFile = (p: string) => pulledFile(cache, commit, p, sizeOf(p));
  return {
    reference: formatReference(ref),
    repo: ref.repo,
    commit,
    model: choice.model.map(asFile),
    ...(mmproj && choice.mmproj !== undefined ? { mmproj: asFile(choice.mmproj) } : {}),
    ...how,
  };
}

function fileSize(path: string): number {
  return Bun.file(path).size;
}

/**
 * The reference as the cache holds it, from refs/main's snapshot and the same file choice, or undefined. Makes no
 * request.
 */
export function findCached(ref: HubReference, settings: HubSettings, mmproj = true): Pulled | undefined {
  const cache = new RepoCache(settings.cacheDir, ref.repo);
  const commit = cache.readRef("main");
  if (commit === undefined) return undefined;
  let choice: FileChoice;
  try {
    choice = chooseFiles(ref.repo, cache.snapshotFiles(commit), ref.tag);
  } catch {
    return undefined;
  }
  if (!choice.model.every((p) => cache.hasSnapshotFile(commit, p))) return undefined;
  return pulledOf(ref, cache, commit, choice, mmproj, (p) => fileSize(cache.snapshotPath(commit, p)), {
    cached: true,
    fetched: 0,
  });
}

/** The refusal under HF_HUB_OFFLINE / --offline, with what the cache does hold of the repo. */
function offlineMiss(ref: HubReference, settings: HubSettings): HubError {
  const cache = new RepoCache(settings.cacheDir, ref.repo);
  const commit = cache.readRef("main");
  const quants = commit === undefined ? [] : quantsIn(cache.snapshotFiles(commit));
  const held = quants.length > 0 ? ` (the cache holds ${ref.repo} as ${quants.join(", ")})` : "";
  return new HubError(
    "offline",
    `${formatReference(ref)} is not in the Hugging Face cache at ${settings.cacheDir}${held}, and offline mode ` +
      "(HF_HUB_OFFLINE=1 or --offline) makes no request: pull it once with the network (superfluid pull " +
      `${formatReference(ref)}), or unset HF_HUB_OFFLINE`,
  );
}

/** The blob a listed file is stored under, checked: a sha256 for LFS files, the git oid otherwise. */
function targetOf(entry: TreeEntry): BlobTarget {
  if (entry.lfs) {
    if (!/^[0-9a-f]{64}$/.test(entry.lfs.oid))
      throw new HubError("hub", `the Hub lists ${entry.path} with a malformed sha256 '${entry.lfs.oid}'`);
    return { path: entry.path, blob: entry.lfs.oid, size: entry.lfs.size, check: "sha256" };
  }
  if (!/^[0-9a-f]{40}$/.test(entry.oid))
    throw new HubError("hub", `the Hub lists ${entry.path} with a malformed oid '${entry.oid}'`);
  return { path: entry.path, blob: entry.oid, size: entry.size, check: "git-sha1" };
}

/** Pulls `reference` (`org/repo[:TAG]`) into the cache, or finds it there; answers where its files are. */
export async function pull(reference: string, options: PullOptions): Promise<Pulled> {
  const ref = parseReference(reference);
  const { settings } = options;
  const wantMmproj = options.mmproj !== false;
  const cached = findCached(ref, settings, wantMmproj);
  if (cached) return cached;
  if (settings.offline) throw offlineMiss(ref, settings);
  const emit = options.progress ?? (() => {});
  emit({ kind: "resolving", repo: ref.repo });
  const client = new HubClient(settings, options.fetch);
  const commit = await client.mainCommit(ref.repo);
  const entries = await client.listFiles(ref.repo, commit);
  const choice = chooseFiles(
    ref.repo,
    entries.map((e) => e.path),
    ref.tag,
  );
  const paths = [...choice.model, ...(wantMmproj && choice.mmproj !== undefined ? [choice.mmproj] : [])];
  const byPath = new Map(entries.map((e) => [e.path, e]));
  const cache = new RepoCache(settings.cacheDir, ref.repo);
  const targets = paths.map((p) => targetOf(byPath.get(p)!));
  // Before the first byte: the space the missing blobs still need (a partial file's bytes count as had).
  const needed = targets
    .filter((t) => !cache.hasBlob(t.blob))
    .reduce((n, t) => n + Math.max(0, t.size - bytesOnDisk(cache.incompletePath(t.blob))), 0);
  checkDiskSpace(join(cache.dir, "blobs"), needed, formatReference(ref), options.freeBytes ?? freeBytes);
  const modelTargets = targets.slice(0, choice.model.length);
  if (options.beforeDownload && modelTargets.some((t) => !cache.hasBlob(t.blob))) {
    const first = modelTargets[0]!;
    const header = await readRemoteHeader(
      (range, signal) => client.openFile(ref.repo, commit, first.path, range, signal),
      first.path,
      first.size,
      {
        ...(options.headerFirstBytes === undefined ? {} : { firstBytes: options.headerFirstBytes }),
        ...(options.signal ? { signal: options.signal } : {}),
      },
    );
    await options.beforeDownload(
      header,
      modelTargets.reduce((n, t) => n + t.size, 0),
    );
  }

  const tuning = { ...DEFAULT_TUNING, ...options.tuning };
  let fetched = 0;
  for (const target of targets) {
    const event = (state: "downloading" | "waiting" | "verifying" | "done", done: number) =>
      emit({ kind: "file", path: target.path, blob: target.blob, state, done, total: target.size });
    if (cache.hasBlob(target.blob)) {
      event("done", target.size);
      continue;
    }
    // One process per blob: a second waits, showing the first one's progress, then uses its result.
    const lock = await acquireLock(cache.lockPath(target.blob), {
      ...(options.lockPollMs === undefined ? {} : { pollMs: options.lockPollMs }),
      ...(options.lockStaleMs === undefined ? {} : { staleMs: options.lockStaleMs }),
      ...(options.signal ? { signal: options.signal } : {}),
      waiting: () => event("waiting", bytesOnDisk(cache.incompletePath(target.blob))),
    });
    try {
      const result = await downloadBlob(
        cache,
        target,
        async (range, signal) => client.openFile(ref.repo, commit, target.path, range, signal),
        tuning,
        {
          bytes: (done) => event("downloading", done),
          verifying: () => event("verifying", target.size),
        },
        options.fileOps,
        options.signal,
      );
      fetched += result.fetched;
    } finally {
      lock.release();
    }
    event("done", target.size);
  }
  emit({ kind: "linking", commit });
  for (const target of targets) cache.linkSnapshot(commit, target.path, target.blob);
  cache.writeRef(commit);
  return pulledOf(ref, cache, commit, choice, wantMmproj, (p) => byPath.get(p)!.lfs?.size ?? byPath.get(p)!.size, {
    cached: false,
    fetched,
  });
}
