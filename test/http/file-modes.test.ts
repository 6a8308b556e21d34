// Modes of what the server writes under --sessions (docs/cli.md#sessions):
// the folder and every folder under it 0700, every file 0600, whatever the
// umask (set to 000 here, so a file created without an explicit mode would
// show 0666), and a folder or file an older version left with wider bits is
// tightened at start. Covers the session logs (wal.log, wal.log.prev under
// --sessions-cache, a second model's models/<id>/), files/, batches/,
// responses/ and logs/.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fixturePath } from "../support/models.ts";
import { startTestServer, type TestServer } from "./support.ts";

const CHAT = "/v1/chat/completions";
const root = mkdtempSync(join(tmpdir(), "superfluid-file-modes-"));
const sessions = join(root, "sessions");
let umask = 0;
let s: TestServer | undefined;

beforeAll(() => {
  umask = process.umask(0);
});
afterAll(async () => {
  await s?.server.close();
  process.umask(umask);
  rmSync(root, { recursive: true, force: true });
});

/** Every entry under `dir` whose mode is not 0700 (folders) or 0600 (files), as `path mode`. */
function wrongModes(dir: string): string[] {
  const wrong: string[] = [];
  const check = (path: string) => {
    const st = statSync(path);
    const mode = st.mode & 0o777;
    const want = st.isDirectory() ? 0o700 : 0o600;
    if (mode !== want) wrong.push(`${relative(root, path) || "."} ${mode.toString(8)}`);
    if (st.isDirectory()) for (const name of readdirSync(path)) check(join(path, name));
  };
  check(dir);
  return wrong;
}

/** Every path under `dir`, relative to it. */
function listing(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      out.push(relative(dir, p));
      if (statSync(p).isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out.sort();
}

async function start(extra: string[] = []): Promise<TestServer> {
  await s?.server.close();
  // A second model gets its own session log under models/<id>/.
  s = await startTestServer({
    fixture: "tiny-chat",
    sessions,
    extraArgs: [await fixturePath("tiny-random"), "--log-dir", join(sessions, "logs"), ...extra],
  });
  return s;
}

/**
 * Traffic that writes in every store: an upload, a batch that runs to its end, a stored response, a chat turn on each
 * model.
 */
async function traffic(t: TestServer): Promise<void> {
  const line = JSON.stringify({
    custom_id: "one",
    method: "POST",
    url: CHAT,
    body: { messages: [{ role: "user", content: "hi" }], max_tokens: 4 },
  });
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([`${line}\n`]), "input.jsonl");
  const file = (await (await fetch(`${t.url}/v1/files`, { method: "POST", body: form })).json()) as { id: string };
  const batch = await t.client.batches.create({ input_file_id: file.id, endpoint: CHAT, completion_window: "24h" });
  for (;;) {
    const b = await t.client.batches.retrieve(batch.id);
    if (["completed", "failed", "cancelled", "expired"].includes(b.status)) break;
    await Bun.sleep(20);
  }
  await t.client.responses.create({ model: t.model, input: "hello", max_output_tokens: 8 });
  const models = (await t.client.models.list()).data.map((m) => m.id);
  expect(models).toHaveLength(2);
  for (const model of models) {
    await t.client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 4 });
  }
}

describe("modes under --sessions", () => {
  test("with umask 000 every folder is 0700 and every file 0600", async () => {
    await traffic(await start());
    const paths = listing(sessions);
    for (const p of ["wal.log", "serve.lock", "files", "batches", "responses", "logs", "models"])
      expect(paths).toContain(p);
    expect(paths.some((p) => p.startsWith("files/file-") && p.endsWith(".data"))).toBe(true);
    expect(paths.some((p) => p.startsWith("batches/batch_") && p.endsWith(".results.jsonl"))).toBe(true);
    expect(paths.some((p) => p.startsWith("responses/resp_") && p.endsWith(".tokens"))).toBe(true);
    expect(paths.some((p) => /^models\/[^/]+\/wal\.log$/.test(p))).toBe(true);
    expect(wrongModes(sessions)).toEqual([]);
    await s!.server.close();
    s = undefined;
    expect(wrongModes(sessions)).toEqual([]);
  });

  test("what an older version left with wider bits is tightened at start; wal.log.prev is 0600", async () => {
    for (const dir of [
      sessions,
      join(sessions, "files"),
      join(sessions, "batches"),
      join(sessions, "responses"),
      join(sessions, "logs"),
    ])
      chmodSync(dir, 0o755);
    for (const name of readdirSync(join(sessions, "files")))
      if (!name.startsWith("tmp")) chmodSync(join(sessions, "files", name), 0o644);
    for (const name of ["wal.log", "wal.log.store-id"]) chmodSync(join(sessions, name), 0o644);
    for (const name of readdirSync(join(sessions, "logs"))) chmodSync(join(sessions, "logs", name), 0o644);
    // Each model's own folder (models/ itself is only made once, 0700).
    for (const name of readdirSync(join(sessions, "models"))) chmodSync(join(sessions, "models", name), 0o755);
    expect(wrongModes(sessions)).not.toEqual([]);
    // --sessions-cache moves the old log aside as wal.log.prev.
    await traffic(await start(["--sessions-cache"]));
    expect(listing(sessions)).toContain("wal.log.prev");
    expect(wrongModes(sessions)).toEqual([]);
  });
});
