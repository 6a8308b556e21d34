// Compute threads default to the number of physical cores, capped by the
// CPU quota of the cgroup the process runs in (a container's `--cpus`, a
// Kubernetes CPU limit): on a busy 2-core box, more spinning threads than
// cores can be 100x slower, and a quota of 4 CPUs on a 64-core node is such a box.
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";

/**
 * The CPUs a cgroup's quota allows, rounded up: cgroup v2's `cpu.max`
 * ("200000 100000" = 2 CPUs; "max …" = none), else v1's cfs_quota_us over
 * cfs_period_us (-1 = none). Undefined when there is no quota or no cgroup.
 */
export function cgroupCpuLimit(root = "/sys/fs/cgroup"): number | undefined {
  const read = (file: string) => {
    try {
      return readFileSync(`${root}/${file}`, "utf8").trim();
    } catch {
      return undefined;
    }
  };
  const quotaOf = (quota: number, period: number) =>
    Number.isFinite(quota) && Number.isFinite(period) && quota > 0 && period > 0
      ? Math.max(1, Math.ceil(quota / period))
      : undefined;
  const v2 = read("cpu.max");
  if (v2 !== undefined) {
    const [quota, period] = v2.split(/\s+/);
    return quota === "max" ? undefined : quotaOf(Number(quota), Number(period ?? 100000));
  }
  const v1 = read("cpu/cpu.cfs_quota_us") ?? read("cpu,cpuacct/cpu.cfs_quota_us");
  const period = read("cpu/cpu.cfs_period_us") ?? read("cpu,cpuacct/cpu.cfs_period_us");
  return v1 === undefined ? undefined : quotaOf(Number(v1), Number(period ?? 100000));
}

/** The default compute threads: this machine's physical cores, at most the cgroup's CPU quota. */
export function physicalCores(cpuLimit = cgroupCpuLimit()): number {
  return Math.min(coresOfThisMachine(), cpuLimit ?? Number.POSITIVE_INFINITY);
}

/** Physical cores of this machine (logical CPUs where the topology is unknown), no quota applied. */
export function coresOfThisMachine(): number {
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
