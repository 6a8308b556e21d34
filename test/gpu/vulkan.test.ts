// GPU offload on a real Vulkan device: Mesa's lavapipe (Vulkan on the CPU,
// `apt-get install mesa-vulkan-drivers libvulkan1`; .ci/run installs it) with the
// @node-llama-cpp Vulkan build (SUPERFLUID_LLAMA_LIB=vulkan). llama.cpp skips
// CPU-type Vulkan devices unless GGML_VK_VISIBLE_DEVICES names them, and its own
// CI runs lavapipe without f16 and cooperative matrices. Skipped, with the
// reason printed, where either the package or a Vulkan device is missing.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fixturePath } from "../support/models.ts";

const ROOT = resolve(import.meta.dir, "../..");
const VULKAN_ENV = {
  ...process.env,
  SUPERFLUID_LLAMA_LIB: "vulkan",
  GGML_VK_VISIBLE_DEVICES: "0",
  GGML_VK_DISABLE_F16: "1",
  GGML_VK_DISABLE_COOPMAT: "1",
  SUPERFLUID_QUIET: "1",
};

/** Why the Vulkan tests cannot run here, or undefined when a Vulkan device is listed. */
function missingVulkan(): string | undefined {
  if (process.platform !== "linux" || process.arch !== "x64") return "the Vulkan package is for linux-x64";
  const r = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), "check", "--devices"], { env: VULKAN_ENV });
  const out = `${r.stdout.toString()}${r.stderr.toString()}`;
  if (r.exitCode !== 0) return `superfluid check failed: ${out.trim().split("\n").pop()}`;
  if (!/Vulkan0: gpu/.test(out)) return "no Vulkan device (install mesa-vulkan-drivers and libvulkan1 for lavapipe)";
  return undefined;
}

const missing = missingVulkan();
if (missing) console.log(`test/gpu/vulkan.test.ts skipped: ${missing}`);

const work = mkdtempSync(join(tmpdir(), "sf-vulkan-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface Served {
  url: string;
  log: string[];
  stop(): Promise<void>;
}

/** `superfluid serve` in its own process (its libllama is the Vulkan build), up once it names its URL. */
async function serve(model: string, flags: string[], name: string): Promise<Served> {
  const proc = Bun.spawn(
    [
      process.execPath,
      join(ROOT, "src/main.ts"),
      "serve",
      model,
      "--http",
      "127.0.0.1:0",
      "--threads",
      "1",
      "--max-batch",
      "2",
      "--max-context",
      "512",
      "--no-tui",
      "--sessions",
      join(work, name),
      ...flags,
    ],
    { env: VULKAN_ENV, stdout: "ignore", stderr: "pipe" },
  );
  const log: string[] = [];
  const reader = proc.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`serve exited before it served:\n${log.join("\n")}${buffered}`);
    buffered += value;
    const lines = buffered.split("\n");
    buffered = lines.pop()!;
    log.push(...lines);
    const url = lines.map((l) => /serving .* at (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(l)?.[1]).find(Boolean);
    if (url) {
      void (async () => {
        while (!(await reader.read()).done);
      })();
      return {
        url,
        log,
        async stop() {
          proc.kill("SIGTERM");
          await proc.exited;
        },
      };
    }
  }
}

/** A GET's JSON body. */
async function json(url: string): Promise<any> {
  return (await fetch(url)).json();
}

async function chat(url: string, content: string, maxTokens: number, extra: object = {}): Promise<any> {
  const model = (await json(`${url}/v1/models`)).data[0].id;
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model,
      messages: [{ role: "user", content }],
      max_tokens: maxTokens,
      temperature: 0,
      ...extra,
    }),
  });
  const body = await r.json();
  expect({ status: r.status, body }).toMatchObject({ status: 200 });
  return body;
}

describe.skipIf(missing !== undefined)("Vulkan offload on lavapipe", () => {
  test("the built-in model fully offloaded: placement reported everywhere, the CPU's exact reply", async () => {
    const model = await fixturePath("tiny-chat");
    const cpu = await serve(model, ["--no-gpu"], "cpu");
    let cpuReply: string;
    try {
      const runtime = (await json(`${cpu.url}/v1/models`)).data[0].runtime;
      // --no-gpu loads no GPU backend (ffi/gpu-presence.ts): no Vulkan instance, no placement to report.
      expect(runtime.offload).toBeNull();
      expect(cpu.log.find((l) => l.includes("offload:"))).toBeUndefined();
      expect(runtime.devices.map((d: { name: string }) => d.name)).toEqual(["CPU"]);
      cpuReply = (await chat(cpu.url, "hi", 16)).choices[0].message.content;
    } finally {
      await cpu.stop();
    }
    const gpu = await serve(model, ["--gpu-layers", "all"], "gpu");
    try {
      expect(gpu.log.find((l) => l.includes("offload:"))).toMatch(
        /offload: 1 of 1 layers and the output layer on Vulkan0 \(llvmpipe.*\): .* weights \+ .* KV; CPU: .* \(--gpu-layers all\)/,
      );
      const runtime = (await json(`${gpu.url}/v1/models`)).data[0].runtime;
      expect(runtime.offload.gpu_layers).toBe(2);
      expect(runtime.offload.devices).toHaveLength(1);
      const placed = runtime.offload.devices[0];
      expect(placed.name).toBe("Vulkan0");
      expect(placed.layers).toBe(1);
      expect(placed.weight_bytes).toBeGreaterThan(0);
      expect(placed.kv_bytes).toBeGreaterThan(0);
      const props = await json(`${gpu.url}/props`);
      expect(props.offload).toEqual(runtime.offload);
      const ps = await json(`${gpu.url}/api/ps`);
      expect(ps.models[0].size_vram).toBe(placed.weight_bytes + placed.kv_bytes);
      const metrics = await (await fetch(`${gpu.url}/metrics`)).text();
      expect(metrics).toMatch(/superfluid_device_layers\{model="[^"]+",device="Vulkan0"\} 1/);
      expect(metrics).toContain(
        `superfluid_device_model_bytes{model="${(await json(`${gpu.url}/v1/models`)).data[0].id}",device="Vulkan0",kind="weights"} ${placed.weight_bytes}`,
      );
      expect(metrics).toMatch(/superfluid_device_memory_bytes\{[^}]*device="Vulkan0",type="gpu",kind="total"\} \d+/);
      // Hand-set weights leave every choice a wide margin: Vulkan's rounding cannot change a token.
      expect((await chat(gpu.url, "hi", 16)).choices[0].message.content).toBe(cpuReply);
    } finally {
      await gpu.stop();
    }
  }, 300_000);

  test("a random-weight model half offloaded: one of two layers on the device, a valid greedy reply", async () => {
    const model = await fixturePath("tiny-random");
    // n_gpu_layers 2: the output layer and the last of the two repeating layers.
    const gpu = await serve(model, ["--gpu-layers", "2"], "half");
    try {
      expect(gpu.log.find((l) => l.includes("offload:"))).toMatch(
        /offload: 1 of 2 layers and the output layer on Vulkan0/,
      );
      const runtime = (await json(`${gpu.url}/v1/models`)).data[0].runtime;
      expect(runtime.offload.devices[0].layers).toBe(1);
      expect(runtime.offload.host_weight_bytes).toBeGreaterThan(0);
      // Random weights give near ties that the device's rounding may break either way, so the
      // reply is checked for shape, not compared token by token with the CPU's.
      const reply = await chat(gpu.url, "hello there", 8, { ignore_eos: true });
      expect(reply.usage.completion_tokens).toBe(8);
      expect(reply.choices[0].finish_reason).toBe("length");
    } finally {
      await gpu.stop();
    }
  }, 300_000);

  test("--device naming no such device is refused at startup with the list", async () => {
    const model = await fixturePath("tiny-random");
    await expect(serve(model, ["--device", "CUDA0"], "nodevice")).rejects.toThrow(
      /--device CUDA0: no such device; this machine has Vulkan0 \(gpu\), CPU \(cpu\)/,
    );
  }, 300_000);
});
