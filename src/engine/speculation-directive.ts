// What `--speculate` asks of one model, and what the worker makes of it
// (docs/cli.md#speculative-decoding): `prompt-lookup` needs a model whose
// KV can have a rejected draft cut off its end, so a recurrent or hybrid
// model (its state has no per-token cells to remove) or one with
// sliding-window attention (cells that slid out of the window while the
// draft was in it are gone for good) refuses it at startup, and `auto`
// decodes such a model plainly. The engine's own part is speculation.ts.
import { SPECULATION_DEFAULTS, type SpeculationConfig } from "./speculation.ts";

/** The directives a llama.cpp worker takes; `off` is the absence of settings. */
export type SpeculationDirective = "auto" | "prompt-lookup" | "draft-model";

/** `--speculate` and its `--spec-*` tuning, as the daemon passes them to a worker. */
export interface SpeculationSettings extends Omit<SpeculationConfig, "strategy"> {
  directive: SpeculationDirective;
  /** The draft model's file (`--speculate draft-model:<path>`). */
  draftModel?: string;
}

/** What a model's memory is made of, as far as cutting a draft off it goes (LlamaModel.memoryKind). */
export interface ModelMemoryKind {
  recurrent: boolean;
  hybrid: boolean;
  /** The sliding-window attention width; 0 when every layer sees the whole window. */
  slidingWindow: number;
}

/** The strategy a worker runs, as WorkerInfo and the startup log name it. */
export type SpeculationStrategyName = "off" | "prompt-lookup" | "draft-model";

export interface ResolvedSpeculation {
  /** What the engine is given; absent when it decodes plainly. */
  config?: SpeculationConfig;
  strategy: SpeculationStrategyName;
  /** Why `auto` decodes plainly. */
  reason?: string;
}

/** `prompt-lookup` or `draft-model` asked of a model that cannot cut a rejected draft off its KV. */
export class SpeculationRefusedError extends Error {}

/** Why this model cannot have a rejected draft cut off its KV; undefined when it can. */
export function cannotCutDraft(kind: ModelMemoryKind): string | undefined {
  if (kind.recurrent) return "it keeps recurrent state, which cannot drop a rejected draft";
  if (kind.hybrid) return "it is a hybrid model whose recurrent layers cannot drop a rejected draft";
  if (kind.slidingWindow > 0)
    return `it uses sliding-window attention (${kind.slidingWindow} tokens), whose cells cannot be restored once a rejected draft pushed them out`;
  return undefined;
}

/**
 * The engine's speculation config for this model: none without settings;
 * `prompt-lookup` on a model that cannot cut a draft throws
 * SpeculationRefusedError; `auto` on one decodes plainly, saying why.
 */
export function resolveSpeculation(
  settings: SpeculationSettings | undefined,
  kind: ModelMemoryKind,
): ResolvedSpeculation {
  if (!settings) return { strategy: "off" };
  const why = cannotCutDraft(kind);
  if (why !== undefined) {
    if (settings.directive !== "auto")
      throw new SpeculationRefusedError(`--speculate ${settings.directive}: this model cannot use it: ${why}`);
    return { strategy: "off", reason: `auto: ${why}; decoding plainly` };
  }
  const { directive, draftModel: _, ...tuning } = settings;
  const strategy = directive === "draft-model" ? "draft-model" : "prompt-lookup";
  return { config: { strategy, ...tuning }, strategy };
}

/** Settings for a directive with every tuning value at its default. */
export function speculationSettings(
  directive: SpeculationDirective,
  tuning: Partial<Omit<SpeculationSettings, "directive">> = {},
): SpeculationSettings {
  return { directive, ...SPECULATION_DEFAULTS, ...tuning };
}

/**
 * The worker's command-line flags for these settings (src/worker/args.ts reads
 * them back), every value spelled out so the worker needs no defaults of its own.
 */
export function speculationFlags(s: SpeculationSettings): string[] {
  return [
    "--speculate",
    s.directive === "draft-model" ? `draft-model:${s.draftModel}` : s.directive,
    "--spec-draft-tokens",
    String(s.draftTokens),
    "--spec-min-yield",
    String(s.minYield),
    "--spec-yield-rounds",
    String(s.yieldRounds),
    "--spec-throughput-gate",
    s.throughputGate ? "on" : "off",
    "--spec-adaptive",
    s.adaptive ? "on" : "off",
    "--spec-min-speedup",
    String(s.minSpeedup),
    "--spec-gate-probe-tokens",
    String(s.probeTokens),
    "--spec-gate-reprobe",
    String(s.reprobe),
    "--spec-gate-reprobe-max",
    String(s.reprobeMax),
  ];
}
