// The package-manager files the release build generates: the Homebrew formula
// (Ruby syntax, its per-platform pins, and its `test do` block run against this
// checkout), the Scoop manifest (the fields and shapes Scoop's schema requires),
// and install.sh run against a loopback file server holding a fake release.
// Nothing is downloaded; ruby, dash, shellcheck and wget are used when present.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { homebrewFormula } from "../../src/release/homebrew.ts";
import { installScript } from "../../src/release/install-script.ts";
import { archiveName, PLATFORMS } from "../../src/release/platforms.ts";
import { defaultBaseUrl, type ReleaseInputs } from "../../src/release/release-inputs.ts";
import { scoopCudaManifest, scoopManifest } from "../../src/release/scoop.ts";

const root = resolve(import.meta.dir, "../..");
const version = "0.1.0";
const work = mkdtempSync(join(tmpdir(), "superfluid-pm-test-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function sha256(data: string | Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(data).digest("hex");
}

/** Distinct made-up checksums, so a formula that pins the wrong archive's sum is caught. */
function fakeInputs(baseUrl = defaultBaseUrl(version)): ReleaseInputs {
  return { version, baseUrl, checksums: new Map(PLATFORMS.map((p) => [archiveName(version, p), sha256(p.name)])) };
}

function run(cmd: string[], opts: { env?: Record<string, string | undefined>; timeout?: number } = {}) {
  const r = Bun.spawnSync(cmd, {
    env: opts.env ?? process.env,
    stdout: "pipe",
    stderr: "pipe",
    timeout: opts.timeout ?? 60_000,
  });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

/** For commands that call back into this process (the loopback file server): spawnSync would block the server. */
async function runAsync(cmd: string[], env: Record<string, string>) {
  const child = Bun.spawn(cmd, { env, stdout: "pipe", stderr: "pipe" });
  const guard = setTimeout(() => child.kill(), 120_000); // hang guard only
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  clearTimeout(guard);
  return { code, stdout, stderr };
}

const ruby = Bun.which("ruby");
const unixShell = process.platform !== "win32" && Bun.which("sh") !== null && Bun.which("tar") !== null;

// A stand-in for the parts of Homebrew's Formula DSL the generated formula uses:
// it records which URL and sha256 sit under which OS and CPU block, and runs the
// `test do` block with `bin` and `testpath` set as `brew test` would.
const FORMULA_SHIM = `
require "json"
require "pathname"
require "socket"

class Formula
  class << self
    attr_reader :test_block
    def fields; @fields ||= {}; end
    def downloads; @downloads ||= []; end
    %w[desc homepage version license].each { |m| define_method(m) { |v| fields[m] = v } }
    def on_macos; @os = "darwin"; yield; @os = nil; end
    def on_linux; @os = "linux"; yield; @os = nil; end
    def on_arm; @arch = "arm64"; yield; @arch = nil; end
    def on_intel; @arch = "x64"; yield; @arch = nil; end
    def url(u); downloads << { "os" => @os, "arch" => @arch, "url" => u }; end
    def sha256(s); downloads.last["sha256"] = s; end
    def test(&block); @test_block = block; end
  end

  attr_reader :bin, :testpath
  def initialize(bin, testpath); @bin = bin; @testpath = testpath; end
  def version; self.class.fields["version"]; end
  def free_port; s = TCPServer.new("127.0.0.1", 0); port = s.addr[1]; s.close; port; end
  def shell_output(cmd); out = \`#{cmd}\`; raise "#{cmd} exited #{$?.exitstatus}" unless $?.success?; out; end
  def assert(ok, msg = "assertion failed"); raise msg unless ok; end
  def assert_equal(want, got); raise "expected #{want.inspect}, got #{got.inspect}" unless want == got; end
  def assert_match(want, got); raise "expected #{got.inspect} to contain #{want.inspect}" unless got.include?(want); end
end

load ARGV[0]
if ARGV[1] == "describe"
  puts JSON.generate({ "fields" => Superfluid.fields, "downloads" => Superfluid.downloads, "test" => !Superfluid.test_block.nil? })
else
  Superfluid.new(Pathname(ARGV[2]), Pathname(ARGV[3])).instance_eval(&Superfluid.test_block)
  puts "formula test passed"
end
`;

describe("Homebrew formula", () => {
  const inputs = fakeInputs();
  const formula = homebrewFormula(inputs);
  const formulaPath = join(work, "superfluid.rb");
  const shimPath = join(work, "formula-shim.rb");
  writeFileSync(formulaPath, formula);
  writeFileSync(shimPath, FORMULA_SHIM);

  test("names the class, installs the one executable, and has no license line while package.json has none", () => {
    expect(formula).toContain("class Superfluid < Formula");
    expect(formula).toContain('bin.install "superfluid"');
    expect(formula).not.toContain("license");
    expect(homebrewFormula({ ...inputs, license: "MIT" })).toContain('  license "MIT"\n');
  });

  test("refuses to write a formula when an archive's checksum is missing", () => {
    const checksums = new Map(inputs.checksums);
    checksums.delete(archiveName(version, "darwin-arm64"));
    expect(() => homebrewFormula({ ...inputs, checksums })).toThrow(
      /no checksum for superfluid-0.1.0-darwin-arm64.tar.gz/,
    );
  });

  test.skipIf(!ruby)("ruby -c accepts it", () => {
    const r = run([ruby!, "-c", formulaPath]);
    expect(r.stdout.trim()).toBe("Syntax OK");
    expect(r.code).toBe(0);
  });

  test.skipIf(!ruby)("each macOS/Linux CPU block pins its own archive's URL and sha256", () => {
    const r = run([ruby!, shimPath, formulaPath, "describe"]);
    expect(r.stderr).toBe("");
    const described = JSON.parse(r.stdout);
    expect(described.fields).toEqual({
      desc: expect.any(String),
      homepage: "https://github.com/superfluid/superfluid",
      version,
    });
    expect(described.fields.desc.length).toBeLessThan(80); // Homebrew's audit limit
    const want = PLATFORMS.filter((p) => p.os !== "windows").map((p) => ({
      os: p.os,
      arch: p.arch,
      url: `https://github.com/superfluid/superfluid/releases/download/v${version}/superfluid-${version}-${p.name}.tar.gz`,
      sha256: inputs.checksums.get(archiveName(version, p)),
    }));
    const key = (d: { os: string; arch: string }) => `${d.os}-${d.arch}`;
    expect([...described.downloads].sort((a, b) => key(a).localeCompare(key(b)))).toEqual(
      want.sort((a, b) => key(a).localeCompare(key(b))),
    );
    expect(described.test).toBe(true);
  });

  // The `test do` block against this checkout's server (run from source by a
  // wrapper standing in for the installed binary): --version, then a one-token
  // chat on the built-in model.
  test.skipIf(!ruby || process.platform === "win32")(
    "its test block passes against superfluid (--version and a one-token chat)",
    () => {
      const bin = join(work, "brew-bin");
      const testpath = join(work, "brew-testpath");
      mkdirSync(bin, { recursive: true });
      mkdirSync(testpath, { recursive: true });
      writeFileSync(
        join(bin, "superfluid"),
        `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(root, "src/main.ts"))} "$@"\n`,
      );
      chmodSync(join(bin, "superfluid"), 0o755);
      const r = run([ruby!, shimPath, formulaPath, "test", bin, testpath], { timeout: 300_000 });
      if (r.code !== 0) console.error(r.stderr);
      expect(r.stdout).toContain("formula test passed");
      expect(r.code).toBe(0);
      // Its cache and session log stayed inside testpath.
      expect(existsSync(join(testpath, "cache"))).toBe(true);
      expect(existsSync(join(testpath, "s", "wal.log"))).toBe(true);
    },
  );
});

describe("Scoop manifest", () => {
  const inputs = fakeInputs();
  const text = scoopManifest(inputs);
  const manifest = JSON.parse(text);
  const winArchive = archiveName(version, "windows-x64");

  // What Scoop's schema.json (ScoopInstaller/Scoop) requires of a manifest with
  // per-architecture URLs, written out as checks: required version, homepage
  // and license; no property outside its list; hashes of 64 hex digits; URLs
  // without `$` outside autoupdate; a hash-extraction URL built on $url or $baseurl.
  test("has the fields Scoop's schema requires, in the shapes it allows", () => {
    const topLevel = [
      "$schema",
      "##",
      "_comment",
      "architecture",
      "autoupdate",
      "bin",
      "checkver",
      "cookie",
      "depends",
      "description",
      "env_add_path",
      "env_set",
      "extract_dir",
      "extract_to",
      "hash",
      "homepage",
      "innosetup",
      "installer",
      "license",
      "msi",
      "notes",
      "persist",
      "post_install",
      "post_uninstall",
      "pre_install",
      "pre_uninstall",
      "psmodule",
      "shortcuts",
      "suggest",
      "uninstaller",
      "url",
      "version",
    ];
    for (const key of Object.keys(manifest)) expect(topLevel).toContain(key);
    expect(manifest.version).toMatch(/^[\w.\-+]+$/);
    expect(manifest.homepage).toMatch(/^https:\/\/\S+$/);
    expect(typeof manifest.license).toBe("string");
    expect(typeof manifest.description).toBe("string");
    // With no top-level url, each architecture must carry one.
    expect(manifest.url).toBeUndefined();
    expect(Object.keys(manifest.architecture)).toEqual(["64bit"]);
    const arch = manifest.architecture["64bit"];
    expect(Object.keys(arch).sort()).toEqual(["hash", "url"]);
    expect(arch.url).toMatch(/^https:\/\/[^\s$]+$/);
    expect(arch.hash).toMatch(/^[a-f0-9]{64}$/);
    expect(manifest.bin).toBe("superfluid.exe");
    expect(Object.keys(manifest.checkver)).toEqual(["github"]);
    expect(manifest.checkver.github).toMatch(/^https:\/\/github\.com\/[^/]+\/[^/]+$/);
    expect(Object.keys(manifest.autoupdate)).toEqual(["architecture"]);
    expect(Object.keys(manifest.autoupdate.architecture)).toEqual(["64bit"]);
    const auto = manifest.autoupdate.architecture["64bit"];
    expect(Object.keys(auto).sort()).toEqual(["hash", "url"]);
    expect(auto.url).toMatch(/^https:\/\/\S+$/);
    expect(Object.keys(auto.hash)).toEqual(["url"]);
    expect(auto.hash.url).toMatch(/^.*(\$url|\$baseurl).*$/);
  });

  test("pins the Windows archive and derives later versions' URLs and hashes from the release folder", () => {
    const arch = manifest.architecture["64bit"];
    expect(arch.url).toBe(`https://github.com/superfluid/superfluid/releases/download/v${version}/${winArchive}`);
    expect(arch.hash).toBe(inputs.checksums.get(winArchive)!);
    expect(manifest.license).toBe("Unknown");
    expect(JSON.parse(scoopManifest({ ...inputs, license: "MIT" })).license).toBe("MIT");
    const auto = manifest.autoupdate.architecture["64bit"];
    expect(auto.url).toBe(
      "https://github.com/superfluid/superfluid/releases/download/v$version/superfluid-$version-windows-x64.zip",
    );
    // Scoop substitutes $version and reads the new archive's line from SHA256SUMS beside it.
    expect(auto.url.replaceAll("$version", version)).toBe(arch.url);
    expect(auto.hash.url).toBe("$baseurl/SHA256SUMS");
    expect(text.endsWith("}\n")).toBe(true);
  });

  test("superfluid-cuda.json pins the windows-x64-cuda archive the same way, and says what the host needs", () => {
    const cudaArchive = `superfluid-${version}-windows-x64-cuda.zip`;
    const cuda = JSON.parse(
      scoopCudaManifest({ ...inputs, checksums: new Map([...inputs.checksums, [cudaArchive, sha256("cuda")]]) }),
    );
    expect(cuda.architecture["64bit"].url).toBe(
      `https://github.com/superfluid/superfluid/releases/download/v${version}/${cudaArchive}`,
    );
    expect(cuda.architecture["64bit"].hash).toBe(sha256("cuda"));
    expect(cuda.autoupdate.architecture["64bit"].url).toEndWith("/superfluid-$version-windows-x64-cuda.zip");
    expect(cuda.description).toContain("CUDA build: needs the NVIDIA driver");
    expect(cuda.bin).toBe("superfluid.exe");
    expect(() => scoopCudaManifest(inputs)).toThrow(/no checksum for superfluid-0.1.0-windows-x64-cuda.zip/);
  });

  test("refuses to write a manifest without the Windows archive's checksum", () => {
    const checksums = new Map(inputs.checksums);
    checksums.delete(winArchive);
    expect(() => scoopManifest({ ...inputs, checksums })).toThrow(/no checksum/);
    checksums.set(winArchive, "not-a-sum");
    expect(() => scoopManifest({ ...inputs, checksums })).toThrow(/not 64 lowercase hex/);
  });
});

describe.skipIf(!unixShell)("install.sh", () => {
  const released = installScript({ version, baseUrl: defaultBaseUrl(version) });
  const releasedPath = join(work, "install.sh");
  writeFileSync(releasedPath, released);

  // The fake release: for each version folder, a tar.gz per Unix platform whose
  // `superfluid` is a shell script printing its version and platform, and SHA256SUMS.
  const site = join(work, "site");
  let server: ReturnType<typeof Bun.serve>;
  let origin = "";

  function fakeArchive(dir: string, v: string, platform: string, payload = `superfluid ${v} ${platform}`): Buffer {
    const stage = join(work, "stage", `${v}-${platform}-${Math.random().toString(36).slice(2)}`);
    mkdirSync(stage, { recursive: true });
    writeFileSync(join(stage, "superfluid"), `#!/bin/sh\necho "${payload}"\n`);
    chmodSync(join(stage, "superfluid"), 0o755);
    writeFileSync(join(stage, "README.md"), "# superfluid\n");
    mkdirSync(dir, { recursive: true });
    const out = join(dir, `superfluid-${v}-${platform}.tar.gz`);
    const r = run(["tar", "-czf", out, "-C", stage, "superfluid", "README.md"]);
    if (r.code !== 0) throw new Error(`tar failed: ${r.stderr}`);
    return readFileSync(out);
  }

  function release(folder: string, v: string, platforms: string[]): string[] {
    const dir = join(site, folder);
    return platforms.map((p) => `${sha256(fakeArchive(dir, v, p))}  superfluid-${v}-${p}.tar.gz`);
  }

  beforeAll(() => {
    // The Unix platforms and the CUDA build of linux-x64 (install.sh --cuda).
    const unix = [...PLATFORMS.filter((p) => p.archiveExt === "tar.gz").map((p) => p.name), "linux-x64-cuda"];
    writeFileSync(join(site, "v0.1.0", "SHA256SUMS"), `${release("v0.1.0", version, unix).join("\n")}\n`);
    writeFileSync(join(site, "v0.2.0", "SHA256SUMS"), `${release("v0.2.0", "0.2.0", ["linux-x64"]).join("\n")}\n`);
    // The archive is swapped after SHA256SUMS was written: same name, other bytes.
    const sums = release("tampered", version, ["linux-x64"]);
    writeFileSync(join(site, "tampered", "SHA256SUMS"), `${sums.join("\n")}\n`);
    fakeArchive(join(site, "tampered"), version, "linux-x64", "superfluid 0.1.0 linux-x64 (tampered)");
    // SHA256SUMS lists every archive but this one.
    release("unlisted", version, ["linux-x64"]);
    writeFileSync(join(site, "unlisted", "SHA256SUMS"), `${sha256("x")}  superfluid-${version}-linux-arm64.tar.gz\n`);

    server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        const path = join(site, decodeURIComponent(new URL(req.url).pathname));
        if (!path.startsWith(`${site}/`) || !existsSync(path)) return new Response("not found", { status: 404 });
        return new Response(Bun.file(path));
      },
    });
    origin = `http://127.0.0.1:${server.port}`;
  });
  afterAll(() => server?.stop(true));

  /**
   * A folder of stand-ins put first on PATH: `uname` answering as the machine asked for, and `sysctl` (Rosetta check).
   */
  function fakeMachine(os: string, cpu: string, rosetta = false): string {
    const dir = mkdtempSync(join(work, "machine-"));
    writeFileSync(
      join(dir, "uname"),
      `#!/bin/sh\ncase "$1" in -s) echo ${os} ;; -m) echo ${cpu} ;; *) echo ${os} ;; esac\n`,
    );
    writeFileSync(join(dir, "sysctl"), rosetta ? "#!/bin/sh\necho 1\n" : "#!/bin/sh\nexit 1\n");
    chmodSync(join(dir, "uname"), 0o755);
    chmodSync(join(dir, "sysctl"), 0o755);
    return dir;
  }

  interface Install {
    os?: string;
    cpu?: string;
    rosetta?: boolean;
    shell?: string;
    script?: string;
    env?: Record<string, string | undefined>;
    path?: string;
    args?: string[];
  }

  async function install(o: Install = {}) {
    const prefix = mkdtempSync(join(work, "prefix-"));
    rmSync(prefix, { recursive: true }); // so "nothing installed" can mean "not even created"
    const home = mkdtempSync(join(work, "home-"));
    const machine = fakeMachine(o.os ?? "Linux", o.cpu ?? "x86_64", o.rosetta);
    const env: Record<string, string | undefined> = {
      PATH: `${machine}:${o.path ?? process.env.PATH}`,
      HOME: home,
      SUPERFLUID_PREFIX: prefix,
      SUPERFLUID_BASE_URL: `${origin}/v0.1.0`,
      ...o.env,
    };
    const r = await runAsync(
      [Bun.which(o.shell ?? "sh")!, o.script ?? releasedPath, ...(o.args ?? [])],
      Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)) as Record<string, string>,
    );
    return { ...r, prefix, home, bin: join(prefix, "bin", "superfluid") };
  }

  function ranAs(binary: string): string {
    return run([binary]).stdout.trim();
  }

  test("parses as POSIX sh (sh -n, dash -n) and passes shellcheck where installed", () => {
    expect(run(["sh", "-n", releasedPath]).code).toBe(0);
    const dash = Bun.which("dash");
    if (dash) expect(run([dash, "-n", releasedPath]).code).toBe(0);
    const shellcheck = Bun.which("shellcheck");
    if (shellcheck) {
      const r = run([shellcheck, "-s", "sh", releasedPath]);
      expect(r.stdout).toBe("");
      expect(r.code).toBe(0);
    }
  });

  test("downloads from GitHub's release folder by default, version templated in", () => {
    expect(released).toContain(`base_url="https://github.com/superfluid/superfluid/releases/download/v$version"`);
    expect(released).toContain(`version=\${SUPERFLUID_VERSION:-${version}}`);
    expect(() => installScript({ version, baseUrl: 'https://example.com/"; rm -rf /' })).toThrow(/cannot be written/);
  });

  for (const shell of ["sh", "dash", "bash"]) {
    test.skipIf(!Bun.which(shell))(`installs and verifies the linux-x64 binary (${shell})`, async () => {
      const r = await install({ shell });
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`downloading ${origin}/v0.1.0/superfluid-0.1.0-linux-x64.tar.gz`);
      expect(r.stdout).toContain(
        `sha256 verified: ${sha256(readFileSync(join(site, "v0.1.0", "superfluid-0.1.0-linux-x64.tar.gz")))}`,
      );
      expect(r.stdout).toContain(`installed superfluid 0.1.0 linux-x64 (linux-x64) to ${r.bin}`);
      expect(r.stdout).toContain(`${join(r.prefix, "bin")} is not on your PATH`);
      expect(r.stdout).toContain(`export PATH="${join(r.prefix, "bin")}:$PATH"`);
      expect(ranAs(r.bin)).toBe("superfluid 0.1.0 linux-x64");
      expect(existsSync(join(r.prefix, "bin", "README.md"))).toBe(false);
    });
  }

  const machines: [os: string, cpu: string, rosetta: boolean, platform: string][] = [
    ["Linux", "amd64", false, "linux-x64"],
    ["Linux", "aarch64", false, "linux-arm64"],
    ["Linux", "arm64", false, "linux-arm64"],
    ["Darwin", "arm64", false, "darwin-arm64"],
    ["Darwin", "x86_64", false, "darwin-x64"],
    ["Darwin", "x86_64", true, "darwin-arm64"], // a shell under Rosetta 2 on Apple silicon
  ];
  for (const [os, cpu, rosetta, platform] of machines) {
    test(`${os} ${cpu}${rosetta ? " under Rosetta" : ""} gets ${platform}`, async () => {
      const r = await install({ os, cpu, rosetta });
      expect(r.code).toBe(0);
      expect(ranAs(r.bin)).toBe(`superfluid 0.1.0 ${platform}`);
    });
  }

  test("--cuda installs the CUDA build on linux-x64, verified the same way", async () => {
    const r = await install({ args: ["--cuda"] });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`downloading ${origin}/v0.1.0/superfluid-0.1.0-linux-x64-cuda.tar.gz`);
    expect(r.stdout).toContain(`installed superfluid 0.1.0 linux-x64-cuda (linux-x64-cuda) to ${r.bin}`);
    expect(ranAs(r.bin)).toBe("superfluid 0.1.0 linux-x64-cuda");
  });

  test("--cuda where there is no CUDA build, or an unknown argument: exit 1, nothing downloaded or installed", async () => {
    const mac = await install({ os: "Darwin", cpu: "arm64", args: ["--cuda"] });
    expect(mac.code).toBe(1);
    expect(mac.stderr).toContain("no CUDA build for darwin-arm64 (there is one for: linux-x64)");
    expect(mac.stdout).not.toContain("downloading");
    expect(existsSync(mac.prefix)).toBe(false);
    const odd = await install({ args: ["--rocm"] });
    expect(odd.code).toBe(1);
    expect(odd.stderr).toContain("unknown argument --rocm (the one argument is --cuda)");
    expect(existsSync(odd.prefix)).toBe(false);
  });

  test("installs to ~/.local/bin without SUPERFLUID_PREFIX, and gives no PATH hint when it is on PATH", async () => {
    const home = mkdtempSync(join(work, "home-"));
    const bindir = join(home, ".local", "bin");
    const r = await install({
      env: { SUPERFLUID_PREFIX: undefined, HOME: home },
      path: `${bindir}:${process.env.PATH}`,
    });
    expect(r.code).toBe(0);
    expect(ranAs(join(bindir, "superfluid"))).toBe("superfluid 0.1.0 linux-x64");
    expect(r.stdout).not.toContain("not on your PATH");
  });

  test("SUPERFLUID_VERSION picks another release from the templated base URL, replacing the installed binary", async () => {
    const script = join(work, "install-local.sh");
    writeFileSync(script, installScript({ version, baseUrl: `${origin}/v${version}` }));
    const first = await install({ script, env: { SUPERFLUID_BASE_URL: undefined } });
    expect(first.code).toBe(0);
    expect(ranAs(first.bin)).toBe("superfluid 0.1.0 linux-x64");
    const second = await runAsync(["sh", script], {
      PATH: `${fakeMachine("Linux", "x86_64")}:${process.env.PATH}`,
      HOME: first.home,
      SUPERFLUID_PREFIX: first.prefix,
      SUPERFLUID_VERSION: "v0.2.0",
    });
    expect(second.code).toBe(0);
    expect(second.stdout).toContain(`downloading ${origin}/v0.2.0/superfluid-0.2.0-linux-x64.tar.gz`);
    expect(ranAs(first.bin)).toBe("superfluid 0.2.0 linux-x64");
  });

  test("refuses a tampered archive: exit 1, nothing installed", async () => {
    const r = await install({ env: { SUPERFLUID_BASE_URL: `${origin}/tampered` } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("checksum mismatch for superfluid-0.1.0-linux-x64.tar.gz");
    expect(r.stderr).toContain("nothing installed");
    expect(existsSync(r.prefix)).toBe(false);
  });

  test("refuses an archive SHA256SUMS does not list: exit 1, nothing installed", async () => {
    const r = await install({ env: { SUPERFLUID_BASE_URL: `${origin}/unlisted` } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("SHA256SUMS has no line for superfluid-0.1.0-linux-x64.tar.gz");
    expect(existsSync(r.prefix)).toBe(false);
  });

  test("fails on a release that is not there (404): exit 1, nothing installed", async () => {
    const r = await install({ env: { SUPERFLUID_VERSION: "9.9.9" } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("could not download");
    expect(existsSync(r.prefix)).toBe(false);
  });

  const unknown: [os: string, cpu: string, message: string][] = [
    ["SunOS", "i86pc", "no superfluid release for the operating system SunOS"],
    ["FreeBSD", "amd64", "no superfluid release for the operating system FreeBSD"],
    ["Linux", "riscv64", "no superfluid release for the CPU riscv64"],
    ["Linux", "i686", "no superfluid release for the CPU i686"],
    ["MINGW64_NT-10.0-22631", "x86_64", "on Windows install with Scoop"],
  ];
  for (const [os, cpu, message] of unknown) {
    test(`refuses an unknown platform (${os} ${cpu}): exit 1, nothing downloaded or installed`, async () => {
      const r = await install({ os, cpu });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(message);
      expect(r.stdout).not.toContain("downloading");
      expect(existsSync(r.prefix)).toBe(false);
    });
  }

  // Machines with wget but no curl, and shasum (macOS) but no sha256sum: a PATH
  // holding only the tools the script needs, without curl or sha256sum.
  const toolbox = ["wget", "shasum", "awk", "cut", "tar", "gzip", "mktemp", "rm", "mkdir", "cp", "chmod", "mv"];
  const haveToolbox = toolbox.every((t) => Bun.which(t));
  test.skipIf(!haveToolbox)("works with wget and shasum when curl and sha256sum are absent", async () => {
    const tools = mkdtempSync(join(work, "tools-"));
    for (const t of toolbox) symlinkSync(Bun.which(t)!, join(tools, t));
    const r = await install({ path: tools });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(ranAs(r.bin)).toBe("superfluid 0.1.0 linux-x64");
    const tampered = await install({ path: tools, env: { SUPERFLUID_BASE_URL: `${origin}/tampered` } });
    expect(tampered.code).toBe(1);
    expect(tampered.stderr).toContain("checksum mismatch");
    expect(existsSync(tampered.prefix)).toBe(false);
  });
});
