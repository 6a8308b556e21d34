// Per-user folders. Everything superfluid generates (the built-in model, the
// extracted libraries) goes under one cache folder.
import { homedir } from "node:os";
import { join } from "node:path";

export function cacheDir(env = process.env): string {
  if (env.SUPERFLUID_CACHE_DIR) return env.SUPERFLUID_CACHE_DIR;
  if (env.XDG_CACHE_HOME) return join(env.XDG_CACHE_HOME, "superfluid");
  if (process.platform === "win32" && env.LOCALAPPDATA) return join(env.LOCALAPPDATA, "superfluid", "cache");
  if (process.platform === "darwin") return join(homedir(), "Library", "Caches", "superfluid");
  return join(homedir(), ".cache", "superfluid");
}
