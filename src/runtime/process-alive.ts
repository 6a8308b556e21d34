// Whether a process id names a live process: signal 0 checks without
// signalling. One we may not signal (EPERM) exists too.
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}
