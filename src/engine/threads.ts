// Compute threads default to the number of physical cores: on a busy 2-core
// box, more spinning threads than cores can be 100x slower.
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";

export function physicalCores(): number {
  if (process.platform === "linux") {
    try {
      const cores = new Set<string>();
      let physical = "0";
      for (const line of readFileSync("/proc/cpuinfo", "utf8").split("\n")) {
        const [key, value] = line.split(":").map((s) => s.trim());
        if (key === "physical id") physical = value!;
        else if (key === "core id") cores.add(`${physical}:${value}`);
      }
      if (cores.size > 0) return Math.min(cores.size, availableParallelism());
    } catch {
      // fall through to the logical count
    }
  }
  return availableParallelism();
}
