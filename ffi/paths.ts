// Per-user folders. Everything superfluid generates (the compiled shim, the
// extracted libraries, the built-in model) goes under one cache folder. It
// lives here, in the lowest layer, because the binding itself caches into it;
// the rest of the program imports it from here.
import { homedir } from "node:os";
import { join } from "node:path";

export function cacheDir(env = process.env): string {
  if (env.SUPERFLUID_CACHE_DIR) return env.SUPERFLUID_CACHE_DIR;
  if (env.XDG_CACHE_HOME) return join(env.XDG_CACHE_HOME, "superfluid");
  if (process.platform === "win32" && env.LOCALAPPDATA) return join(env.LOCALAPPDATA, "superfluid", "cache");
  if (process.platform === "darwin") return join(homedir(), "Library", "Caches", "superfluid");
  return join(homedir(), ".cache", "superfluid");
}
