// The journal over a session log that fails for a while (a full disk): the
// generations whose records were lost are never recorded further, and later
// ones are logged whole once writes succeed again.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Tokenizer } from "../../src/codec/tokenizer.ts";
import type { GenerateRequest } from "../../src/engine/jobs.ts";
import { SessionJournal } from "../../src/session-log/journal.ts";
import { FINISH, SessionStore, type SessionEvent } from "../../src/session-log/store.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Token t is the text `w<t> `. */
const tokenizer: Tokenizer = {
  tokenize: () => [],
  tokenBytes: (t) => Buffer.from(`w${t} `),
};

const job = {
  prompt: [1, 2, 3],
  sampling: {
    temperature: 0,
    topK: 0,
    topP: 1,
    minP: 0,
    seed: 0,
    repeatPenalty: 1,
    presencePenalty: 0,
    frequencyPenalty: 0,
  },
  maxTokens: 8,
} as GenerateRequest;

/** A store whose writes fail with ENOSPC (after writing a few bytes) while `disk.full`. */
async function storeOnDisk(disk: { full: boolean }): Promise<SessionStore> {
  const dir = mkdtempSync(join(tmpdir(), "sf-journal-"));
  dirs.push(dir);
  return SessionStore.open(dir, {
    fileOps: {
      write(fd, data) {
        if (!disk.full) return void writeSync(fd, data);
        writeSync(fd, data, 0, Math.min(7, data.length));
        throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
      },
    },
  });
}

const bodies = (events: SessionEvent[]) => events.map((e) => Object.keys(e.body)[0]);

describe("SessionJournal over a failing log", () => {
  test("a failed flush ends the open generations; later ones are logged whole once the log takes writes again", async () => {
    const disk = { full: false };
    const store = await storeOnDisk(disk);
    const journal = new SessionJournal(store, "m", tokenizer);
    journal.begin("a", job);
    journal.tokens("a", [4]);
    await journal.flush();
    const a = store.lastSession;

    disk.full = true;
    journal.tokens("a", [5]);
    journal.begin("b", job);
    const b = store.lastSession;
    await expect(journal.flush()).rejects.toThrow(/ENOSPC/);
    expect(journal.failure?.message).toMatch(/^ENOSPC/);
    // Late events for the failed generations are not recorded, and do not throw.
    journal.tokens("a", [6]);
    journal.end("a", "length", job);
    journal.end("b", "cancelled", job);
    journal.begin("c", job); // the disk is still full
    await expect(journal.flush()).rejects.toThrow(/ENOSPC/);

    disk.full = false;
    journal.begin("d", job);
    const d = store.lastSession;
    journal.tokens("d", [7, 8]);
    journal.end("d", "stop", job);
    await journal.flush();
    expect(journal.failure).toBeNull();
    expect(store.liveSessions).toBe(0);

    expect(bodies(store.read(a))).toEqual(["Created", "Appended", "Generated"]); // what was committed before the failure
    expect(store.read(b)).toEqual([]);
    const ofD = store.read(d);
    expect(ofD.map((e) => e.event_id)).toEqual([0, 1, 2, 3]);
    expect(ofD[2]!.body).toEqual({ Generated: { span: [7, 8], text: "w7 w8 ", finish: FINISH.open } });
    expect(ofD[3]!.body).toEqual({ Generated: { span: [], text: "", finish: FINISH.endOfTurn } });
    await store.close();
  });
});
