// The size bound of a park directory (--park-budget-gb, docs/cli.md#parking):
// when the artifacts in it take more than the budget, the ones written
// longest ago go first. Losing one costs a prefill at that session's next
// generation, never a wrong answer.
import { readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

/** A `.tmp` file younger than this may be a seal still being written: left alone. */
const TMP_GRACE_MS = 60_000;

/**
 * Removes files from `dir`, oldest modification first, until what is left
 * takes at most `budgetBytes`; 0 = no bound (nothing removed). A `.tmp` file
 * (a seal being written, or one a crash left) counts and goes like the rest
 * once it is more than a minute old. A missing folder holds nothing.
 */
export function sweepParkDir(dir: string, budgetBytes: number, now = Date.now()): { removed: number; bytes: number } {
  const swept = { removed: 0, bytes: 0 };
  if (!(budgetBytes > 0)) return swept;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return swept;
  }
  const files: { path: string; size: number; mtime: number; young: boolean }[] = [];
  let total = 0;
  for (const name of names) {
    const path = join(dir, name);
    try {
      const st = statSync(path);
      if (!st.isFile()) continue;
      files.push({
        path,
        size: st.size,
        mtime: st.mtimeMs,
        young: name.endsWith(".tmp") && now - st.mtimeMs < TMP_GRACE_MS,
      });
      total += st.size;
    } catch {
      // gone since the listing
    }
  }
  if (total <= budgetBytes) return swept;
  files.sort((a, b) => a.mtime - b.mtime || a.path.localeCompare(b.path));
  for (const f of files) {
    if (total <= budgetBytes) break;
    if (f.young) continue;
    try {
      rmSync(f.path, { force: true });
    } catch {
      continue;
    }
    total -= f.size;
    swept.removed++;
    swept.bytes += f.size;
  }
  return swept;
}
