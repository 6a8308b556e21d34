// Session stores in temporary folders for unit tests: each test file calls
// useTempStores() once and opens as many stores as it needs; they are closed
// and their folders removed after each test.
import { afterEach } from "bun:test";
import { mkdtempSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionStore, type StoreOptions } from "../../src/session-log/store.ts";

export function useTempStores(prefix: string): (opts?: StoreOptions) => Promise<SessionStore> {
  const dirs: string[] = [];
  const stores: SessionStore[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close().catch(() => {});
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  return async (opts) => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(dir);
    const store = await SessionStore.open(dir, opts);
    stores.push(store);
    return store;
  };
}

/** A log writer whose disk fills on demand: while `disk.full`, every write fails with ENOSPC. */
export function fillableDisk(): { full: boolean; opts: StoreOptions } {
  const disk = {
    full: false,
    opts: {
      fileOps: {
        write(fd: number, data: Uint8Array) {
          if (disk.full) throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
          writeSync(fd, data);
        },
      },
    } as StoreOptions,
  };
  return disk;
}
