// Fetches one npm package at an exact version from the registry at build time,
// checks the tarball against the registry's `dist.integrity` (sha512), and
// unpacks it into the release cache. A package already unpacked there is used
// as is, so a second build runs offline. Release tooling only: the shipped
// binary never fetches anything.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface FetchOptions {
  /** Folder the tarballs and unpacked packages are kept in. */
  cacheRoot: string;
  /** Registry base URL; defaults to npm's own (or `npm_config_registry`, which `npm run` sets). */
  registry?: string;
  /** An integrity the tarball must also match (the lockfile's), besides the registry's. */
  expectIntegrity?: string;
  /** Progress lines go here. */
  log?: (line: string) => void;
}

export interface FetchedPackage {
  /** The unpacked package's root (the tarball's `package/` folder). */
  dir: string;
  /** The `sha512-…` integrity it was checked against. */
  integrity: string;
}

const EXACT_VERSION = /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/;

/** The sha512 entry of an SRI string (`sha512-<base64>`, possibly among others). */
export function sha512Of(integrity: string): string {
  const entry = integrity.split(/\s+/).find((e) => e.startsWith("sha512-"));
  if (!entry) throw new Error(`integrity ${JSON.stringify(integrity)} has no sha512 entry`);
  return entry;
}

export function integrityOf(bytes: Uint8Array): string {
  return `sha512-${createHash("sha512").update(bytes).digest("base64")}`;
}

function defaultRegistry(): string {
  return (process.env.npm_config_registry || "https://registry.npmjs.org").replace(/\/+$/, "");
}

async function getOk(url: string): Promise<Response> {
  const res = await fetch(url, { headers: { accept: "application/json" } });
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${res.statusText}`);
  return res;
}

export async function fetchPackage(name: string, version: string, opts: FetchOptions): Promise<FetchedPackage> {
  // A range would make the build depend on the day it ran.
  if (!EXACT_VERSION.test(version))
    throw new Error(`${name}: "${version}" is not an exact version; pin it in package.json`);
  const slug = `${name.replace(/^@/, "").replace(/\//g, "+")}@${version}`;
  const dir = join(opts.cacheRoot, slug);
  const done = join(opts.cacheRoot, `${slug}.complete`);
  if (existsSync(done) && existsSync(dir)) {
    const integrity = readFileSync(done, "utf8").trim();
    if (opts.expectIntegrity && sha512Of(opts.expectIntegrity) !== integrity) {
      throw new Error(
        `${name}@${version}: cached copy has integrity ${integrity}, the lockfile says ${opts.expectIntegrity}`,
      );
    }
    return { dir, integrity };
  }

  const registry = opts.registry?.replace(/\/+$/, "") ?? defaultRegistry();
  const metaUrl = `${registry}/${name.replace("/", "%2f")}/${version}`;
  const meta = (await (await getOk(metaUrl)).json()) as { dist?: { tarball?: string; integrity?: string } };
  const tarball = meta.dist?.tarball;
  const registryIntegrity = meta.dist?.integrity;
  if (!tarball || !registryIntegrity) throw new Error(`${metaUrl}: no dist.tarball or dist.integrity`);
  const want = sha512Of(registryIntegrity);
  if (opts.expectIntegrity && sha512Of(opts.expectIntegrity) !== want) {
    throw new Error(
      `${name}@${version}: the registry's integrity ${want} differs from the lockfile's ${opts.expectIntegrity}`,
    );
  }

  opts.log?.(`fetching ${name}@${version} (${tarball})`);
  const bytes = new Uint8Array(await (await getOk(tarball)).arrayBuffer());
  const got = integrityOf(bytes);
  if (got !== want) throw new Error(`${tarball}: integrity ${got}, expected ${want}; refusing it`);

  mkdirSync(opts.cacheRoot, { recursive: true });
  const tmp = join(opts.cacheRoot, `${slug}.${process.pid}.tmp`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  const tgz = join(tmp, "package.tgz");
  writeFileSync(tgz, bytes);
  // The system tar unpacks it (every build host has one; npm tarballs are plain ustar + gzip).
  const untar = Bun.spawnSync(["tar", "-xzf", tgz, "-C", tmp], { stdout: "pipe", stderr: "pipe" });
  if (untar.exitCode !== 0) throw new Error(`tar -xzf ${tgz}: ${untar.stderr.toString().trim()}`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(join(tmp, "package"), dir);
  rmSync(tmp, { recursive: true, force: true });
  writeFileSync(done, `${want}\n`); // written last: a build killed midway fetches again
  return { dir, integrity: want };
}
