// bucket/superfluid.json for a Scoop bucket: the Windows archive pinned by its
// sha256, plus what `checkver`/`autoupdate` need to follow later releases.
// Release tooling only.
import { archiveName, PLATFORMS } from "./platforms.ts";
import { archiveUrl, baseUrlPattern, checksumOf, DESCRIPTION, HOMEPAGE, type ReleaseInputs } from "./release-inputs.ts";

export function scoopManifest(inputs: ReleaseInputs): string {
  const windows = PLATFORMS.find((p) => p.os === "windows" && p.arch === "x64");
  if (!windows) throw new Error("no windows-x64 platform to write a Scoop manifest for");

  // Scoop requires a license; "Unknown" is its word for a project that has not
  // chosen one (it is not an SPDX id, and Scoop's schema accepts any string).
  const manifest = {
    version: inputs.version,
    description: DESCRIPTION,
    homepage: HOMEPAGE,
    license: inputs.license ?? "Unknown",
    architecture: {
      "64bit": { url: archiveUrl(inputs, windows), hash: checksumOf(inputs, windows) },
    },
    bin: windows.exe,
    // Latest GitHub release's tag, `v` stripped.
    checkver: { github: HOMEPAGE },
    autoupdate: {
      architecture: {
        "64bit": {
          url: `${baseUrlPattern(inputs, "$version")}/${archiveName("$version", windows)}`,
          // Scoop reads a sha256sum-format file by finding the line that names
          // the archive ($baseurl is the URL above without its file name).
          hash: { url: "$baseurl/SHA256SUMS" },
        },
      },
    },
  };
  return `${JSON.stringify(manifest, null, 4)}\n`;
}
