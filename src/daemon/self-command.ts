// How to start this same program again with other arguments: the compiled
// binary is its own executable; from source it is Bun plus our entry file.
import { join } from "node:path";

export function isCompiledBinary(): boolean {
  return Bun.isStandaloneExecutable;
}

export function selfCommand(...args: string[]): string[] {
  if (isCompiledBinary()) return [process.execPath, ...args];
  return [process.execPath, join(import.meta.dir, "..", "main.ts"), ...args];
}
