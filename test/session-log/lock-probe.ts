// Helper process for lock.test.ts (not a test file itself).
//   bun lock-probe.ts acquire <dir>   try acquireDirLock, print {"ok":true} or {"ok":false,...}, exit
//   bun lock-probe.ts open <dir>      the same through SessionStore.open
//   bun lock-probe.ts hold <dir>      take the lock, spawn a long-lived child (`sleep 30`),
//                                     print {"ok":true,"child":PID}, then wait to be killed
//   bun lock-probe.ts hold-leak <dir> like hold, but hands the lock's descriptor to the child
//                                     as its stdin on purpose (shows what the test catches)
import { readdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { acquireDirLock } from "../../src/session-log/lock.ts";
import { SessionStore } from "../../src/session-log/store.ts";

const [mode, dir] = process.argv.slice(2) as [string, string];
const say = (v: unknown) => process.stdout.write(`${JSON.stringify(v)}\n`);

try {
  if (mode === "acquire") {
    acquireDirLock(dir).release();
    say({ ok: true });
  } else if (mode === "open") {
    await (await SessionStore.open(dir)).close();
    say({ ok: true });
  } else if (mode === "hold" || mode === "hold-leak") {
    acquireDirLock(dir);
    // The lock's own descriptor (Linux: found through /proc/self/fd); a fresh open would not carry the flock.
    const lockFd = () =>
      Number(
        readdirSync("/proc/self/fd").find((f) => {
          try {
            return readlinkSync(`/proc/self/fd/${f}`) === join(dir, "serve.lock");
          } catch {
            return false;
          }
        }),
      );
    const stdin = mode === "hold-leak" ? lockFd() : "ignore";
    const child = Bun.spawn(["sleep", "30"], { stdin, stdout: "ignore", stderr: "ignore" });
    child.unref();
    say({ ok: true, child: child.pid });
    setInterval(() => {}, 1000);
  } else throw new Error(`unknown mode ${mode}`);
} catch (e) {
  say({ ok: false, name: (e as Error).name, message: (e as Error).message });
}
