// Which files a reference means (llama.cpp's -hf choice), and how references and Ollama names parse.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chooseFiles, quantOf, quantsIn } from "../../src/hub/choose.ts";
import { HubError } from "../../src/hub/errors.ts";
import { hubReferenceOfOllamaName, parseReference } from "../../src/hub/reference.ts";
import { bypassesProxy, hubSettings, proxyFor } from "../../src/hub/settings.ts";

const REPO = [
  "README.md",
  "Qwen3-8B-Q2_K.gguf",
  "Qwen3-8B-Q4_0.gguf",
  "Qwen3-8B-Q4_K_M.gguf",
  "Qwen3-8B-UD-Q4_K_XL.gguf",
  "Qwen3-8B-Q8_0.gguf",
  "mmproj-F16.gguf",
  "mmproj-F32.gguf",
  "BF16/Qwen3-8B-BF16-00001-of-00003.gguf",
  "BF16/Qwen3-8B-BF16-00002-of-00003.gguf",
  "BF16/Qwen3-8B-BF16-00003-of-00003.gguf",
];

function noFile(fn: () => unknown): HubError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(HubError);
    expect((err as HubError).kind).toBe("no_file");
    return err as HubError;
  }
  throw new Error("expected a no_file refusal");
}

describe("file choice", () => {
  test("no tag: Q4_K_M first, then Q4_0, then the first model GGUF", () => {
    expect(chooseFiles("o/r", REPO, undefined).model).toEqual(["Qwen3-8B-Q4_K_M.gguf"]);
    expect(
      chooseFiles(
        "o/r",
        REPO.filter((p) => !p.includes("Q4_K_M")),
        undefined,
      ).model,
    ).toEqual(["Qwen3-8B-Q4_0.gguf"]);
    expect(chooseFiles("o/r", ["b-Q8_0.gguf", "a-Q6_K.gguf", "mmproj-a.gguf"], undefined).model).toEqual([
      "a-Q6_K.gguf",
    ]);
  });

  test("a tag matches the quant in the name in any case; UD- quants by their own name or the plain one", () => {
    expect(chooseFiles("o/r", REPO, "q8_0").model).toEqual(["Qwen3-8B-Q8_0.gguf"]);
    expect(chooseFiles("o/r", REPO, "UD-Q4_K_XL").model).toEqual(["Qwen3-8B-UD-Q4_K_XL.gguf"]);
    expect(chooseFiles("o/r", REPO, "Q4_K_XL").model).toEqual(["Qwen3-8B-UD-Q4_K_XL.gguf"]);
    // Q4_K is not Q4_K_M's quant: no prefix match on the quant, only the name fallback.
    expect(chooseFiles("o/r", REPO, "Q2_K").model).toEqual(["Qwen3-8B-Q2_K.gguf"]);
  });

  test("a split model is every part, in order; a tag naming it finds the first part", () => {
    expect(chooseFiles("o/r", REPO, "BF16").model).toEqual([
      "BF16/Qwen3-8B-BF16-00001-of-00003.gguf",
      "BF16/Qwen3-8B-BF16-00002-of-00003.gguf",
      "BF16/Qwen3-8B-BF16-00003-of-00003.gguf",
    ]);
    const e = noFile(() => chooseFiles("o/r", ["m-Q4_0-00001-of-00002.gguf"], "Q4_0"));
    expect(e.message).toContain("lacks its part m-Q4_0-00002-of-00002.gguf");
  });

  test("a tag that is a whole file name (or path) is that file", () => {
    expect(chooseFiles("o/r", REPO, "Qwen3-8B-Q2_K.gguf").model).toEqual(["Qwen3-8B-Q2_K.gguf"]);
    expect(chooseFiles("o/r", REPO, "BF16/Qwen3-8B-BF16-00002-of-00003.gguf").model[0]).toBe(
      "BF16/Qwen3-8B-BF16-00001-of-00003.gguf",
    );
  });

  test("the projector nearest the model: its folder first, then the fewest bits", () => {
    expect(chooseFiles("o/r", REPO, "Q8_0").mmproj).toBe("mmproj-F16.gguf");
    const nested = ["a/m-Q4_K_M.gguf", "a/mmproj-F32.gguf", "mmproj-F16.gguf", "b/mmproj-Q8_0.gguf"];
    expect(chooseFiles("o/r", nested, undefined).mmproj).toBe("a/mmproj-F32.gguf");
    expect(chooseFiles("o/r", ["m-Q4_0.gguf"], undefined).mmproj).toBeUndefined();
  });

  test("no file for the tag names the quants the repo has", () => {
    const e = noFile(() => chooseFiles("o/r", REPO, "Q5_K_S"));
    expect(e.message).toBe("o/r has no GGUF file for 'Q5_K_S'; it has Q2_K, Q4_0, Q4_K_M, UD-Q4_K_XL, Q8_0, BF16");
    expect(noFile(() => chooseFiles("o/r", ["README.md"], undefined)).message).toContain("no GGUF file");
    expect(quantsIn(REPO)).toContain("UD-Q4_K_XL");
  });

  test("quant names as files write them", () => {
    expect(quantOf("Llama-3.2-1B-Instruct-Q4_K_M.gguf")).toBe("Q4_K_M");
    expect(quantOf("x-iq2_xxs.gguf")).toBe("IQ2_XXS");
    expect(quantOf("gpt-oss-20b-MXFP4.gguf")).toBe("MXFP4");
    expect(quantOf("m-F16-00001-of-00002.gguf")).toBe("F16");
    expect(quantOf("model.gguf")).toBeUndefined();
  });
});

describe("references", () => {
  test("org/repo[:TAG]", () => {
    expect(parseReference("unsloth/Qwen3-8B-GGUF:UD-Q4_K_XL")).toEqual({
      repo: "unsloth/Qwen3-8B-GGUF",
      tag: "UD-Q4_K_XL",
    });
    expect(parseReference("a/b")).toEqual({ repo: "a/b" });
    for (const bad of ["a", "a/b/c", "../b", "a/..", "a/b:../x", "a/b c", "-a/b"]) {
      expect(() => parseReference(bad)).toThrow(HubError);
    }
  });

  test("Ollama's hf.co and huggingface.co names, and a library name that is neither", () => {
    expect(hubReferenceOfOllamaName("hf.co/org/repo:Q4_K_M")).toEqual({ repo: "org/repo", tag: "Q4_K_M" });
    expect(hubReferenceOfOllamaName("huggingface.co/org/repo")).toEqual({ repo: "org/repo" });
    expect(hubReferenceOfOllamaName("hf.co/org/repo:latest")).toEqual({ repo: "org/repo" });
    expect(hubReferenceOfOllamaName("llama3.2")).toBeUndefined();
    expect(hubReferenceOfOllamaName("library/llama3.2:1b")).toBeUndefined();
  });
});

describe("settings", () => {
  test("the endpoint, cache, token and offline mode come from the environment", () => {
    const s = hubSettings({ HF_ENDPOINT: "http://mirror/", HF_HOME: "/h", HF_TOKEN: " t ", HF_HUB_OFFLINE: "1" });
    expect(s.endpoint).toBe("http://mirror");
    expect(s.cacheDir).toBe("/h/hub");
    expect(s.token).toBe("t");
    expect(s.offline).toBe(true);
    expect(hubSettings({ MODEL_ENDPOINT: "http://a", HF_ENDPOINT: "http://b", HF_HUB_CACHE: "/c" })).toMatchObject({
      endpoint: "http://a",
      cacheDir: "/c",
      offline: false,
    });
  });

  test("the token file: HF_TOKEN_PATH, else HF_HOME/token", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sf-token-"));
    try {
      writeFileSync(join(dir, "token"), "from-file\n");
      expect(hubSettings({ HF_HOME: dir }).token).toBe("from-file");
      writeFileSync(join(dir, "other"), "other-file");
      expect(hubSettings({ HF_HOME: dir, HF_TOKEN_PATH: join(dir, "other") }).token).toBe("other-file");
      expect(hubSettings({ HF_HOME: dir, HF_TOKEN: "env-wins" }).token).toBe("env-wins");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("proxies by scheme, NO_PROXY by host, suffix and port", () => {
    const env = { HTTPS_PROXY: "http://p:1", http_proxy: "http://q:2", NO_PROXY: "internal.example,.corp,127.0.0.1:9" };
    expect(proxyFor("https://huggingface.co/x", env)).toBe("http://p:1");
    expect(proxyFor("http://mirror/x", env)).toBe("http://q:2");
    expect(proxyFor("https://a.internal.example/x", env)).toBeUndefined();
    expect(proxyFor("https://x.corp/", env)).toBeUndefined();
    expect(proxyFor("http://127.0.0.1:9/", env)).toBeUndefined();
    expect(proxyFor("http://127.0.0.1:8/", env)).toBe("http://q:2");
    expect(bypassesProxy(new URL("http://anything"), "*")).toBe(true);
  });
});
