// The LoRA adapters a generation worker holds (docs/api/lora.md): each file
// loaded once against the model (llama_adapter_lora_init), applied to the
// engine's context as one set, freed only once the context no longer uses it.
//
// Loading a file that is already loaded gives a new adapter id but no new
// allocation: llama.cpp would copy the whole adapter again (a real adapter is
// tens or hundreds of MB) for weights it already holds. Ids that share a file
// share its handle, which goes into the set once at the sum of their scales:
// a LoRA adds scale·B·A·x to a layer's output, linear in the scale, so two
// copies at s1 and s2 act as one at s1 + s2 (and llama.cpp keeps one scale
// per handle, so the handle cannot go in twice).
import { statSync } from "node:fs";
import type { Pointer } from "bun:ffi";
import { cstr } from "../../ffi/llama.ts";
import type { Engine } from "../engine/engine.ts";
import type { LlamaModel } from "../engine/model.ts";
import type { LoraAdapterInfo, LoraMessage } from "../engine/protocol.ts";

/** One adapter file held by libllama, and the ids that use it. */
interface LoadedFile {
  handle: Pointer;
  key: string;
  users: Set<number>;
}

/**
 * What makes two loads the same file: its identity and its version on disk,
 * so a path overwritten with another adapter is loaded afresh, not served
 * stale. Undefined when it cannot be read (llama.cpp then gives the error).
 */
function fileKey(path: string): string | undefined {
  try {
    const st = statSync(path);
    return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch {
    return undefined;
  }
}

export class LoraAdapters {
  private readonly loaded = new Map<number, { info: LoraAdapterInfo; file: LoadedFile }>();
  /** The files held, by fileKey: one allocation each, however many ids use it. */
  private readonly files = new Map<string, LoadedFile>();

  constructor(
    private readonly model: LlamaModel,
    private readonly engine: Engine,
  ) {}

  /** The adapters loaded, in id order. */
  list(): LoraAdapterInfo[] {
    return [...this.loaded.values()].map((a) => ({ ...a.info })).sort((a, b) => a.id - b.id);
  }

  /** Adapter files held by libllama (fewer than the ids when ids share a file). */
  get allocations(): number {
    return this.files.size;
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
    const key = fileKey(info.path);
    let file = key === undefined ? undefined : this.files.get(key);
    if (!file) {
      const api = this.model.llama.api;
      // llama.cpp checks the file (a GGUF with general.type "adapter", adapter.type "lora", this
      // model's architecture, each tensor's shape) and answers NULL when it refuses it.
      const handle = api.llama_adapter_lora_init(this.model.handle, cstr(info.path));
      if (!handle || typeof handle === "bigint") {
        throw new Error(
          `libllama could not load ${info.path} as a LoRA adapter for this model (not a LoRA GGUF, another architecture, or tensors of other shapes)`,
        );
      }
      // A file that loaded but could not be stat'ed (a race with its removal) gets a key of its own.
      file = { handle, key: key ?? `unshared:${info.id}`, users: new Set() };
      this.files.set(file.key, file);
    }
    file.users.add(info.id);
    this.loaded.set(info.id, { info: { ...info }, file });
    this.apply();
  }

  private unload(id: number): void {
    const adapter = this.loaded.get(id);
    if (!adapter) throw new Error(`no adapter ${id} is loaded`);
    this.loaded.delete(id);
    const { file } = adapter;
    file.users.delete(id);
    if (file.users.size > 0) {
      this.apply();
      return;
    }
    // Out of the map now, so a load of the same file before the free below allocates anew
    // rather than taking a handle about to be freed.
    this.files.delete(file.key);
    // Freed once the context applies the set without it (after the requests still using it).
    this.apply(() => this.model.llama.api.llama_adapter_lora_free(file.handle));
  }

  private rescale(scales: { id: number; scale: number }[]): void {
    for (const { id } of scales) if (!this.loaded.has(id)) throw new Error(`no adapter ${id} is loaded`);
    for (const { id, scale } of scales) this.loaded.get(id)!.info.scale = scale;
    this.apply();
  }

  /** The set the context applies: each file once, at the sum of its ids' scales, in order of its lowest id. */
  private apply(applied?: () => void): void {
    const byFile = new Map<LoadedFile, number>();
    for (const a of [...this.loaded.values()].sort((x, y) => x.info.id - y.info.id)) {
      byFile.set(a.file, (byFile.get(a.file) ?? 0) + a.info.scale);
    }
    this.engine.setAdapters(
      [...byFile].map(([file, scale]) => ({ handle: file.handle, scale })),
      applied,
    );
  }
}
