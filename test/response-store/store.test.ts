// The stored-response records (src/response-store/store.ts): a record is whole or
// absent after a crash, warm turns keep only their own tokens and read back
// the whole conversation, and deletion keeps a record's files while a later
// record continues it.
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newResponseId, ResponseStore, type StoredResponse } from "../../src/response-store/store.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "superfluid-response-store-"));
  dirs.push(dir);
  return join(dir, "responses");
}

function record(previous: string | null, tokensBase: string | null = null): StoredResponse {
  const id = newResponseId();
  return {
    id,
    model: "m",
    created_at: 1,
    previous,
    response: { id, output: [] },
    input: [],
    head: "h",
    warmable: true,
    tokensBase,
  };
}

describe("ResponseStore", () => {
  test("records survive a reopen; a warm turn's tokens continue its base's", async () => {
    const dir = freshDir();
    const store = ResponseStore.open(dir);
    const one = record(null);
    const two = record(one.id, one.id);
    const three = record(two.id); // rebuilt: its tokens are the whole conversation
    await store.save(one, [1, 2, 3]);
    await store.save(two, [4, 5]);
    await store.save(three, [9, 9, 9, 9]);
    const reopened = ResponseStore.open(dir);
    expect(reopened.get(two.id)?.previous).toBe(one.id);
    expect(reopened.tokens(two.id)).toEqual([1, 2, 3, 4, 5]);
    expect(reopened.tokens(three.id)).toEqual([9, 9, 9, 9]);
    expect(reopened.chain(three.id).map((r) => r.id)).toEqual([one.id, two.id, three.id]);
    expect(reopened.get("resp_nope")).toBeUndefined();
  });

  test("a crash mid-write leaves no record: temporary files and orphaned tokens are removed on open", async () => {
    const dir = freshDir();
    const store = ResponseStore.open(dir);
    const kept = record(null);
    await store.save(kept, [1]);
    const torn = newResponseId();
    writeFileSync(join(dir, `${torn}.tokens`), new Uint8Array(8));
    writeFileSync(join(dir, `${torn}.json.tmp`), "{");
    const reopened = ResponseStore.open(dir);
    expect(reopened.get(torn)).toBeUndefined();
    expect(readdirSync(dir).sort()).toEqual([`${kept.id}.json`, `${kept.id}.tokens`].sort());
  });

  test("delete hides at once; the files stay while a later record continues it, and go with the last one", async () => {
    const dir = freshDir();
    const store = ResponseStore.open(dir);
    const one = record(null);
    const two = record(one.id, one.id);
    await store.save(one, [1, 2]);
    await store.save(two, [3]);
    expect(await store.delete(one.id)).toBe(true);
    expect(store.get(one.id)).toBeUndefined();
    expect(await store.delete(one.id)).toBe(false);
    expect(existsSync(join(dir, `${one.id}.json`))).toBe(true);
    expect(store.tokens(two.id)).toEqual([1, 2, 3]);
    // Hidden across a restart too.
    const reopened = ResponseStore.open(dir);
    expect(reopened.get(one.id)).toBeUndefined();
    expect(reopened.tokens(two.id)).toEqual([1, 2, 3]);
    // Deleting the last dependent drops both.
    expect(await reopened.delete(two.id)).toBe(true);
    expect(readdirSync(dir)).toEqual([]);
  });

  test("a pinned record (a turn continuing it still generating) keeps its files through a delete until unpinned", async () => {
    const dir = freshDir();
    const store = ResponseStore.open(dir);
    const one = record(null);
    await store.save(one, [1, 2]);
    store.pin(one.id);
    expect(await store.delete(one.id)).toBe(true);
    expect(store.get(one.id)).toBeUndefined();
    expect(store.tokens(one.id)).toEqual([1, 2]);
    // The continuing turn is saved, then its pin ends: the link keeps the files.
    const two = record(one.id, one.id);
    await store.save(two, [3]);
    await store.unpin(one.id);
    expect(store.tokens(two.id)).toEqual([1, 2, 3]);
    // A turn that ends unsaved (cancelled) leaves nothing behind.
    const three = record(null);
    await store.save(three, [7]);
    store.pin(three.id);
    await store.delete(three.id);
    await store.unpin(three.id);
    expect(existsSync(join(dir, `${three.id}.json`))).toBe(false);
  });

  test("deletes racing each other leave no record behind", async () => {
    for (let i = 0; i < 5; i++) {
      const dir = freshDir();
      const store = ResponseStore.open(dir);
      const one = record(null);
      const two = record(one.id, one.id);
      await store.save(one, [1]);
      await store.save(two, [2]);
      expect(await Promise.all([store.delete(one.id), store.delete(two.id)])).toEqual([true, true]);
      expect(readdirSync(dir)).toEqual([]);
      expect(readdirSync(ResponseStore.open(dir).dir)).toEqual([]);
    }
  });

  test("a record that cannot be read is skipped with a warning, not a failed start", async () => {
    const dir = freshDir();
    const store = ResponseStore.open(dir);
    const kept = record(null);
    await store.save(kept, [1]);
    const broken = newResponseId();
    writeFileSync(join(dir, `${broken}.json`), "{not json");
    const warnings: string[] = [];
    const reopened = ResponseStore.open(dir, (line) => warnings.push(line));
    expect(reopened.get(kept.id)).toBeDefined();
    expect(reopened.get(broken)).toBeUndefined();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(broken);
  });
});
