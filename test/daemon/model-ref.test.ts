// What a MODEL argument names: a path (served as its stem) or a local
// reference org/repo[:QUANT] found in --model-dir folders or the Hugging Face
// cache layout; a reference not found says where it looked.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isReference, ModelNotFoundError, resolveModel } from "../../src/daemon/model-ref.ts";

const root = mkdtempSync(join(tmpdir(), "sf-models-"));
// Its stand-in GGUF files are 4 bytes: left behind, they would be the "first GGUF" of a folder another test loads.
afterAll(() => rmSync(root, { recursive: true, force: true }));
const touch = (path: string) => {
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, "GGUF");
};
const env = { HF_HUB_CACHE: join(root, "hub") };

describe("model references", () => {
  test("paths and references are told apart (docs/cli.md#the-model-argument)", () => {
    expect(isReference("Qwen/Qwen3-4B-GGUF:Q4_K_M")).toBe(true);
    expect(isReference("Qwen/Qwen3-4B-GGUF")).toBe(true);
    expect(isReference("./model.gguf")).toBe(false);
    expect(isReference("models/x.gguf")).toBe(false);
    expect(isReference("plainname")).toBe(false);
    expect(isReference("~/x")).toBe(false);
  });

  test("a path serves as its file stem", () => {
    touch(join(root, "files", "My-Model.Q8_0.gguf"));
    expect(resolveModel(join(root, "files", "My-Model.Q8_0.gguf"), [], env)).toEqual({
      path: join(root, "files", "My-Model.Q8_0.gguf"),
      id: "My-Model.Q8_0",
    });
  });

  test("a missing path is reported as missing", () => {
    expect(() => resolveModel(join(root, "nope.gguf"), [], env)).toThrow(ModelNotFoundError);
  });

  test("a reference is found under --model-dir, the quant picks the file, the tag is dropped from the id", () => {
    const dir = join(root, "dir");
    touch(join(dir, "acme", "Tiny-GGUF", "tiny-Q4_K_M.gguf"));
    touch(join(dir, "acme", "Tiny-GGUF", "tiny-Q8_0.gguf"));
    touch(join(dir, "acme", "Tiny-GGUF", "mmproj-tiny-Q8_0.gguf"));
    expect(resolveModel("acme/Tiny-GGUF:q8_0", [dir], env)).toEqual({
      path: join(dir, "acme", "Tiny-GGUF", "tiny-Q8_0.gguf"),
      id: "acme/Tiny-GGUF",
    });
    expect(resolveModel("acme/Tiny-GGUF:Q4_K_M", [dir], env).path).toEndWith("tiny-Q4_K_M.gguf");
  });

  test("a reference is found in the Hugging Face cache layout; split files resolve to their first part", () => {
    const snap = join(root, "hub", "models--acme--Big-GGUF", "snapshots", "abc123", "Q4_K_M");
    touch(join(snap, "big-Q4_K_M-00002-of-00002.gguf"));
    touch(join(snap, "big-Q4_K_M-00001-of-00002.gguf"));
    expect(resolveModel("acme/Big-GGUF:Q4_K_M", [], env).path).toEndWith("big-Q4_K_M-00001-of-00002.gguf");
  });

  test("a reference not found locally names where it looked, and nothing is downloaded", () => {
    let message = "";
    try {
      resolveModel("acme/Missing-GGUF:Q4_K_M", [join(root, "dir")], env);
    } catch (err) {
      expect(err).toBeInstanceOf(ModelNotFoundError);
      message = (err as Error).message;
    }
    expect(message).toContain("not found locally (nothing is downloaded)");
    expect(message).toContain(join(root, "dir", "acme", "Missing-GGUF"));
    expect(message).toContain(join(root, "hub", "models--acme--Missing-GGUF", "snapshots"));
  });
});
