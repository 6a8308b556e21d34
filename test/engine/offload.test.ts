// The offload plan (src/engine/offload.ts): llama.cpp's placement rules applied to
// a model's layer sizes and the devices' free memory, before any weight loads.
import { describe, expect, test } from "bun:test";
import type { DeviceFacts } from "../../ffi/devices.ts";
import {
  chooseDevices,
  DEFAULT_OFFLOAD,
  deviceReserveBytes,
  layerBytesOf,
  OffloadError,
  offloadFlags,
  parseGpuLayers,
  parseTensorSplit,
  planOffload,
  type LayerBytes,
} from "../../src/engine/offload.ts";
import { parseWorkerArgs } from "../../src/worker/args.ts";
import { readGgufSync } from "../../src/gguf/index.ts";
import { fixturePath } from "../support/models.ts";

const MiB = 2 ** 20;
const GiB = 2 ** 30;

function gpu(name: string, freeBytes: number, totalBytes = freeBytes): DeviceFacts {
  return { name, description: `${name} card`, type: "gpu", freeBytes, totalBytes };
}

/** 10 layers of 100 MiB, a 50 MiB output layer, 80 MiB of embeddings. */
const MODEL: LayerBytes = { layers: new Array(10).fill(100 * MiB), output: 50 * MiB, host: 80 * MiB };
const TOTAL = 10 * 100 * MiB + 50 * MiB + 80 * MiB;

describe("planOffload", () => {
  test("no GPU: every layer on the CPU", () => {
    const plan = planOffload(DEFAULT_OFFLOAD, [], MODEL, 0);
    expect(plan.gpuLayers).toBe(0);
    expect(plan.devices).toEqual([]);
    expect(plan.hostWeightBytes).toBe(TOTAL);
    expect(plan.summary).toContain("no GPU found");
  });

  test("auto on a device that holds it all: every layer and the output layer", () => {
    const plan = planOffload(DEFAULT_OFFLOAD, [gpu("Vulkan0", 8 * GiB)], MODEL, 10 * MiB);
    expect(plan.gpuLayers).toBe(11);
    expect(plan.devices).toEqual([
      {
        name: "Vulkan0",
        description: "Vulkan0 card",
        layers: 10,
        weightBytes: 1050 * MiB,
        kvBytes: 100 * MiB,
      },
    ]);
    expect(plan.hostWeightBytes).toBe(80 * MiB);
  });

  test("auto on a small device: the last layers that fit with their KV and the reserve, the rest on the CPU", () => {
    const device = gpu("CUDA0", 1 * GiB);
    const plan = planOffload(DEFAULT_OFFLOAD, [device], MODEL, 10 * MiB);
    const room = device.freeBytes - deviceReserveBytes(device);
    // The output layer goes first (n_gpu_layers 1), then each layer with its KV.
    const layers = Math.floor((room - 50 * MiB) / (110 * MiB));
    expect(layers).toBeLessThan(10);
    expect(plan.gpuLayers).toBe(layers + 1);
    const placed = plan.devices[0]!;
    expect(placed.layers).toBe(layers);
    expect(placed.weightBytes + placed.kvBytes).toBeLessThanOrEqual(room);
    expect(plan.hostWeightBytes).toBe(TOTAL - placed.weightBytes);
    expect(plan.summary).toContain(`auto: ${layers} of 10 layers fit`);
  });

  test("--no-kv-offload leaves room for more layers", () => {
    const device = gpu("CUDA0", 1 * GiB);
    const withKv = planOffload(DEFAULT_OFFLOAD, [device], MODEL, 40 * MiB);
    const without = planOffload({ ...DEFAULT_OFFLOAD, kvOffload: false }, [device], MODEL, 40 * MiB);
    expect(without.gpuLayers).toBeGreaterThan(withKv.gpuLayers);
    expect(without.devices[0]!.kvBytes).toBe(0);
  });

  test("all that does not fit is refused, naming the device and its free memory", () => {
    expect(() => planOffload({ ...DEFAULT_OFFLOAD, gpuLayers: "all" }, [gpu("CUDA0", GiB)], MODEL, 0)).toThrow(
      OffloadError,
    );
    expect(() => planOffload({ ...DEFAULT_OFFLOAD, gpuLayers: "all" }, [gpu("CUDA0", GiB)], MODEL, 0)).toThrow(
      /--gpu-layers all: the model does not fit on CUDA0 \(CUDA0: 1050 MiB of 1024 MiB free/,
    );
  });

  test("a count is llama.cpp's: the output layer, then the last N - 1 repeating layers", () => {
    const devices = [gpu("Vulkan0", 64 * GiB)];
    const output = planOffload({ ...DEFAULT_OFFLOAD, gpuLayers: 1 }, devices, MODEL, 0);
    expect(output.devices.map((d) => [d.layers, d.weightBytes])).toEqual([[0, 50 * MiB]]);
    const half = planOffload({ ...DEFAULT_OFFLOAD, gpuLayers: 5 }, devices, MODEL, 0);
    expect(half.gpuLayers).toBe(5);
    expect(half.devices[0]!.layers).toBe(4);
    expect(half.devices[0]!.weightBytes).toBe(450 * MiB);
    const ten = planOffload({ ...DEFAULT_OFFLOAD, gpuLayers: 10 }, devices, MODEL, 0);
    expect(ten.devices[0]!.weightBytes).toBe(950 * MiB);
    const eleven = planOffload({ ...DEFAULT_OFFLOAD, gpuLayers: 99 }, devices, MODEL, 0);
    expect(eleven.gpuLayers).toBe(11);
    expect(eleven.devices[0]!.weightBytes).toBe(1050 * MiB);
  });

  test("two devices split the layers by --tensor-split, else by free memory; split-mode none puts all on the first", () => {
    const devices = [gpu("CUDA0", 64 * GiB), gpu("CUDA1", 64 * GiB)];
    const even = planOffload({ ...DEFAULT_OFFLOAD, gpuLayers: "all" }, devices, MODEL, 0);
    // The output layer counts as the 11th: 11 split evenly puts 6 on the first, 4 and the output on the second.
    expect(even.devices.map((d) => d.layers)).toEqual([6, 4]);
    const skewed = planOffload({ ...DEFAULT_OFFLOAD, gpuLayers: "all", tensorSplit: [3, 1] }, devices, MODEL, 0);
    expect(skewed.devices.map((d) => d.layers)).toEqual([9, 1]);
    const none = planOffload({ ...DEFAULT_OFFLOAD, gpuLayers: "all", splitMode: "none" }, devices, MODEL, 0);
    expect(none.devices.map((d) => [d.name, d.layers])).toEqual([["CUDA0", 10]]);
    expect(() => planOffload({ ...DEFAULT_OFFLOAD, tensorSplit: [1, 1, 1] }, devices, MODEL, 0)).toThrow(
      /--tensor-split has 3 shares for 2 devices/,
    );
  });
});

describe("chooseDevices", () => {
  const all: DeviceFacts[] = [
    gpu("Vulkan0", GiB),
    { name: "Vulkan1", description: "iGPU", type: "igpu", freeBytes: GiB, totalBytes: GiB },
    { name: "CPU", description: "cpu", type: "cpu", freeBytes: GiB, totalBytes: GiB },
  ];
  test("every dedicated GPU by default, an integrated one only without them, never the CPU", () => {
    expect(chooseDevices(all, DEFAULT_OFFLOAD).map((d) => d.name)).toEqual(["Vulkan0"]);
    expect(chooseDevices(all.slice(1), DEFAULT_OFFLOAD).map((d) => d.name)).toEqual(["Vulkan1"]);
    expect(chooseDevices(all.slice(2), DEFAULT_OFFLOAD)).toEqual([]);
  });
  test("--device picks by name and refuses an unknown one with the list", () => {
    expect(chooseDevices(all, { ...DEFAULT_OFFLOAD, devices: ["vulkan1"] }).map((d) => d.name)).toEqual(["Vulkan1"]);
    expect(() => chooseDevices(all, { ...DEFAULT_OFFLOAD, devices: ["CUDA0"] })).toThrow(
      "--device CUDA0: no such device; this machine has Vulkan0 (gpu), Vulkan1 (igpu), CPU (cpu)",
    );
    expect(() => chooseDevices(all, { ...DEFAULT_OFFLOAD, devices: ["CPU"] })).toThrow(/--device CPU: the CPU runs/);
  });
});

describe("values and the worker's command line", () => {
  test("--gpu-layers and --tensor-split values", () => {
    expect(parseGpuLayers("auto")).toBe("auto");
    expect(parseGpuLayers("all")).toBe("all");
    expect(parseGpuLayers("12")).toBe(12);
    expect(() => parseGpuLayers("-1")).toThrow(/--gpu-layers needs/);
    expect(() => parseGpuLayers("half")).toThrow(/--gpu-layers needs/);
    expect(parseTensorSplit("3,1")).toEqual([3, 1]);
    expect(() => parseTensorSplit("0,0")).toThrow(/--tensor-split needs/);
  });
  test("the daemon's offload flags read back as the same request in the worker", () => {
    const request = {
      gpuLayers: 7,
      devices: ["Vulkan0", "Vulkan1"],
      splitMode: "row" as const,
      tensorSplit: [2, 1],
      kvOffload: false,
    };
    expect(parseWorkerArgs(["--model", "m", ...offloadFlags(request)]).offload).toEqual(request);
    expect(parseWorkerArgs(["--model", "m"]).offload).toEqual(DEFAULT_OFFLOAD);
  });
});

test("a GGUF's tensors grouped as llama.cpp places them: blocks, output, the rest", async () => {
  const file = readGgufSync(await fixturePath("tiny-random"));
  const bytes = layerBytesOf(file);
  expect(bytes.layers.length).toBe(2);
  expect(bytes.layers.every((b) => b > 0)).toBe(true);
  expect(bytes.output).toBeGreaterThan(0);
  expect(bytes.host).toBeGreaterThan(0);
  const total = file.tensors.reduce((s, t) => s + (t.nbytes ?? 0), 0);
  expect(bytes.layers.reduce((s, b) => s + b, 0) + bytes.output + bytes.host).toBe(total);
});
