// bucket/superfluid.json for a Scoop bucket: the Windows archive pinned by its
// sha256, plus what `checkver`/`autoupdate` need to follow later releases.
// Release tooling only.
import { archiveName, CUDA_VARIANTS, PLATFORMS, variantArchiveName } from "./platforms.ts";
import { archiveUrl, baseUrlPattern, checksumOf, DESCRIPTION, HOMEPAGE, type ReleaseInputs } from "./release-inputs.ts";

/**
 * `cuda`: bucket/superfluid-cuda.json, the same for the windows-x64-cuda archive (docs/install.md#gpus);
 * `scoop install superfluid-cuda` then installs the CUDA build under the same command name.
 */
export function scoopManifest(inputs: ReleaseInputs, cuda = false): string {
  const windows = PLATFORMS.find((p) => p.os === "windows" && p.arch === "x64");
  if (!windows) throw new Error("no windows-x64 platform to write a Scoop manifest for");
  const variant = cuda ? CUDA_VARIANTS.find((v) => v.base === windows.name) : undefined;
  if (cuda && !variant) throw new Error("no windows-x64 CUDA build to write a Scoop manifest for");
  const archive = (version: string) => (variant ? variantArchiveName(version, variant) : archiveName(version, windows));

  // Scoop requires a license; "Unknown" is its word for a project that has not
  // chosen one (it is not an SPDX id, and Scoop's schema accepts any string).
  const manifest = {
    version: inputs.version,
    description: variant ? `${DESCRIPTION} (CUDA build: needs ${variant.needs})` : DESCRIPTION,
    homepage: HOMEPAGE,
    license: inputs.license ?? "Unknown",
    architecture: {
      "64bit": { url: archiveUrl(inputs, archive(inputs.version)), hash: checksumOf(inputs, archive(inputs.version)) },
    },
    bin: windows.exe,
    // Latest GitHub release's tag, `v` stripped.
    checkver: { github: HOMEPAGE },
    autoupdate: {
      architecture: {
        "64bit": {
          url: `${baseUrlPattern(inputs, "$version")}/${archive("$version")}`,
          // Scoop reads a sha256sum-format file by finding the line that names
          // the archive ($baseurl is the URL above without its file name).
          hash: { url: "$baseurl/SHA256SUMS" },
        },
      },
    },
  };
  return `${JSON.stringify(manifest, null, 4)}\n`;
}

/** bucket/superfluid-cuda.json: the Scoop manifest of the windows-x64 CUDA build. */
export function scoopCudaManifest(inputs: ReleaseInputs): string {
  return scoopManifest(inputs, true);
}
