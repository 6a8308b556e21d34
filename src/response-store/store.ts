// Stored responses (docs/api/responses.md#conversation-state): what
// `previous_response_id` continues and `GET /v1/responses/{id}` returns,
// under <sessions>/responses/, one pair of files per response:
//   <id>.tokens  the turn's token ids (uint32, little-endian): the whole
//                prompt and reply, or, for a turn continued warm, only what
//                it added to its base's tokens (so a long chain is not
//                stored again at every turn);
//   <id>.json    everything else: the response object, the request's input
//                items, the conversation head, the chain links.
// A record is written aside, synced and renamed into place, tokens first,
// the folder synced after each rename: the .json is the commit, so a crash
// leaves either the whole record or an orphan .tokens file that the next
// open removes. save() resolves once both files are on disk, before the
// response goes to its client.
//
// Memory holds an index (links, model, head, flags) of every record; bodies
// (the response object and input items) are read from disk when asked for,
// the last few kept.
//
// Deletion hides a record from its API at once; its files stay while a
// later stored response continues it (a rebuild or a warm continuation needs
// them), or while a turn continuing it is still generating (pin/unpin), and
// go once nothing needs them. Records never expire. Writes and deletions run
// one at a time, so a deletion never races a save or another deletion.
//
// Scoping (docs/api/security.md#scoping): a record keeps the scope of the key
// that created it (`owner`, absent without one); get() and delete() see only
// the caller's own, so another scope's id is as unknown as one never stored.
// The chain links of a visible record are the same scope's (a turn can only
// continue a response its caller sees).
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, unlinkSync } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { makePrivateDir, PRIVATE_FILE_MODE } from "../runtime/private-files.ts";
import { fsyncDir } from "../runtime/private-files.ts";
import { Lru } from "../pipeline/lru.ts";

/** An input or output item as the API carries it. */
export type Item = Record<string, unknown> & { type?: string; id?: string };

/** What a record says about its place in a conversation, kept in memory for every record. */
export interface ResponseIndex {
  id: string;
  /** The served id the response ran on. */
  model: string;
  created_at: number;
  /** The response this one continued, or null. */
  previous: string | null;
  /** What must match for a later turn to continue warm: instructions, tools, template variables. */
  head: string;
  /** The turn ended normally (not cut by the output cap): its tokens may be continued. */
  warmable: boolean;
  /** These tokens continue this response's tokens (a warm turn), or null (they are the whole conversation). */
  tokensBase: string | null;
  /** Deleted through the API; kept only while something still needs it. */
  hidden?: boolean;
  /** The scope of the request that created it; absent when it had none (shared with every unscoped caller). */
  owner?: string;
}

export interface StoredResponse extends ResponseIndex {
  /** The response object as returned. */
  response: Record<string, unknown>;
  /** The request's input items (each with an id), in order. */
  input: Item[];
}

/** `resp_` and 128 random bits. */
export function newResponseId(): string {
  return `resp_${randomBytes(16).toString("hex")}`;
}

const ID_PATTERN = /^resp_[0-9a-f]{32}$/;

async function writeSynced(path: string, data: Uint8Array | string): Promise<void> {
  const file = await open(path, "w", PRIVATE_FILE_MODE);
  try {
    await file.writeFile(data);
    await file.sync();
  } finally {
    await file.close();
  }
}

function encodeTokens(tokens: number[]): Uint8Array {
  const out = new Uint32Array(tokens.length);
  out.set(tokens);
  return new Uint8Array(out.buffer);
}

function decodeTokens(bytes: Buffer): number[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Array<number>(bytes.byteLength >>> 2);
  for (let i = 0; i < out.length; i++) out[i] = view.getUint32(i * 4, true);
  return out;
}

function indexOf(record: StoredResponse): ResponseIndex {
  const { id, model, created_at, previous, head, warmable, tokensBase, hidden, owner } = record;
  return {
    id,
    model,
    created_at,
    previous,
    head,
    warmable,
    tokensBase,
    ...(hidden ? { hidden } : {}),
    ...(owner === undefined ? {} : { owner }),
  };
}

export class ResponseStore {
  /** Every record on disk (hidden ones included), by id. */
  private readonly records = new Map<string, ResponseIndex>();
  /** How many records, and turns still generating, need each id. */
  private readonly dependents = new Map<string, number>();
  private readonly bodies = new Lru<StoredResponse>(64);
  /** Whole conversation tokens of recently used records. */
  private readonly tokenCache = new Lru<number[]>(32);
  /** The mutation running now; the next one starts after it. */
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(readonly dir: string) {}

  /**
   * Opens (creating) the folder and indexes every committed record; orphaned
   * and half-written files are removed, and a record that cannot be read is
   * left on disk, unserved, with a warning.
   */
  static open(dir: string, warn: (line: string) => void = (line) => console.error(line)): ResponseStore {
    makePrivateDir(dir);
    const store = new ResponseStore(dir);
    const names = new Set(readdirSync(dir));
    for (const name of names) {
      if (name.endsWith(".tmp")) {
        unlinkSync(join(dir, name));
        continue;
      }
      if (!name.endsWith(".json")) continue;
      try {
        const record = JSON.parse(readFileSync(join(dir, name), "utf8")) as StoredResponse;
        if (`${record.id}.json` !== name || !ID_PATTERN.test(record.id))
          throw new Error("its id does not match its file name");
        if (record.owner !== undefined && typeof record.owner !== "string")
          throw new Error("its owner is not a string");
        store.index(indexOf(record));
      } catch (err) {
        warn(
          `superfluid: stored response ${join(dir, name)} cannot be read (${(err as Error).message}); it is not served`,
        );
      }
    }
    for (const name of names) {
      const id = name.replace(/\.tokens$/, "");
      if (name.endsWith(".tokens") && !names.has(`${id}.json`)) unlinkSync(join(dir, name));
    }
    return store;
  }

  private index(record: ResponseIndex): void {
    this.records.set(record.id, record);
    for (const link of new Set([record.previous, record.tokensBase])) if (link !== null) this.pin(link);
  }

  /** A response the scope `owner` may see (its own, not deleted), or undefined. */
  get(id: string, owner?: string): ResponseIndex | undefined {
    if (!ID_PATTERN.test(id)) return undefined;
    const record = this.records.get(id);
    return record && !record.hidden && record.owner === owner ? record : undefined;
  }

  /** A record with its body (the response object and input items), read from disk. */
  body(id: string): StoredResponse {
    const cached = this.bodies.get(id);
    if (cached) return cached;
    const record = JSON.parse(readFileSync(join(this.dir, `${id}.json`), "utf8")) as StoredResponse;
    this.bodies.set(id, record);
    return record;
  }

  /** The conversation up to and including `id`, oldest first (hidden links included). */
  chain(id: string): StoredResponse[] {
    const out: StoredResponse[] = [];
    for (let r = this.records.get(id); r; r = r.previous === null ? undefined : this.records.get(r.previous))
      out.push(this.body(r.id));
    return out.reverse();
  }

  /** The record's whole conversation as tokens: its base's, then its own. */
  tokens(id: string): number[] {
    const cached = this.tokenCache.get(id);
    if (cached) return cached;
    const record = this.records.get(id);
    if (!record) throw new Error(`no stored response ${id}`);
    const own = decodeTokens(readFileSync(join(this.dir, `${id}.tokens`)));
    const whole = record.tokensBase === null ? own : [...this.tokens(record.tokensBase), ...own];
    this.tokenCache.set(id, whole);
    return whole;
  }

  /**
   * Keeps a record's files while a turn continuing it generates, even if it is deleted meanwhile; unpin() when the turn
   * ends.
   */
  pin(id: string): void {
    this.dependents.set(id, (this.dependents.get(id) ?? 0) + 1);
  }

  /** Ends a pin (or a dependent's link); a deleted record nothing needs any more is dropped. */
  unpin(id: string): Promise<void> {
    return this.serially(async () => this.release(id));
  }

  /** Writes the record and its tokens durably; resolves once both are on disk. */
  save(record: StoredResponse, tokens: number[]): Promise<void> {
    return this.serially(async () => {
      const base = join(this.dir, record.id);
      await writeSynced(`${base}.tokens.tmp`, encodeTokens(tokens));
      await writeSynced(`${base}.json.tmp`, JSON.stringify(record));
      renameSync(`${base}.tokens.tmp`, `${base}.tokens`);
      fsyncDir(this.dir);
      renameSync(`${base}.json.tmp`, `${base}.json`);
      fsyncDir(this.dir);
      this.index(indexOf(record));
      this.bodies.set(record.id, record);
    });
  }

  /**
   * Hides one of the scope `owner`'s responses; its files go now if nothing needs it, else once nothing does. False
   * when it has no such response.
   */
  delete(id: string, owner?: string): Promise<boolean> {
    return this.serially(async () => {
      const record = this.get(id, owner);
      if (!record) return false;
      record.hidden = true;
      if ((this.dependents.get(id) ?? 0) > 0) {
        const body = { ...this.body(id), hidden: true };
        await writeSynced(join(this.dir, `${id}.json.tmp`), JSON.stringify(body));
        renameSync(join(this.dir, `${id}.json.tmp`), join(this.dir, `${id}.json`));
        this.bodies.set(id, body);
      } else this.drop(record);
      fsyncDir(this.dir);
      return true;
    });
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => {});
    return run;
  }

  private release(id: string): void {
    const left = (this.dependents.get(id) ?? 1) - 1;
    if (left > 0) {
      this.dependents.set(id, left);
      return;
    }
    this.dependents.delete(id);
    const record = this.records.get(id);
    if (record?.hidden) this.drop(record);
  }

  /** Removes a record nothing depends on, then releases its links. */
  private drop(record: ResponseIndex): void {
    this.records.delete(record.id);
    this.bodies.delete(record.id);
    this.tokenCache.delete(record.id);
    // The commit file goes first: a crash between the two leaves an orphan .tokens, removed on open.
    unlinkSync(join(this.dir, `${record.id}.json`));
    if (existsSync(join(this.dir, `${record.id}.tokens`))) unlinkSync(join(this.dir, `${record.id}.tokens`));
    for (const link of new Set([record.previous, record.tokensBase])) if (link !== null) this.release(link);
  }
}
