// The sessions directory holds every prompt and reply in plain text, so it is
// private to the server's user whatever the umask: folders it creates are 0700,
// files 0600. open() and mkdir() only ever take bits away through the umask, so
// modes are set exactly afterwards.
import {
  chmodSync,
  closeSync,
  fchmodSync,
  fsyncSync,
  mkdirSync,
  openSync,
  renameSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, resolve } from "node:path";

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/**
 * mkdir -p dir; each folder it creates gets mode 0700, and `dir` itself, when
 * it was there already with bits for group or others (made by hand, or by an
 * older version under the umask), is tightened to 0700. Folders above an
 * existing `dir` are the operator's and left alone.
 */
export function makePrivateDir(dir: string): void {
  const first = mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  if (first === undefined) {
    tightenDir(dir);
    return;
  }
  const top = resolve(first);
  for (let d = resolve(dir); ; d = dirname(d)) {
    chmodSync(d, PRIVATE_DIR_MODE);
    if (d === top || d === dirname(d)) break;
  }
}

/** Takes group and other bits off an existing folder (one not ours to change is left as it is). */
function tightenDir(dir: string): void {
  try {
    if ((statSync(dir).mode & 0o077) !== 0) chmodSync(dir, PRIVATE_DIR_MODE);
  } catch {
    // not ours to change: the files in it are still 0600
  }
}

/**
 * Opens path with flags (numeric or fs's letters), creating it 0600. An existing
 * file is set to 0600 too (one left by an older version with the umask's mode),
 * unless it belongs to someone else and cannot be changed.
 */
export function openPrivate(path: string, flags: string | number): number {
  const fd = openSync(path, flags, PRIVATE_FILE_MODE);
  try {
    fchmodSync(fd, PRIVATE_FILE_MODE);
  } catch {
    // not ours to change (the open succeeded, so we may use it)
  }
  return fd;
}

/**
 * Sets an existing file to 0600 when it has bits for group or others (one left by an older version); a missing one is
 * no error.
 */
export function tightenFile(path: string): void {
  try {
    if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, PRIVATE_FILE_MODE);
  } catch {
    // missing, or not ours to change
  }
}

/**
 * Replaces path whole with a private file holding text: written beside it, then renamed over it, so a reader never sees
 * half of it.
 */
export function replacePrivateFile(path: string, text: string): void {
  writePrivateFile(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

/** Writes text to path as a private file (an existing one is overwritten). */
export function writePrivateFile(path: string, text: string): void {
  const fd = openPrivate(path, "w");
  try {
    writeFileSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

/**
 * fsyncs a directory so a created or renamed entry in it survives a crash (best effort: not possible everywhere, e.g.
 * Windows).
 */
export function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, "r");
    fsyncSync(fd);
  } catch {
    // not supported here
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
