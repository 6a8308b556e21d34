// Byte counts as the server writes them everywhere (logs, refusals, the CLI):
// binary units, two significant decimals below 10, one below 100.

/** 1536 -> "1.50 KiB", 2048 -> "2 KiB", 512 -> "512 bytes". */
export function formatBytes(n: number): string {
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  if (i === 0) return `${n} bytes`;
  const digits = Number.isInteger(n) || n >= 100 ? 0 : n >= 10 ? 1 : 2;
  return `${n.toFixed(digits)} ${units[i]}`;
}
