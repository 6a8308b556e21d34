// The by-value shim compiles on a machine without the C library's development
// files (slim and distroless container images have libc.so.6 but neither
// libc.so nor libc.a, which TinyCC's `-lc` looks for): ffi/llama.ts links it
// to the running libc.so.6 through a folder of its own. The end-to-end case
// hides both files in a private mount namespace (an overlay whiteout over the
// system's library folder, nothing changed outside it) and runs
// `superfluid check`; it needs root and overlayfs, and is skipped without them.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { libcLinkDir, runningLibc } from "../../ffi/llama.ts";

const ROOT = resolve(import.meta.dir, "../..");
const work = mkdtempSync(join(tmpdir(), "sf-shim-libc-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe.skipIf(process.platform !== "linux")("the shim's libc link", () => {
  test("the running libc is found in /proc/self/maps, and linked as libc.so", () => {
    const libc = runningLibc();
    expect(libc).toMatch(/\/libc(\.so\.6|-[\d.]+\.so)$/);
    const dir = libcLinkDir(join(work, "cache"), libc)!;
    expect(readlinkSync(join(dir, "libc.so"))).toBe(libc!);
    // A second call (another process, a restart) finds the link in place.
    expect(libcLinkDir(join(work, "cache"), libc)).toBe(dir);
  });

  test("a maps file without libc names none", () => {
    const maps = join(work, "maps");
    writeFileSync(maps, "7f00-7f01 r-xp 00000000 00:00 0 /usr/lib/libm.so.6\n7f02-7f03 rw-p 00000000 00:00 0 [heap]\n");
    expect(runningLibc(maps)).toBeUndefined();
  });
});

/** The system folder TinyCC finds libc.so or libc.a in, when this machine has one and can hide it. */
function devLibcFolder(): string | undefined {
  if (process.platform !== "linux" || process.getuid?.() !== 0 || !Bun.which("unshare")) return undefined;
  for (const dir of ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"])
    if (existsSync(join(dir, "libc.so")) || existsSync(join(dir, "libc.a"))) return dir;
  return undefined;
}
const hidden = devLibcFolder();

test.skipIf(!hidden)("superfluid check starts where libc.so and libc.a are absent", async () => {
  const upper = join(work, "upper");
  const scratch = join(work, "overlay-work");
  mkdirSync(upper);
  mkdirSync(scratch);
  // Whiteouts: character devices 0:0 hide the lower files in the overlay.
  for (const name of ["libc.so", "libc.a"]) {
    const made = Bun.spawnSync(["mknod", join(upper, name), "c", "0", "0"]);
    if (made.exitCode !== 0) return console.warn("skipped: mknod failed", made.stderr.toString());
  }
  const script = [
    "set -e",
    `mount -t overlay overlay -o lowerdir=${hidden},upperdir=${upper},workdir=${scratch} ${hidden} || exit 77`,
    `test ! -e ${hidden}/libc.so && test ! -e ${hidden}/libc.a`,
    `exec ${process.execPath} ${join(ROOT, "src/main.ts")} check`,
  ].join("\n");
  const proc = Bun.spawn(["unshare", "-m", "sh", "-c", script], {
    env: { ...process.env, SUPERFLUID_CACHE_DIR: join(work, "fresh-cache") },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = [
    await new Response(proc.stdout).text(),
    await new Response(proc.stderr).text(),
    await proc.exited,
  ];
  if (code === 77) return console.warn("skipped: overlayfs is not available here");
  expect(err).not.toContain("library 'c' not found");
  expect(code).toBe(0);
  expect(out + err).toContain("libllama:");
  // The link the shim used lives in the fresh cache, next to the shim's source.
  const link = Bun.spawnSync(["sh", "-c", `ls ${join(work, "fresh-cache", "shim")}/libc-*/libc.so`])
    .stdout.toString()
    .trim();
  expect(lstatSync(link).isSymbolicLink()).toBe(true);
  expect(readlinkSync(link)).toBe(runningLibc()!);
});
