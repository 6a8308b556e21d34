// A MODEL argument that names a Hugging Face reference not found locally is
// pulled into the Hugging Face cache (docs/cli.md#pulling-models). The local
// lookup (model-ref.ts: --model-dir folders, then the cache) always goes
// first, so a model already on disk starts with no request; a reference is
// pulled only when that lookup finds nothing. Paths are never pulled.
import type { GgufFile } from "../gguf/index.ts";
import type { HubError, HubErrorKind } from "../hub/errors.ts";
import { pull, type PullEvent, type Pulled } from "../hub/pull.ts";
import { parseReference } from "../hub/reference.ts";
import { hubCacheDir, hubSettings, type Env } from "../hub/settings.ts";
import { isReference, ModelNotFoundError, resolveModel, type ModelPath } from "./model-ref.ts";
import { RequestError } from "./request-error.ts";

export interface PullPolicy {
  /** --offline (or HF_HUB_OFFLINE=1): nothing is downloaded, a reference resolves through the cache only. */
  offline: boolean;
  /** Fetch the vision projector beside the model (off under --no-mmproj). */
  mmproj: boolean;
  /** Where the Hub and the cache are (process.env unless a test hands another in). */
  env?: Env;
  progress?: (event: PullEvent) => void;
  signal?: AbortSignal;
  /**
   * Before the first byte of the model: its GGUF header read off the Hub and its weights' bytes, for the fit check
   * a load runs (ModelLoader.fitBeforePull in src/daemon/model-loader.ts); what it throws (ModelTooLargeError) refuses the
   * pull with nothing downloaded. Absent where a pull does not load (`superfluid pull`, /api/pull).
   */
  beforeDownload?: (header: GgufFile, weightBytes: number) => void | Promise<void>;
}

/** A model named on the command line: found on disk, or a reference still to pull (its id known already). */
export type NamedModel = ModelPath | { id: string; reference: string };

/** Whether a token that was not found locally is one a pull can fetch: a well-formed `org/repo[:TAG]`. */
function pullable(token: string): boolean {
  if (!isReference(token)) return false;
  try {
    parseReference(token);
    return true;
  } catch {
    return false;
  }
}

/** The local lookup; a reference it does not find is answered as one to pull, anything else throws as before. */
export function resolveNamed(token: string, modelDirs: string[]): NamedModel {
  try {
    return resolveModel(token, modelDirs);
  } catch (err) {
    if (!(err instanceof ModelNotFoundError) || !pullable(token)) throw err;
    return { id: parseReference(token).repo, reference: token };
  }
}

/** Pulls a reference (or finds it in the cache) and answers its model file. Throws HubError. */
export async function pullReference(reference: string, policy: PullPolicy): Promise<Pulled> {
  return pull(reference, {
    settings: hubSettings(policy.env ?? process.env, { offline: policy.offline }),
    mmproj: policy.mmproj,
    ...(policy.progress ? { progress: policy.progress } : {}),
    ...(policy.signal ? { signal: policy.signal } : {}),
    ...(policy.beforeDownload ? { beforeDownload: policy.beforeDownload } : {}),
  });
}

/** A named model as a file: the path found, or the reference pulled. */
export async function fileOfNamed(named: NamedModel, policy: PullPolicy): Promise<ModelPath> {
  if (!("reference" in named)) return named;
  const pulled = await pullReference(named.reference, policy);
  return { path: pulled.model[0]!.local, id: named.id };
}

/** The local lookup, then a pull for a reference it does not find (--fim-model, POST /v1/models/load). */
export async function resolveOrPull(token: string, modelDirs: string[], policy: PullPolicy): Promise<ModelPath> {
  return fileOfNamed(resolveNamed(token, modelDirs), policy);
}

/** The status and code a failed pull answers over HTTP (each API family renders it in its own envelope). */
const STATUS_OF: Record<HubErrorKind, [number, string]> = {
  bad_reference: [400, "invalid_reference"],
  not_found: [404, "model_not_found"],
  no_file: [404, "model_not_found"],
  offline: [404, "model_not_found"],
  gated: [403, "model_gated"],
  network: [502, "hub_unreachable"],
  hub: [502, "hub_error"],
  integrity: [502, "download_corrupt"],
  disk_space: [507, "insufficient_storage"],
  disk_full: [507, "insufficient_storage"],
};

/** A failed pull as a RequestError; the cache folder's path is told as "the Hugging Face cache", not by name. */
export function pullRequestError(err: HubError, env: Env = process.env, field: string | null = "model"): RequestError {
  const [status, code] = STATUS_OF[err.kind];
  return new RequestError(status, err.message.replaceAll(hubCacheDir(env), "the Hugging Face cache"), code, field);
}

/** A file being pulled, as /health shows it while the server starts. */
export interface PullStatus {
  reference: string;
  file: string;
  state: string;
  done: number;
  total: number;
}

/** The pulls in progress, latest event per file; a file leaves the board when it is done. */
export class PullBoard {
  private readonly files = new Map<string, PullStatus>();

  /** A progress callback for one reference's pull. */
  track(reference: string): (event: PullEvent) => void {
    return (event) => {
      if (event.kind !== "file") return;
      const key = `${reference}\0${event.path}`;
      if (event.state === "done") this.files.delete(key);
      else
        this.files.set(key, {
          reference,
          file: event.path,
          state: event.state,
          done: event.done,
          total: event.total,
        });
    };
  }

  active(): PullStatus[] {
    return [...this.files.values()];
  }
}
