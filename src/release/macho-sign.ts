// Ad-hoc code signatures for the macOS binaries, checked and (where stale)
// rewritten on any build host.
//
// Why: `bun build --compile` appends the bundle to a copy of Bun's runtime.
// For darwin-arm64 Bun re-signs the result ad hoc, but for darwin-x64 (Bun
// 1.4.5) the runtime's original signature is left in place: it covers only the
// runtime's first bytes and its page hashes no longer match (measured here: 75
// bad pages, 31 MB outside the signed range). macOS rejects a binary whose
// signature does not match its bytes, so the build checks each darwin binary
// and, when its signature does not hold, writes the same kind of signature the
// linker writes (ad hoc, SHA-256 pages, no requirements, no team): what a Mac
// checks, computed from the final bytes. Signing with a developer identity
// (Gatekeeper, notarization) needs Apple's tools and is not done here.
// Release tooling only.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";

const MH_MAGIC_64 = 0xfeedfacf;
const LC_SEGMENT_64 = 0x19;
const LC_CODE_SIGNATURE = 0x1d;
const CSMAGIC_EMBEDDED_SIGNATURE = 0xfade0cc0;
const CSMAGIC_CODEDIRECTORY = 0xfade0c02;
const CS_ADHOC = 0x2;
const CS_LINKER_SIGNED = 0x20000;
const CS_HASHTYPE_SHA256 = 2;
const CS_EXECSEG_MAIN_BINARY = 0x1;
const PAGE_SHIFT = 12; // code pages are hashed 4 KiB at a time on both architectures
const PAGE = 1 << PAGE_SHIFT;
const CD_HEADER = 88; // CodeDirectory version 0x20400, through execSegFlags

interface Layout {
  /** Offset of LC_CODE_SIGNATURE's dataoff field. */
  sigCmd: number;
  sigOff: number;
  sigSize: number;
  /** Offset of __LINKEDIT's segment_command_64. */
  linkedit: number;
  textFileOff: bigint;
  textFileSize: bigint;
}

function layoutOf(bin: Buffer): Layout {
  if (bin.readUInt32LE(0) !== MH_MAGIC_64) throw new Error("not a thin 64-bit little-endian Mach-O file");
  const ncmds = bin.readUInt32LE(16);
  let off = 32;
  let sigCmd = -1;
  let linkedit = -1;
  let textFileOff = 0n;
  let textFileSize = 0n;
  for (let i = 0; i < ncmds; i++) {
    const cmd = bin.readUInt32LE(off);
    const size = bin.readUInt32LE(off + 4);
    if (cmd === LC_CODE_SIGNATURE) sigCmd = off + 8;
    if (cmd === LC_SEGMENT_64) {
      const name = bin.toString("latin1", off + 8, off + 24).replace(/\0+$/, "");
      if (name === "__LINKEDIT") linkedit = off;
      if (name === "__TEXT") {
        textFileOff = bin.readBigUInt64LE(off + 40);
        textFileSize = bin.readBigUInt64LE(off + 48);
      }
    }
    off += size;
  }
  if (sigCmd < 0 || linkedit < 0) throw new Error("no LC_CODE_SIGNATURE or __LINKEDIT to sign into");
  return {
    sigCmd,
    sigOff: bin.readUInt32LE(sigCmd),
    sigSize: bin.readUInt32LE(sigCmd + 4),
    linkedit,
    textFileOff,
    textFileSize,
  };
}

function pageHash(bin: Buffer, slot: number, codeLimit: number): Buffer {
  return createHash("sha256")
    .update(bin.subarray(slot * PAGE, Math.min((slot + 1) * PAGE, codeLimit)))
    .digest();
}

/** Whether the embedded signature covers the whole file up to itself and every page hash matches. */
export function machoSignatureHolds(bin: Buffer): boolean {
  const { sigOff, sigSize } = layoutOf(bin);
  const sig = bin.subarray(sigOff, sigOff + sigSize);
  if (sig.length < 12 || sig.readUInt32BE(0) !== CSMAGIC_EMBEDDED_SIGNATURE) return false;
  const count = sig.readUInt32BE(8);
  for (let i = 0; i < count; i++) {
    const cd = sig.subarray(sig.readUInt32BE(16 + 8 * i));
    if (cd.readUInt32BE(0) !== CSMAGIC_CODEDIRECTORY) continue;
    const hashOffset = cd.readUInt32BE(16);
    const nCodeSlots = cd.readUInt32BE(28);
    const codeLimit = cd.readUInt32BE(32);
    const hashSize = cd[36]!;
    if (cd[37] !== CS_HASHTYPE_SHA256 || hashSize !== 32 || cd[39] !== PAGE_SHIFT) continue;
    if (codeLimit !== sigOff || nCodeSlots !== Math.ceil(codeLimit / PAGE)) return false;
    for (let s = 0; s < nCodeSlots; s++) {
      if (!pageHash(bin, s, codeLimit).equals(cd.subarray(hashOffset + s * 32, hashOffset + (s + 1) * 32)))
        return false;
    }
    return true;
  }
  return false;
}

/**
 * Rewrites the signature of a Mach-O file (the signature must be the file's last bytes) as an ad-hoc one over its
 * current contents.
 */
export function adhocSign(bin: Buffer, identifier: string): Buffer {
  const layout = layoutOf(bin);
  const linkeditFileOff = Number(bin.readBigUInt64LE(layout.linkedit + 40));
  if (layout.sigOff + layout.sigSize !== bin.length)
    throw new Error("the code signature is not at the end of the file");
  const codeLimit = layout.sigOff;
  const nSlots = Math.ceil(codeLimit / PAGE);
  const ident = Buffer.from(`${identifier}\0`, "utf8");
  const cdLength = CD_HEADER + ident.length + nSlots * 32;
  const blobLength = 20 + cdLength;
  const sigSize = Math.ceil(blobLength / 16) * 16; // the linker pads it to 16

  // Load commands first: slot 0 hashes the header they sit in.
  const out = Buffer.alloc(codeLimit + sigSize);
  bin.copy(out, 0, 0, codeLimit);
  out.writeUInt32LE(sigSize, layout.sigCmd + 4);
  const linkeditFileSize = codeLimit + sigSize - linkeditFileOff;
  out.writeBigUInt64LE(BigInt(linkeditFileSize), layout.linkedit + 48); // filesize
  const vmsize = BigInt(Math.ceil(linkeditFileSize / 0x4000) * 0x4000);
  if (vmsize > out.readBigUInt64LE(layout.linkedit + 32)) out.writeBigUInt64LE(vmsize, layout.linkedit + 32);

  const sig = out.subarray(codeLimit);
  sig.writeUInt32BE(CSMAGIC_EMBEDDED_SIGNATURE, 0);
  sig.writeUInt32BE(blobLength, 4);
  sig.writeUInt32BE(1, 8); // one blob: the CodeDirectory (type 0)
  sig.writeUInt32BE(0, 12);
  sig.writeUInt32BE(20, 16);
  const cd = sig.subarray(20);
  cd.writeUInt32BE(CSMAGIC_CODEDIRECTORY, 0);
  cd.writeUInt32BE(cdLength, 4);
  cd.writeUInt32BE(0x20400, 8);
  cd.writeUInt32BE(CS_ADHOC | CS_LINKER_SIGNED, 12);
  cd.writeUInt32BE(CD_HEADER + ident.length, 16); // hashOffset
  cd.writeUInt32BE(CD_HEADER, 20); // identOffset
  cd.writeUInt32BE(0, 24); // nSpecialSlots
  cd.writeUInt32BE(nSlots, 28);
  cd.writeUInt32BE(codeLimit, 32);
  cd[36] = 32;
  cd[37] = CS_HASHTYPE_SHA256;
  cd[38] = 0;
  cd[39] = PAGE_SHIFT;
  // spare2, scatterOffset, teamOffset, spare3, codeLimit64 stay 0
  cd.writeBigUInt64BE(layout.textFileOff, 64); // execSegBase
  cd.writeBigUInt64BE(layout.textFileSize, 72); // execSegLimit
  cd.writeBigUInt64BE(BigInt(CS_EXECSEG_MAIN_BINARY), 80); // execSegFlags
  ident.copy(cd, CD_HEADER);
  const hashes = CD_HEADER + ident.length;
  for (let s = 0; s < nSlots; s++) pageHash(out, s, codeLimit).copy(cd, hashes + s * 32);
  return out;
}

/** Checks a darwin binary's signature and re-signs it ad hoc when it does not hold; says which. */
export function ensureAdhocSignature(path: string, identifier = "superfluid"): "valid" | "re-signed" {
  const bin = readFileSync(path);
  if (machoSignatureHolds(bin)) return "valid";
  const signed = adhocSign(bin, identifier);
  if (!machoSignatureHolds(signed)) throw new Error(`${path}: the new signature does not verify`);
  writeFileSync(path, signed, { mode: 0o755 });
  return "re-signed";
}
