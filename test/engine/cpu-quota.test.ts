// Compute threads default to physical cores capped by the cgroup's CPU quota
// (src/engine/threads.ts): a container limited to 2 CPUs on a big machine
// runs 2 threads, not one per core of the node.
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cgroupCpuLimit, coresOfThisMachine, physicalCores } from "../../src/engine/threads.ts";

const work = mkdtempSync(join(tmpdir(), "sf-cpu-quota-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function cgroup(files: Record<string, string>): string {
  const root = mkdtempSync(join(work, "cg-"));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(root, name, ".."), { recursive: true });
    writeFileSync(join(root, name), text);
  }
  return root;
}

test("cgroup v2 cpu.max: a quota rounds up to whole CPUs; max is none", () => {
  expect(cgroupCpuLimit(cgroup({ "cpu.max": "200000 100000\n" }))).toBe(2);
  expect(cgroupCpuLimit(cgroup({ "cpu.max": "150000 100000\n" }))).toBe(2);
  expect(cgroupCpuLimit(cgroup({ "cpu.max": "50000 100000\n" }))).toBe(1);
  expect(cgroupCpuLimit(cgroup({ "cpu.max": "max 100000\n" }))).toBeUndefined();
});

test("cgroup v1 cfs quota over period; -1 is none; no cgroup files is none", () => {
  const v1 = { "cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n" };
  expect(cgroupCpuLimit(cgroup(v1))).toBe(4);
  expect(cgroupCpuLimit(cgroup({ ...v1, "cpu/cpu.cfs_quota_us": "-1\n" }))).toBeUndefined();
  expect(cgroupCpuLimit(join(work, "absent"))).toBeUndefined();
});

test("the default threads are the cores, capped by the quota", () => {
  const cores = coresOfThisMachine();
  expect(cores).toBeGreaterThanOrEqual(1);
  expect(physicalCores(1)).toBe(1);
  expect(physicalCores(cores + 8)).toBe(cores);
});
