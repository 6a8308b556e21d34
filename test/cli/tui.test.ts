// `serve --tui` used as a person uses it: the server started in a real
// terminal (tmux), the screen read back with `tmux capture-pane`, a chat sent
// over HTTP and seen in the log region, a streamed load seen as busy lanes
// and tok/s in the panel, `q` sent as a key; then the JSON log on disk.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ensureFixture } from "../../src/fixtures/index.ts";
import { freePort } from "../scenarios/support.ts";

const TMUX = Bun.which("tmux");
const MAIN = resolve(import.meta.dir, "../../src/main.ts");

describe.skipIf(!TMUX)("serve --tui in a terminal (tmux)", () => {
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "superfluid-tui-test-"));
  });
  // A tmux server of our own, so the test never touches a person's sessions.
  const socket = `superfluid-tui-${process.pid}`;
  const tmux = (...args: string[]) => Bun.spawnSync([TMUX!, "-L", socket, ...args], { stdout: "pipe", stderr: "pipe" });
  const pane = () => tmux("capture-pane", "-p", "-t", "tui").stdout.toString();

  afterAll(() => {
    // Kills the server process too, should a failed test leave it running.
    tmux("kill-server");
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Polls the pane until `ready` holds; the deadline only guards a hang. */
  async function waitForPane(ready: (screen: string) => boolean, what: string): Promise<string> {
    const deadline = Date.now() + 180_000;
    for (;;) {
      const screen = pane();
      if (ready(screen)) return screen;
      if (Date.now() > deadline) throw new Error(`the pane never showed ${what}:\n${screen}`);
      await Bun.sleep(200);
    }
  }

  test("shows the node up, a chat's access line, lanes and tok/s under load; q exits 0; JSON logs in <sessions>/logs", async () => {
    const model = await ensureFixture("tiny-chat", join(dir, "models"));
    const port = await freePort();
    const sessions = join(dir, "sessions");
    const rcFile = join(dir, "rc");
    const command = `'${process.execPath}' '${MAIN}' serve '${model}' --port ${port} --sessions '${sessions}' --threads 1 --max-batch 2; echo $? > '${rcFile}'`;
    expect(tmux("new-session", "-d", "-s", "tui", "-x", "120", "-y", "32", "sh", "-c", command).exitCode).toBe(0);
    const base = `http://127.0.0.1:${port}`;

    await waitForPane(
      (p) => p.includes(`127.0.0.1:${port}  up`) && /serving .* at http/.test(p),
      "the node up and the serving line",
    );

    const served = ((await (await fetch(`${base}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
    const chat = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: served, messages: [{ role: "user", content: "Hi." }], max_tokens: 8 }),
    });
    expect(chat.status).toBe(200);
    await chat.json();
    await waitForPane((p) => /<-- 200 POST \/v1\/chat\/completions model=/.test(p), "the chat's access line");

    // A streamed load that keeps going until the panel shows it.
    const stop = new AbortController();
    const stream = async () => {
      while (!stop.signal.aborted) {
        try {
          const res = await fetch(`${base}/v1/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({
              model: served,
              messages: [{ role: "user", content: "Count." }],
              stream: true,
              ignore_eos: true,
              max_tokens: 1500,
            }),
            signal: stop.signal,
          });
          await res.text();
        } catch {
          // Aborted at the end of the load.
        }
      }
    };
    const load = [stream(), stream()];
    try {
      const screen = await waitForPane((p) => {
        const decode = /decode ([\d.]+) tok\/s/.exec(p);
        return /lanes [1-9]\d*\//.test(p) && decode !== null && Number(decode[1]) > 0;
      }, "busy lanes and decode tok/s");
      expect(screen).toContain("superfluid serve · 1 node");
      expect(screen).toMatch(/queue int \d+ cmp \d+ agt \d+ bg \d+/);
      if (process.env.SUPERFLUID_TUI_SCREEN) await Bun.write(process.env.SUPERFLUID_TUI_SCREEN, screen);
    } finally {
      stop.abort();
      await Promise.all(load);
    }

    tmux("send-keys", "-t", "tui", "q");
    const deadline = Date.now() + 60_000;
    while (!existsSync(rcFile) || readFileSync(rcFile, "utf8").trim() === "") {
      if (Date.now() > deadline) throw new Error(`serve did not exit after q:\n${pane()}`);
      await Bun.sleep(100);
    }
    expect(readFileSync(rcFile, "utf8").trim()).toBe("0");

    const logs = join(sessions, "logs");
    const files = readdirSync(logs).filter((f) => f.endsWith(".jsonl"));
    expect(files.length).toBeGreaterThan(0);
    const file = join(logs, files[0]!);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const records = readFileSync(file, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(records.some((r) => r.type === "message" && /serving/.test(r.message))).toBe(true);
    expect(records.some((r) => r.type === "access" && r.status === 200)).toBe(true);
  }, 400_000);
});
