// The LoRA adapters a generation worker holds (docs/api/lora.md): each loaded
// once against the model (llama_adapter_lora_init), applied to the engine's
// context as one set, freed only once the context no longer uses it.
import type { Pointer } from "bun:ffi";
import { cstr } from "../../ffi/llama.ts";
import type { Engine } from "../engine/engine.ts";
import type { LlamaModel } from "../engine/model.ts";
import type { LoraAdapterInfo, LoraMessage } from "../engine/protocol.ts";

export class LoraAdapters {
  private readonly loaded = new Map<number, { info: LoraAdapterInfo; handle: Pointer }>();

  constructor(
    private readonly model: LlamaModel,
    private readonly engine: Engine,
  ) {}

  /** The adapters loaded, in id order. */
  list(): LoraAdapterInfo[] {
    return [...this.loaded.values()].map((a) => ({ ...a.info })).sort((a, b) => a.id - b.id);
  }

  /** Carries out one admin message; throws with a message for the client when it cannot. */
  handle(message: LoraMessage): LoraAdapterInfo[] {
    if (message.type === "lora-load") this.load(message.adapter);
    else if (message.type === "lora-unload") this.unload(message.adapter);
    else this.rescale(message.scales);
    return this.list();
  }

  private load(info: LoraAdapterInfo): void {
    if (this.loaded.has(info.id)) throw new Error(`adapter ${info.id} is already loaded`);
    const api = this.model.llama.api;
    // llama.cpp checks the file (a GGUF with general.type "adapter", adapter.type "lora", this
    // model's architecture, each tensor's shape) and answers NULL when it refuses it.
    const handle = api.llama_adapter_lora_init(this.model.handle, cstr(info.path));
    if (!handle || typeof handle === "bigint") {
      throw new Error(`libllama could not load ${info.path} as a LoRA adapter for this model (not a LoRA GGUF, another architecture, or tensors of other shapes)`);
    }
    this.loaded.set(info.id, { info: { ...info }, handle });
    this.apply();
  }

  private unload(id: number): void {
    const adapter = this.loaded.get(id);
    if (!adapter) throw new Error(`no adapter ${id} is loaded`);
    this.loaded.delete(id);
    // Freed once the context applies the set without it (after the requests still using it).
    this.apply(() => this.model.llama.api.llama_adapter_lora_free(adapter.handle));
  }

  private rescale(scales: { id: number; scale: number }[]): void {
    for (const { id } of scales) if (!this.loaded.has(id)) throw new Error(`no adapter ${id} is loaded`);
    for (const { id, scale } of scales) this.loaded.get(id)!.info.scale = scale;
    this.apply();
  }

  private apply(applied?: () => void): void {
    const set = [...this.loaded.values()].sort((a, b) => a.info.id - b.info.id).map((a) => ({ handle: a.handle, scale: a.info.scale }));
    this.engine.setAdapters(set, applied);
  }
}
