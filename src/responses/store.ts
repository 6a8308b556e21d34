// Stored responses (docs/api/responses.md#conversation-state): what
// `previous_response_id` continues and `GET /v1/responses/{id}` returns,
// under <sessions>/responses/, one pair of files per response:
//   <id>.tokens  the turn's token ids (uint32, little-endian): the whole
//                prompt and reply, or, for a turn continued warm, only what
//                it added to its base's tokens (so a long chain is not
//                stored again at every turn);
//   <id>.json    everything else: the response object, the request's input
//                items, the conversation head, the chain links.
// A record is written aside, synced and renamed into place, tokens first:
// the .json is the commit, so a crash leaves either the whole record or an
// orphan .tokens file that the next open removes. save() resolves once both
// files and the folder are synced, before the response goes to its client.
//
// Deletion hides a record from its API at once; its files stay while a later
// stored response continues it (a rebuild or a warm continuation needs them)
// and go once nothing does. Records never expire.
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, unlinkSync } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { makePrivateDir, PRIVATE_FILE_MODE } from "../sessions/private-files.ts";
import { fsyncDir } from "../sessions/wal.ts";
import { Lru } from "../pipeline/lru.ts";

/** An input or output item as the API carries it. */
export type Item = Record<string, unknown> & { type?: string; id?: string };

export interface StoredResponse {
  id: string;
  /** The served id the response ran on. */
  model: string;
  created_at: number;
  /** The response this one continued, or null. */
  previous: string | null;
  /** The response object as returned. */
  response: Record<string, unknown>;
  /** The request's input items (each with an id), in order. */
  input: Item[];
  /** What must match for a later turn to continue warm: instructions, tools, template variables. */
  head: string;
  /** The turn ended normally (not cut by the output cap): its tokens may be continued. */
  warmable: boolean;
  /** These tokens continue this response's tokens (a warm turn), or null (they are the whole conversation). */
  tokensBase: string | null;
  /** Deleted through the API; kept only while a later record continues it. */
  hidden?: boolean;
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

export class ResponseStore {
  /** Every record on disk (hidden ones included), by id. */
  private readonly records = new Map<string, StoredResponse>();
  /** How many records name each id as their previous or their token base. */
  private readonly dependents = new Map<string, number>();
  /** Whole conversation tokens of recently used records. */
  private readonly tokenCache = new Lru<number[]>(32);

  private constructor(readonly dir: string) {}

  /** Opens (creating) the folder and reads every committed record; orphaned and half-written files are removed. */
  static open(dir: string): ResponseStore {
    makePrivateDir(dir);
    const store = new ResponseStore(dir);
    const names = new Set(readdirSync(dir));
    for (const name of names) {
      if (name.endsWith(".tmp")) {
        unlinkSync(join(dir, name));
        continue;
      }
      if (!name.endsWith(".json")) continue;
      const record = JSON.parse(readFileSync(join(dir, name), "utf8")) as StoredResponse;
      store.index(record);
    }
    for (const name of names) {
      const id = name.replace(/\.tokens$/, "");
      if (name.endsWith(".tokens") && !store.records.has(id)) unlinkSync(join(dir, name));
    }
    return store;
  }

  private index(record: StoredResponse): void {
    this.records.set(record.id, record);
    for (const link of new Set([record.previous, record.tokensBase])) {
      if (link !== null) this.dependents.set(link, (this.dependents.get(link) ?? 0) + 1);
    }
  }

  /** A response the API may see (not deleted), or undefined. */
  get(id: string): StoredResponse | undefined {
    if (!ID_PATTERN.test(id)) return undefined;
    const record = this.records.get(id);
    return record && !record.hidden ? record : undefined;
  }

  /** The conversation up to and including `id`, oldest first (hidden links included). */
  chain(id: string): StoredResponse[] {
    const out: StoredResponse[] = [];
    for (let r = this.records.get(id); r; r = r.previous === null ? undefined : this.records.get(r.previous)) out.push(r);
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

  /** Writes the record and its tokens durably; resolves once both are on disk. */
  async save(record: StoredResponse, tokens: number[]): Promise<void> {
    const base = join(this.dir, record.id);
    await writeSynced(`${base}.tokens.tmp`, encodeTokens(tokens));
    await writeSynced(`${base}.json.tmp`, JSON.stringify(record));
    renameSync(`${base}.tokens.tmp`, `${base}.tokens`);
    renameSync(`${base}.json.tmp`, `${base}.json`);
    fsyncDir(this.dir);
    this.index(record);
  }

  /** Hides the response; its files go now if nothing continues it, else once nothing does. False when there is no such response. */
  async delete(id: string): Promise<boolean> {
    const record = this.get(id);
    if (!record) return false;
    record.hidden = true;
    if ((this.dependents.get(id) ?? 0) > 0) {
      await writeSynced(join(this.dir, `${id}.json.tmp`), JSON.stringify(record));
      renameSync(join(this.dir, `${id}.json.tmp`), join(this.dir, `${id}.json`));
      fsyncDir(this.dir);
      return true;
    }
    this.drop(record);
    fsyncDir(this.dir);
    return true;
  }

  /** Removes a record nothing depends on, then any hidden link it was the last to depend on. */
  private drop(record: StoredResponse): void {
    this.records.delete(record.id);
    this.tokenCache.delete(record.id);
    // The commit file goes first: a crash between the two leaves an orphan .tokens, removed on open.
    unlinkSync(join(this.dir, `${record.id}.json`));
    if (existsSync(join(this.dir, `${record.id}.tokens`))) unlinkSync(join(this.dir, `${record.id}.tokens`));
    for (const link of new Set([record.previous, record.tokensBase])) {
      if (link === null) continue;
      const left = (this.dependents.get(link) ?? 1) - 1;
      if (left > 0) {
        this.dependents.set(link, left);
        continue;
      }
      this.dependents.delete(link);
      const linked = this.records.get(link);
      if (linked?.hidden) this.drop(linked);
    }
  }
}
