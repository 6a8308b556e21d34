// Replaced by build.ts in the compiled binary with the embedded library set.
export interface EmbeddedFile {
  name: string;
  size: number;
  read(): ArrayBuffer;
}
export const embeddedFiles: EmbeddedFile[] = [];
