// The symbol versions an ELF shared library needs from others (its
// .gnu.version_r section: GLIBC_2.34, GLIBCXX_3.4.29, ...), read without
// binutils. Release tooling: a library built here must not need a newer
// glibc or libstdc++ than the prebuilt it replaces, or the binary stops
// starting on distributions the prebuilt ran on.
import { readFileSync } from "node:fs";

const SHT_GNU_VERNEED = 0x6ffffffe;

/**
 * Every version the file needs (`GLIBC_2.34`, `GLIBC_PRIVATE`, ...); throws, naming the file, for anything but a whole
 * 64-bit little-endian ELF file.
 */
export function neededVersions(path: string): string[] {
  const b = readFileSync(path);
  const fail = (why: string): never => {
    throw new Error(`${path}: ${why}`);
  };
  if (b.length < 64 || b.readUInt32BE(0) !== 0x7f454c46) fail("not an ELF file");
  if (b[4] !== 2 || b[5] !== 1) fail("not a 64-bit little-endian ELF file");
  try {
    const shoff = Number(b.readBigUInt64LE(0x28));
    const shentsize = b.readUInt16LE(0x3a);
    const shnum = b.readUInt16LE(0x3c);
    if (shoff + shnum * shentsize > b.length) fail("truncated (its section headers lie past its end)");
    const section = (i: number) => {
      const at = shoff + i * shentsize;
      return {
        type: b.readUInt32LE(at + 4),
        offset: Number(b.readBigUInt64LE(at + 0x18)),
        link: b.readUInt32LE(at + 0x28),
        info: b.readUInt32LE(at + 0x2c),
      };
    };
    const out: string[] = [];
    for (let i = 0; i < shnum; i++) {
      const s = section(i);
      if (s.type !== SHT_GNU_VERNEED) continue;
      const strings = section(s.link).offset;
      const name = (off: number) => {
        const start = strings + off;
        const end = b.indexOf(0, start);
        if (end < 0) fail("a version name runs past the end of the file");
        return b.toString("latin1", start, end);
      };
      // sh_info entries of Verneed { vn_version u16, vn_cnt u16, vn_file u32, vn_aux u32, vn_next u32 },
      // each with vn_cnt Vernaux { vna_hash u32, vna_flags u16, vna_other u16, vna_name u32, vna_next u32 }.
      let need = s.offset;
      for (let n = 0; n < s.info; n++) {
        const count = b.readUInt16LE(need + 2);
        let aux = need + b.readUInt32LE(need + 8);
        for (let k = 0; k < count; k++) {
          out.push(name(b.readUInt32LE(aux + 8)));
          aux += b.readUInt32LE(aux + 12);
        }
        const next = b.readUInt32LE(need + 12);
        if (next === 0) break;
        need += next;
      }
    }
    return [...new Set(out)].sort();
  } catch (e) {
    if (e instanceof RangeError) fail("truncated or damaged (an offset lies past its end)");
    throw e;
  }
}

function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * The highest version each family (GLIBC, GLIBCXX, CXXABI, ...) reaches across
 * the files; a version that is not a number (`GLIBC_PRIVATE`) is kept as is
 * under its own name, so it can only match itself.
 */
export function versionCeilings(paths: readonly string[]): Map<string, string> {
  const top = new Map<string, string>();
  for (const path of paths) {
    for (const v of neededVersions(path)) {
      const m = /^(.+?)_(\d+(?:\.\d+)*)$/.exec(v);
      if (!m) {
        top.set(v, "");
        continue;
      }
      const [, family, version] = m as unknown as [string, string, string];
      const seen = top.get(family);
      if (seen === undefined || compareVersions(version, seen) > 0) top.set(family, version);
    }
  }
  return top;
}

/**
 * Each family whose ceiling in `built` is above `allowed`'s (or absent from it), as `GLIBC_2.36 (at most GLIBC_2.34)`.
 */
export function ceilingsAbove(built: Map<string, string>, allowed: Map<string, string>): string[] {
  const over: string[] = [];
  const named = (family: string, version: string) => (version === "" ? family : `${family}_${version}`);
  for (const [family, version] of built) {
    const limit = allowed.get(family);
    if (limit === undefined) over.push(`${named(family, version)} (none in the prebuilt)`);
    else if (version !== "" && compareVersions(version, limit) > 0)
      over.push(`${named(family, version)} (at most ${named(family, limit)})`);
  }
  return over.sort();
}
