// Replaced by build.ts in the compiled binary with the embedded library set.
export interface EmbeddedFile {
  name: string;
  size: number;
  /** The file's SHA-256 (hex), taken at build time. */
  sha256?: string;
  read(): ArrayBuffer;
}
export const embeddedFiles: EmbeddedFile[] = [];
