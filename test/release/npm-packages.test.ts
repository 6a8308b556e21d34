// The npm distribution (src/release/npm-packages.ts): the generated package
// folders, and the launcher run with Node against a fake platform package whose
// "binary" is a shell script. The real 139 MB binary is packed and installed by
// hand (docs/install.md#npm), not here.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { npmPackages } from "../../src/release/npm-packages.ts";
import { PLATFORMS, hostPlatform } from "../../src/release/platforms.ts";

const tmp = mkdtempSync(join(tmpdir(), "sf-npm-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const readJson = (path: string) => JSON.parse(readFileSync(path, "utf8"));

describe("generated packages", () => {
  const outDir = join(tmp, "all");
  const fake = join(tmp, "fake-binary");
  writeFileSync(fake, "not a binary");
  const written = npmPackages({ version: "1.2.3", binaries: new Map(PLATFORMS.map((p) => [p.name, fake])), outDir });

  test("one main folder and one per platform", () => {
    expect(written).toEqual([
      join(outDir, "superfluid"),
      ...PLATFORMS.map((p) => join(outDir, `superfluid-${p.name}`)),
    ]);
  });

  test("main package: the launcher as bin, every platform pinned to the exact version", () => {
    const pkg = readJson(join(outDir, "superfluid", "package.json"));
    expect(pkg.name).toBe("superfluid");
    expect(pkg.version).toBe("1.2.3");
    expect(pkg.bin).toEqual({ superfluid: "bin/superfluid.js" });
    expect(pkg.type).toBe("module");
    expect(pkg.optionalDependencies).toEqual({
      "superfluid-linux-x64": "1.2.3",
      "superfluid-linux-arm64": "1.2.3",
      "superfluid-darwin-arm64": "1.2.3",
      "superfluid-darwin-x64": "1.2.3",
      "superfluid-windows-x64": "1.2.3",
    });
    expect(pkg.dependencies).toBeUndefined();
    const launcher = join(outDir, "superfluid", "bin", "superfluid.js");
    expect(readFileSync(launcher, "utf8")).toStartWith("#!/usr/bin/env node\n");
    if (process.platform !== "win32") expect(statSync(launcher).mode & 0o777).toBe(0o755);
    expect(existsSync(join(outDir, "superfluid", "README.md"))).toBe(true);
  });

  test("platform packages: npm's os/cpu, no bin of their own, the binary at mode 0755", () => {
    const want: Record<string, { os: string[]; cpu: string[]; exe: string; libc?: string[] }> = {
      "linux-x64": { os: ["linux"], cpu: ["x64"], exe: "superfluid", libc: ["glibc"] },
      "linux-arm64": { os: ["linux"], cpu: ["arm64"], exe: "superfluid", libc: ["glibc"] },
      "darwin-arm64": { os: ["darwin"], cpu: ["arm64"], exe: "superfluid" },
      "darwin-x64": { os: ["darwin"], cpu: ["x64"], exe: "superfluid" },
      "windows-x64": { os: ["win32"], cpu: ["x64"], exe: "superfluid.exe" },
    };
    for (const [name, w] of Object.entries(want)) {
      const dir = join(outDir, `superfluid-${name}`);
      const pkg = readJson(join(dir, "package.json"));
      expect(pkg.name).toBe(`superfluid-${name}`);
      expect(pkg.version).toBe("1.2.3");
      expect(pkg.os).toEqual(w.os);
      expect(pkg.cpu).toEqual(w.cpu);
      expect(pkg.libc).toEqual(w.libc);
      expect(pkg.bin).toBeUndefined();
      const exe = join(dir, "bin", w.exe);
      expect(readFileSync(exe, "utf8")).toBe("not a binary");
      if (process.platform !== "win32") expect(statSync(exe).mode & 0o777).toBe(0o755);
      expect(existsSync(join(dir, "README.md"))).toBe(true);
    }
  });

  test("only the platforms given are depended on; a rerun leaves no stale files", () => {
    const dir = join(tmp, "one");
    npmPackages({ version: "1.2.3", binaries: new Map([["darwin-arm64", fake]]), outDir: dir });
    writeFileSync(join(dir, "superfluid", "stale"), "");
    npmPackages({ version: "1.2.4", binaries: new Map([["linux-arm64", fake]]), outDir: dir });
    expect(readJson(join(dir, "superfluid", "package.json")).optionalDependencies).toEqual({
      "superfluid-linux-arm64": "1.2.4",
    });
    expect(existsSync(join(dir, "superfluid", "stale"))).toBe(false);
  });

  test("an unknown platform or none at all is refused", () => {
    expect(() =>
      npmPackages({ version: "1.2.3", binaries: new Map([["linux-riscv64", fake]]), outDir: join(tmp, "bad") }),
    ).toThrow(/unknown platform/);
    expect(() => npmPackages({ version: "1.2.3", binaries: new Map(), outDir: join(tmp, "bad") })).toThrow(
      /no binaries/,
    );
  });
});

// The launcher with Node, as npx runs it: node_modules/superfluid/bin/superfluid.js
// next to node_modules/superfluid-<this platform>/bin/superfluid.
const node = Bun.which("node");
const host = hostPlatform();
const canRun = node !== null && host !== undefined && process.platform !== "win32";
if (!canRun) console.warn("npm launcher tests skipped: they need node on PATH and a POSIX platform we release for");

describe.skipIf(!canRun)("launcher", () => {
  const modules = join(tmp, "project", "node_modules");
  const script = join(tmp, "fake-superfluid.sh");
  // The fake binary: prints its arguments one a line, or does what the first says.
  writeFileSync(
    script,
    `#!/bin/sh
case "$1" in
  exit) exit "$2" ;;
  cat) exec cat ;;
  die) kill -KILL $$ ;;
  wait) echo $$ > "\${FAKE_PID_FILE:-/dev/null}"; trap 'echo "got TERM"; exit 0' TERM; echo ready; while :; do sleep 0.05; done ;;
esac
for a in "$@"; do printf '<%s>\\n' "$a"; done
`,
  );
  chmodSync(script, 0o755);
  const launcher = join(modules, "superfluid", "bin", "superfluid.js");
  /** Kills the fake binary whose pid `file` holds, if it still runs. */
  const killFake = (file: string) => {
    try {
      const pid = Number(readFileSync(file, "utf8"));
      // Only while that pid is still the fake (a pid is reused once its process is gone).
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("fake-superfluid")) process.kill(pid, "SIGKILL");
    } catch {
      // Gone already, or never started.
    }
  };
  const install = () => npmPackages({ version: "0.0.1", binaries: new Map([[host!.name, script]]), outDir: modules });
  install();

  const run = (args: string[], opts: { env?: Record<string, string>; stdin?: string } = {}) => {
    const proc = Bun.spawnSync([node!, launcher, ...args], {
      env: { ...process.env, SUPERFLUID_BINARY: "", ...opts.env },
      stdin: opts.stdin === undefined ? "ignore" : new TextEncoder().encode(opts.stdin),
    });
    return { code: proc.exitCode, signal: proc.signalCode, out: proc.stdout.toString(), err: proc.stderr.toString() };
  };

  test("arguments pass through untouched", () => {
    const r = run(["serve", "--port", "0", "two words", "", "a'b\"c", "--x=$HOME"]);
    expect(r.err).toBe("");
    expect(r.out).toBe(["<serve>", "<--port>", "<0>", "<two words>", "<>", `<a'b"c>`, "<--x=$HOME>", ""].join("\n"));
    expect(r.code).toBe(0);
  });

  test("the exit status passes through", () => {
    expect(run(["exit", "0"]).code).toBe(0);
    expect(run(["exit", "1"]).code).toBe(1);
    expect(run(["exit", "2"]).code).toBe(2);
    expect(run(["exit", "77"]).code).toBe(77);
  });

  test("stdin is the binary's", () => {
    expect(run(["cat"], { stdin: "hello\n" }).out).toBe("hello\n");
  });

  test("a binary killed by a signal: the launcher dies of the same signal", () => {
    const r = run(["die"]);
    expect(r.signal).toBe("SIGKILL");
    expect(r.code).toBeNull();
  });

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    test(`${signal} to the launcher stops the binary (as SIGTERM) and its status comes back`, async () => {
      const pidFile = join(tmp, `fake-${signal}.pid`);
      const proc = Bun.spawn([node!, launcher, "wait"], {
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, SUPERFLUID_BINARY: "", FAKE_PID_FILE: pidFile },
      });
      // Hang guard: a fake binary left running (a launcher that lost the signal) would hold stdout open for ever.
      const guard = setTimeout(() => killFake(pidFile), 60_000);
      try {
        const reader = proc.stdout.getReader();
        let out = "";
        while (!out.includes("ready\n")) {
          const { value, done } = await reader.read();
          if (done) break;
          out += new TextDecoder().decode(value);
        }
        proc.kill(signal);
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          out += new TextDecoder().decode(value);
        }
        expect(await proc.exited).toBe(0);
        expect(out).toBe("ready\ngot TERM\n");
      } finally {
        clearTimeout(guard);
        killFake(pidFile);
      }
    });
  }

  test("SUPERFLUID_BINARY names the binary to run", () => {
    rmSync(join(modules, `superfluid-${host!.name}`), { recursive: true });
    const r = run(["x"], { env: { SUPERFLUID_BINARY: script } });
    expect(r.out).toBe("<x>\n");
    install();
  });

  test("no platform package: a clear error, status 1", () => {
    rmSync(join(modules, `superfluid-${host!.name}`), { recursive: true });
    const r = run(["--version"]);
    expect(r.code).toBe(1);
    expect(r.out).toBe("");
    expect(r.err).toContain(
      `the package "superfluid-${host!.name}", which holds the binary for this platform (${host!.name}), is not installed`,
    );
    expect(r.err).toContain("--omit=optional");
    install();
  });

  test("a platform without a release names the ones there are", () => {
    // A main package that depends on another platform only, as on an unsupported machine.
    const other = PLATFORMS.find((p) => p.name !== host!.name)!;
    rmSync(join(modules, `superfluid-${host!.name}`), { recursive: true });
    npmPackages({ version: "0.0.1", binaries: new Map([[other.name, script]]), outDir: modules });
    const r = run(["--version"]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`There is no superfluid binary for ${host!.name}; there are: ${other.name}.`);
    rmSync(join(modules, `superfluid-${other.name}`), { recursive: true });
    install();
  });

  test("a binary that cannot be run: the reason, status 1", () => {
    chmodSync(join(modules, `superfluid-${host!.name}`, "bin", host!.exe), 0o644);
    const r = run(["--version"]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/superfluid: cannot run .*: .*EACCES/);
    install();
  });
});
