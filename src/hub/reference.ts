// A Hub reference as people write it: `org/repo[:TAG]` (llama.cpp's -hf,
// superfluid's MODEL argument) or Ollama's `hf.co/org/repo[:TAG]` and
// `huggingface.co/org/repo[:TAG]`. The repo id is checked here, once: it
// becomes part of URLs and of a cache folder name.
import { HubError } from "./errors.ts";

export interface HubReference {
  /** `org/repo`. */
  repo: string;
  /** A quant (`Q4_K_M`), a whole file name, or absent for the default choice. */
  tag?: string;
}

/** The Hub's own rule for a name part: letters, digits, `-`, `_`, `.`; not starting or ending with `-` or `.`. */
const NAME_PART = /^(?![.-])[\w.-]{1,96}(?<![.-])$/;

/** `org/repo[:TAG]` to its parts; a malformed one is a HubError of kind `bad_reference`. */
export function parseReference(token: string): HubReference {
  const colon = token.indexOf(":");
  const name = colon < 0 ? token : token.slice(0, colon);
  const tag = colon < 0 ? undefined : token.slice(colon + 1);
  const parts = name.split("/");
  if (parts.length !== 2 || !parts.every((p) => NAME_PART.test(p) && !p.includes(".."))) {
    throw new HubError(
      "bad_reference",
      `'${token}' is not a Hugging Face reference: write org/repo or org/repo:TAG (e.g. unsloth/Qwen3-0.6B-GGUF:Q4_K_M)`,
    );
  }
  // A tag may be a file path in the repo (`sub/model-Q4_K_M.gguf`), never one that climbs out.
  if (tag !== undefined && (!/^[\w.+/-]{1,300}$/.test(tag) || tag.split("/").some((p) => p === ".." || p === "."))) {
    throw new HubError("bad_reference", `'${token}': the tag '${tag}' is not a quant name or a file name`);
  }
  return tag === undefined || tag === "" ? { repo: name } : { repo: name, tag };
}

export function formatReference(ref: HubReference): string {
  return ref.tag === undefined ? ref.repo : `${ref.repo}:${ref.tag}`;
}

/** The hosts Ollama users name Hub models by (`ollama pull hf.co/org/repo:Q4_K_M`). */
const HUB_HOSTS = ["hf.co/", "huggingface.co/"];

/**
 * An Ollama model name that names a Hub repo, as a reference; undefined for any other name (a name from Ollama's
 * own library such as `llama3.2`). Ollama's `:latest` means no tag.
 */
export function hubReferenceOfOllamaName(name: string): HubReference | undefined {
  const lower = name.toLowerCase();
  const host = HUB_HOSTS.find((h) => lower.startsWith(h) || lower.startsWith(`https://${h}`));
  if (!host) return undefined;
  const rest = name.slice(lower.indexOf(host) + host.length);
  const ref = parseReference(rest);
  return ref.tag?.toLowerCase() === "latest" ? { repo: ref.repo } : ref;
}
