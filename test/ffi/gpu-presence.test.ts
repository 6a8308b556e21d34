// Which GPU backends are loaded: none under --no-gpu, and Vulkan on Linux only
// where a GPU device node exists or GGML_VK_VISIBLE_DEVICES asks for a CPU-type
// device (lavapipe); the standby worker reads --no-gpu off serve's command line.
import { describe, expect, test } from "bun:test";
import { gpuBackendSkip, linuxGpuNodes } from "../../ffi/gpu-presence.ts";
import { cpuOnlyAsked } from "../../src/daemon/standby-worker.ts";

const none = () => [];
const render = () => ["/dev/dri/renderD128"];

describe("GPU backends", () => {
  test("Vulkan is skipped on Linux without a GPU device node, loaded with one", () => {
    expect(gpuBackendSkip({ name: "vulkan", env: {}, gpu: true, platform: "linux", nodes: none })).toContain(
      "no GPU device node",
    );
    expect(gpuBackendSkip({ name: "vulkan", env: {}, gpu: true, platform: "linux", nodes: render })).toBeUndefined();
  });

  test("GGML_VK_VISIBLE_DEVICES loads Vulkan where no node exists (lavapipe)", () => {
    const env = { GGML_VK_VISIBLE_DEVICES: "0" };
    expect(gpuBackendSkip({ name: "vulkan", env, gpu: true, platform: "linux", nodes: none })).toBeUndefined();
  });

  test("off Linux, and for other backends, nothing is skipped unless --no-gpu", () => {
    expect(gpuBackendSkip({ name: "vulkan", env: {}, gpu: true, platform: "win32", nodes: none })).toBeUndefined();
    expect(gpuBackendSkip({ name: "cuda", env: {}, gpu: true, platform: "linux", nodes: none })).toBeUndefined();
    expect(gpuBackendSkip({ name: "cuda", env: {}, gpu: false, platform: "linux", nodes: render })).toContain(
      "--no-gpu",
    );
    expect(gpuBackendSkip({ name: "blas", env: {}, gpu: false, platform: "linux", nodes: none })).toBeUndefined();
  });

  test("device nodes are found by name", () => {
    const list = (dir: string) =>
      dir === "/dev" ? ["null", "nvidia0", "nvidiactl", "dxg", "tty"] : ["card0", "renderD128", "by-path"];
    expect(linuxGpuNodes(list)).toEqual([
      "/dev/nvidia0",
      "/dev/nvidiactl",
      "/dev/dxg",
      "/dev/dri/card0",
      "/dev/dri/renderD128",
    ]);
  });

  test("serve's command line asks for the CPU only with --no-gpu or --gpu-layers 0, and no --device", () => {
    expect(cpuOnlyAsked(["--no-gpu"])).toBe(true);
    expect(cpuOnlyAsked(["m.gguf", "--gpu-layers", "0"])).toBe(true);
    expect(cpuOnlyAsked(["--n-gpu-layers=0"])).toBe(true);
    expect(cpuOnlyAsked(["--gpu-layers", "10"])).toBe(false);
    expect(cpuOnlyAsked(["--no-gpu", "--device", "Vulkan0"])).toBe(false);
    expect(cpuOnlyAsked([])).toBe(false);
  });
});
