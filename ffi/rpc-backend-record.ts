// Where `bun build.ts --rpc-backend` left ggml's RPC backend for running from
// source: a record in the cache folder that ffi/rpc.ts reads (the release
// carries the backend beside libllama instead).

/** The record's file name under the cache folder (ffi/paths.ts). */
export const RPC_BACKEND_RECORD = "rpc-backend.json";

export interface RpcBackendRecord {
  /** libggml-rpc.so as built. */
  backend: string;
  /** The prebuilt libllama folder it was built for (the same llama.cpp commit): used only with that one. */
  llamaDir: string;
  /** The llama.cpp commit built. */
  commit: string;
}
