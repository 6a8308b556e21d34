// The one-file executable: built by build.ts, it runs from an empty folder with
// no Bun and no node_modules, extracting its embedded libllama on first use.
import { describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fixturePath } from "./support/models.ts";

describe("compiled binary", () => {
  test("builds, then opens its embedded libllama from an empty folder", async () => {
    const work = mkdtempSync(join(tmpdir(), "sf-binary-"));
    const outfile = join(work, "superfluid");
    const build = Bun.spawnSync([process.execPath, join(import.meta.dir, "..", "build.ts"), "--outfile", outfile], {
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(build.stderr.toString()).toBe("");
    expect(build.exitCode).toBe(0);
    const model = await fixturePath("tiny-chat");
    const empty = mkdtempSync(join(tmpdir(), "sf-empty-"));
    const run = Bun.spawnSync([outfile, "check", "--model", model], {
      cwd: empty,
      env: { PATH: "/usr/bin:/bin", HOME: empty, SUPERFLUID_CACHE_DIR: join(empty, "cache") },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(run.stderr.toString()).toBe("");
    expect(run.exitCode).toBe(0);
    expect(run.stdout.toString()).toContain("(embedded)");
    expect(run.stdout.toString()).toMatch(/vocabulary of \d+ tokens/);
  });
});
