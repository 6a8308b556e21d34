// A GPU backend that does not load (a CUDA build on a machine without the
// toolkit: libcudart missing) is named with the loader's reason, and the
// engine runs on the CPU; a --device naming its GPU is refused with that
// reason. Simulated with the CPU library's files and an unloadable
// libggml-cuda.so beside them.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { locateLibrary } from "../../ffi/locate.ts";
import { fixturePath } from "../support/models.ts";

const ROOT = resolve(import.meta.dir, "../..");
const dir = mkdtempSync(join(tmpdir(), "sf-no-cuda-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const source = locateLibrary().dir;
for (const f of readdirSync(source)) symlinkSync(join(source, f), join(dir, f));
writeFileSync(join(dir, "libggml-cuda.so"), "not a library\n");
const env = { ...process.env, SUPERFLUID_LLAMA_LIB: dir, SUPERFLUID_QUIET: "1" };

test.skipIf(process.platform === "win32")("check --devices names the backend that did not load and why", () => {
  const r = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), "check", "--devices"], { env });
  const out = r.stdout.toString();
  expect(r.exitCode).toBe(0);
  expect(out).toMatch(/backend libggml-cuda\.so did not load: .*libggml-cuda\.so: (file too short|invalid ELF header)/);
  expect(out).toContain("CPU: cpu");
});

test.skipIf(process.platform === "win32")(
  "serve --device CUDA0 is refused naming the backend's failure; without it, the CPU serves and the log says why",
  async () => {
    const model = await fixturePath("tiny-random");
    const serve = (extra: string[]) =>
      Bun.spawn(
        [process.execPath, join(ROOT, "src/main.ts"), "serve", model, "--http", "127.0.0.1:0", "--no-tui"]
          .concat(["--max-batch", "1", "--max-context", "512", "--threads", "1", "--sessions", join(dir, "s")])
          .concat(extra),
        { env, stdout: "ignore", stderr: "pipe" },
      );
    const refused = serve(["--device", "CUDA0"]);
    const err = await new Response(refused.stderr).text();
    expect(await refused.exited).toBe(1);
    expect(err).toMatch(
      /--device CUDA0: no such device; this machine has CPU \(cpu\); libggml-cuda\.so did not load: /,
    );

    const served = serve([]);
    const reader = served.stderr.pipeThrough(new TextDecoderStream()).getReader();
    let log = "";
    while (!/serving .* at http/.test(log)) {
      const { value, done } = await reader.read();
      if (done) break;
      log += value;
    }
    served.kill("SIGTERM");
    await served.exited;
    expect(log).toMatch(/the GPU backend libggml-cuda\.so did not load \(.*\); its devices are not used/);
    expect(log).toContain("serving");
  },
  120_000,
);
