// The gauges the routers people put in front of replicas read, under vLLM's
// names (docs/api/metrics.md#router-gauges): the Kubernetes Gateway API
// Inference Extension's model-server protocol, vLLM's production-stack router
// and the SGLang model gateway pick a replica by queue, load, KV use and
// LoRA affinity from them. The same numbers as our own gauges, per served
// model under the `model_name` label those routers expect.
import { Gauge, type Registry } from "prom-client";
import type { ServedModel } from "../daemon/served-model.ts";
import type { EngineSnapshot } from "../engine/jobs.ts";

/** One model as a scrape sees it: its live snapshot, when its worker answered (metrics.ts fills them). */
export interface ModelScrape {
  model: ServedModel;
  snapshot?: EngineSnapshot;
}

/** Registers the router gauges on `registry`; `scraped` gives each model's newest snapshot when a scrape runs. */
export function registerRouterGauges(registry: Registry, scraped: () => readonly ModelScrape[]): void {
  const registers = [registry];
  const perModel = (name: string, help: string, value: (s: EngineSnapshot) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ["model_name"],
      registers,
      collect(this: Gauge) {
        this.reset();
        for (const { model, snapshot } of scraped()) if (snapshot) this.set({ model_name: model.id }, value(snapshot));
      },
    });
  perModel(
    "vllm:num_requests_waiting",
    "Requests admitted and not yet on a lane, every QoS class (superfluid_queue_depth summed).",
    (s) => s.queueDepths.reduce((a, b) => a + b, 0),
  );
  perModel("vllm:num_requests_running", "Requests on a lane, prefilling or decoding.", (s) => s.activeLanes);
  perModel("vllm:kv_cache_usage_perc", "KV pool cells in use over the pool's cells, 0-1.", (s) =>
    s.poolCells > 0 ? s.cellsUsed / s.poolCells : 0,
  );
  new Gauge({
    name: "vllm:cache_config_info",
    help: "Always 1: the KV pool as blocks (a block is one cell, so block_size is 1 and num_gpu_blocks the cells).",
    labelNames: ["model_name", "block_size", "num_gpu_blocks"],
    registers,
    collect(this: Gauge) {
      this.reset();
      for (const { model } of scraped())
        this.set({ model_name: model.id, block_size: "1", num_gpu_blocks: String(model.worker.info.kv.cells) }, 1);
    },
  });
  new Gauge({
    name: "vllm:lora_requests_info",
    help:
      "The LoRA adapters every request runs under (llama.cpp applies one set to all), as vLLM writes it: " +
      "the scrape's time in seconds, the adapters in labels.",
    labelNames: ["model_name", "max_lora", "running_lora_adapters", "waiting_lora_adapters"],
    registers,
    collect(this: Gauge) {
      this.reset();
      const now = Date.now() / 1000;
      for (const { model } of scraped()) {
        const adapters = model.worker.loraAdapters;
        const running = adapters.filter((a) => a.scale !== 0).map((a) => String(a.id));
        this.set(
          {
            model_name: model.id,
            max_lora: String(adapters.length),
            running_lora_adapters: running.join(","),
            waiting_lora_adapters: "",
          },
          now,
        );
      }
    },
  });
}
