// What the package-manager generators (homebrew.ts, scoop.ts, install-script.ts)
// are given by the release build, and the facts about the project they all print.
// Release tooling only; the shipped binary never imports it.
import { archiveName, type Platform } from "./platforms.ts";

export interface ReleaseInputs {
  /** package.json `version`, without a leading `v`. */
  version: string;
  /** Where the archives and SHA256SUMS are published; archive URLs are `<baseUrl>/<archive name>`. */
  baseUrl: string;
  /** Archive file name → lowercase sha256 hex, as in SHA256SUMS. */
  checksums: Map<string, string>;
  /** An SPDX identifier, when the project has one (package.json `license`); left out otherwise. */
  license?: string;
}

export const HOMEPAGE = "https://github.com/superfluid/superfluid";
// Homebrew's audit wants a description under 80 characters that does not name
// the formula, so this is shorter than package.json's.
export const DESCRIPTION = "Local LLM inference server for GGUF models with an OpenAI-compatible API";

/** The default release URL base: GitHub's download folder for the version's tag. */
export function defaultBaseUrl(version: string): string {
  return `${HOMEPAGE}/releases/download/v${version}`;
}

export function archiveUrl(inputs: Pick<ReleaseInputs, "version" | "baseUrl">, platform: Platform | string): string {
  const name = typeof platform === "string" ? platform : archiveName(inputs.version, platform);
  return `${inputs.baseUrl.replace(/\/+$/, "")}/${name}`;
}

/**
 * The archive's checksum (`platform`: a platform, or an archive's file name, a CUDA variant's); a missing or
 * malformed one stops the build rather than publish a formula that cannot install.
 */
export function checksumOf(inputs: ReleaseInputs, platform: Platform | string): string {
  const name = typeof platform === "string" ? platform : archiveName(inputs.version, platform);
  const sum = inputs.checksums.get(name);
  if (sum === undefined) throw new Error(`no checksum for ${name}`);
  if (!/^[0-9a-f]{64}$/.test(sum)) throw new Error(`checksum for ${name} is not 64 lowercase hex digits: ${sum}`);
  return sum;
}

/**
 * The base URL with the version written as `placeholder` wherever it appears
 * (`.../download/v0.1.0` → `.../download/v$version`), so a later version's
 * URL can be derived from it (Scoop's autoupdate, install.sh's SUPERFLUID_VERSION).
 */
export function baseUrlPattern(inputs: Pick<ReleaseInputs, "version" | "baseUrl">, placeholder: string): string {
  const base = inputs.baseUrl.replace(/\/+$/, "");
  // Only the path: a short version such as "1" must not rewrite a host or port.
  const pathStart = base.indexOf("/", base.indexOf("//") + 2);
  if (pathStart < 0) return base;
  return base.slice(0, pathStart) + base.slice(pathStart).split(inputs.version).join(placeholder);
}
