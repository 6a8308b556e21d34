// Scoping of stored objects (docs/api/security.md#scoping): a file, a batch
// or a stored response is seen only by the scope of the key that created it,
// and to any other scope its id is answered exactly as an id that never
// existed (same status, same envelope, the id the only difference). First the
// stores on their own (the scope passed explicitly), then the HTTP routes
// under a --key-policy with two keys and a global --api-key, across a
// restart, and a server without keys on the same folder.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BatchService } from "../../../src/batches/service.ts";
import { FileStore, FilesCursorError } from "../../../src/files/store.ts";
import { RequestError } from "../../../src/daemon/request-error.ts";
import { newResponseId, ResponseStore, type StoredResponse } from "../../../src/response-store/store.ts";
import { startTestServer, type TestServer } from "../support.ts";

const CHAT = "/v1/chat/completions";
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "superfluid-scoping-"));
  dirs.push(d);
  return d;
}

/** Polls `cond`; the hang guard only stops a hung wait. */
async function until(cond: () => boolean | Promise<boolean>, hangGuardMs = 300_000): Promise<void> {
  const started = performance.now();
  while (!(await cond())) {
    if (performance.now() - started > hangGuardMs) throw new Error("condition not reached before the hang guard");
    await Bun.sleep(20);
  }
}

/** The RequestError `fn` throws (fails when it throws nothing). */
async function refusal(fn: () => unknown): Promise<RequestError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(RequestError);
    return err as RequestError;
  }
  throw new Error("it succeeded; it was expected to fail");
}

/** A refusal as the client sees it, with the id it names replaced, to compare with an unknown id's. */
const shape = (err: RequestError, id: string) => ({
  status: err.status,
  code: err.code,
  field: err.field,
  message: err.message.replaceAll(id, "<id>"),
});

describe("the stores, scope passed explicitly", () => {
  test("files: get, list, cursors and delete see only the owner's; owners survive a reopen", async () => {
    const dir = join(tempDir(), "files");
    const store = await FileStore.open(dir);
    const a = await store.create({ filename: "a.txt", purpose: "user_data", body: "alice", owner: "alice" });
    const b = await store.create({ filename: "b.txt", purpose: "user_data", body: "bob", owner: "bob" });
    const shared = await store.create({ filename: "s.txt", purpose: "user_data", body: "shared" });
    expect(a).not.toHaveProperty("owner");
    for (const reopened of [store, await FileStore.open(dir)]) {
      expect(reopened.get(a.id, "alice")?.filename).toBe("a.txt");
      expect(reopened.get(a.id, "bob")).toBeUndefined();
      expect(reopened.get(a.id)).toBeUndefined();
      expect(reopened.get(shared.id)?.filename).toBe("s.txt");
      expect(reopened.get(shared.id, "alice")).toBeUndefined();
      expect(reopened.list({ owner: "alice" }).data.map((f) => f.id)).toEqual([a.id]);
      expect(reopened.list({ owner: "bob" }).data.map((f) => f.id)).toEqual([b.id]);
      expect(reopened.list().data.map((f) => f.id)).toEqual([shared.id]);
      // Another scope's id is no cursor, as an id never seen is none.
      expect(() => reopened.list({ owner: "bob", after: a.id })).toThrow(FilesCursorError);
      expect(reopened.list({ owner: "alice", after: a.id }).data).toEqual([]);
      reopened.close();
    }
    const again = await FileStore.open(dir);
    expect(await again.delete(a.id, "bob")).toBe(false);
    expect(await again.delete(a.id)).toBe(false);
    expect(again.get(a.id, "alice")).toBeDefined();
    expect(await again.delete(a.id, "alice")).toBe(true);
    // A deleted file's id stays a cursor for its owner only.
    expect(again.list({ owner: "alice", after: a.id }).data).toEqual([]);
    expect(() => again.list({ owner: "bob", after: a.id })).toThrow(FilesCursorError);
    again.close();
  });

  test("batches: the input file must be the caller's; get, list, cancel see only the owner's; output files are the owner's", async () => {
    const root = tempDir();
    const files = await FileStore.open(join(root, "files"));
    const execute = async (body: Record<string, unknown>) => ({
      status: 200,
      body: { object: "chat.completion", id: body.id, usage: { prompt_tokens: 1, completion_tokens: 1 } },
    });
    const open = () => BatchService.open({ dir: join(root, "batches"), files, execute, modelId: "m", log: () => {} });
    const service = open();
    service.start();
    const text = JSON.stringify({ custom_id: "x", method: "POST", url: CHAT, body: { id: "x" } });
    const input = (await files.create({ filename: "in.jsonl", purpose: "batch", body: text, owner: "alice" })).id;
    const body = { input_file_id: input, endpoint: CHAT, completion_window: "24h" };

    const unknownFile = await refusal(() =>
      service.create({ ...body, input_file_id: "file-000000000000000000000000" }, "bob"),
    );
    const othersFile = await refusal(() => service.create(body, "bob"));
    expect(shape(othersFile, input)).toEqual(shape(unknownFile, "file-000000000000000000000000"));
    expect(othersFile.status).toBe(404);

    const created = await service.create(body, "alice");
    expect(created).not.toHaveProperty("owner");
    await until(() => service.get(created.id, "alice").status === "completed");
    const done = service.get(created.id, "alice");
    expect(files.get(done.output_file_id!, "alice")).toBeDefined();
    expect(files.get(done.output_file_id!, "bob")).toBeUndefined();
    expect(files.get(done.output_file_id!)).toBeUndefined();

    const unknown = "batch_0123456789abcdef01234567";
    for (const scope of ["bob", undefined]) {
      expect(shape(await refusal(() => service.get(created.id, scope)), created.id)).toEqual(
        shape(await refusal(() => service.get(unknown, scope)), unknown),
      );
      expect(shape(await refusal(() => service.cancel(created.id, scope)), created.id)).toEqual(
        shape(await refusal(() => service.cancel(unknown, scope)), unknown),
      );
      expect(service.list({}, scope).data).toEqual([]);
      const after = await refusal(() => service.list({ after: created.id }, scope));
      expect(shape(after, created.id)).toEqual(
        shape(await refusal(() => service.list({ after: unknown }, scope)), unknown),
      );
    }
    expect(service.list({}, "alice").data.map((b) => b.id)).toEqual([created.id]);
    await service.stop();

    // The owner is in the record on disk: a reopened service scopes the same way.
    const reopened = open();
    expect(reopened.get(created.id, "alice").status).toBe("completed");
    expect((await refusal(() => reopened.get(created.id, "bob"))).status).toBe(404);
    expect(reopened.list({}).data).toEqual([]);
    await reopened.stop();
    files.close();
  });

  test("responses: get and delete see only the owner's; owners survive a reopen", async () => {
    const dir = join(tempDir(), "responses");
    const store = ResponseStore.open(dir);
    const record = (owner?: string): StoredResponse => {
      const id = newResponseId();
      return {
        id,
        model: "m",
        created_at: 1,
        previous: null,
        response: { id },
        input: [],
        head: "h",
        warmable: true,
        tokensBase: null,
        ...(owner ? { owner } : {}),
      };
    };
    const alices = record("alice");
    const shared = record();
    await store.save(alices, [1, 2]);
    await store.save(shared, [3]);
    for (const s of [store, ResponseStore.open(dir)]) {
      expect(s.get(alices.id, "alice")?.id).toBe(alices.id);
      expect(s.get(alices.id, "bob")).toBeUndefined();
      expect(s.get(alices.id)).toBeUndefined();
      expect(s.get(shared.id)?.id).toBe(shared.id);
      expect(s.get(shared.id, "alice")).toBeUndefined();
    }
    const reopened = ResponseStore.open(dir);
    expect(await reopened.delete(alices.id, "bob")).toBe(false);
    expect(await reopened.delete(alices.id)).toBe(false);
    expect(reopened.get(alices.id, "alice")).toBeDefined();
    expect(await reopened.delete(alices.id, "alice")).toBe(true);
    expect(reopened.get(alices.id, "alice")).toBeUndefined();
  });
});

const ALICE = "sk-alice-0123456789";
const BOB = "sk-bob-9876543210";
const GLOBAL = "sk-global-5555555555";
const NEVER_FILE = "file-0123456789abcdef01234567";
const NEVER_BATCH = "batch_0123456789abcdef01234567";
const NEVER_RESPONSE = "resp_0123456789abcdef0123456789abcdef";

describe("over HTTP, under --key-policy and --api-key", () => {
  const root = tempDir();
  const sessions = join(root, "sessions");
  const policy = join(root, "policy.json");
  writeFileSync(
    policy,
    JSON.stringify({
      keys: [
        { name: "alice", key: ALICE },
        { name: "bob", key: BOB },
      ],
    }),
  );
  const keyed = ["--key-policy", policy, "--api-key", GLOBAL];
  let s: TestServer | undefined;
  afterAll(async () => {
    await s?.server.close();
  });

  async function start(args: string[], apiKey?: string): Promise<TestServer> {
    await s?.server.close();
    s = await startTestServer({
      fixture: "tiny-chat",
      sessions,
      extraArgs: args,
      ...(apiKey === undefined ? {} : { apiKey }),
    });
    return s;
  }

  /** A request as the key `key` (none: no header), its status and JSON body. */
  async function call(
    key: string | undefined,
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; json: any }> {
    const headers: Record<string, string> = key === undefined ? {} : { authorization: `Bearer ${key}` };
    let payload: FormData | string | undefined;
    if (body instanceof FormData) payload = body;
    else if (body !== undefined) {
      headers["content-type"] = "application/json";
      payload = JSON.stringify(body);
    }
    const res = await fetch(`${s!.url}${path}`, {
      method,
      headers,
      ...(payload === undefined ? {} : { body: payload }),
    });
    const text = await res.text();
    let json: any = text;
    try {
      json = JSON.parse(text);
    } catch {
      // raw content
    }
    return { status: res.status, json };
  }

  async function upload(key: string | undefined, text: string, purpose: string): Promise<string> {
    const form = new FormData();
    form.append("purpose", purpose);
    form.append("file", new Blob([text]), "input.jsonl");
    const r = await call(key, "POST", "/v1/files", form);
    expect(r.status).toBe(200);
    expect(JSON.stringify(r.json)).not.toContain("owner");
    return r.json.id;
  }

  /** `path` with `id` answers `key` exactly as the same path with `never` (an id never created). */
  async function unknownTo(
    key: string | undefined,
    method: string,
    path: (id: string) => string,
    id: string,
    never: string,
    body?: (id: string) => unknown,
  ) {
    const seen = await call(key, method, path(id), body?.(id));
    const none = await call(key, method, path(never), body?.(never));
    expect(seen.status).toBeGreaterThanOrEqual(400);
    expect({ status: seen.status, body: JSON.stringify(seen.json).replaceAll(id, "<id>") }).toEqual({
      status: none.status,
      body: JSON.stringify(none.json).replaceAll(never, "<id>"),
    });
    return seen;
  }

  const chatLine = JSON.stringify({
    custom_id: "one",
    method: "POST",
    url: CHAT,
    body: { model: "any-model", messages: [{ role: "user", content: "hi" }], max_tokens: 8 },
  });
  const made: {
    input: string;
    data: string;
    batch: string;
    output: string;
    response: string;
    next: string;
    globalFile: string;
    globalResponse: string;
  } = {} as never;

  /** What bob (and the global key, and no key on a keyless server) must not see of alice's. */
  async function hiddenFrom(key: string | undefined) {
    for (const id of [made.input, made.data, made.output]) {
      expect((await unknownTo(key, "GET", (x) => `/v1/files/${x}`, id, NEVER_FILE)).status).toBe(404);
      expect((await unknownTo(key, "GET", (x) => `/v1/files/${x}/content`, id, NEVER_FILE)).status).toBe(404);
      expect((await unknownTo(key, "DELETE", (x) => `/v1/files/${x}`, id, NEVER_FILE)).status).toBe(404);
      expect((await unknownTo(key, "GET", (x) => `/v1/files?after=${x}`, id, NEVER_FILE)).status).toBe(400);
    }
    const files = await call(key, "GET", "/v1/files");
    for (const id of [made.input, made.data, made.output])
      expect(files.json.data.map((f: { id: string }) => f.id)).not.toContain(id);
    expect((await unknownTo(key, "GET", (x) => `/v1/batches/${x}`, made.batch, NEVER_BATCH)).status).toBe(404);
    expect((await unknownTo(key, "POST", (x) => `/v1/batches/${x}/cancel`, made.batch, NEVER_BATCH)).status).toBe(404);
    expect((await unknownTo(key, "GET", (x) => `/v1/batches?after=${x}`, made.batch, NEVER_BATCH)).status).toBe(404);
    expect((await call(key, "GET", "/v1/batches")).json.data.map((b: { id: string }) => b.id)).not.toContain(
      made.batch,
    );
    const batchBody = (x: string) => ({ input_file_id: x, endpoint: CHAT, completion_window: "24h" });
    expect((await unknownTo(key, "POST", () => "/v1/batches", made.input, NEVER_FILE, batchBody)).status).toBe(404);
    for (const id of [made.response, made.next]) {
      expect((await unknownTo(key, "GET", (x) => `/v1/responses/${x}`, id, NEVER_RESPONSE)).status).toBe(404);
      expect((await unknownTo(key, "GET", (x) => `/v1/responses/${x}/input_items`, id, NEVER_RESPONSE)).status).toBe(
        404,
      );
      expect((await unknownTo(key, "DELETE", (x) => `/v1/responses/${x}`, id, NEVER_RESPONSE)).status).toBe(404);
      const continued = await unknownTo(
        key,
        "POST",
        () => "/v1/responses",
        id,
        NEVER_RESPONSE,
        (x) => ({ model: s!.model, input: "again", previous_response_id: x, max_output_tokens: 8 }),
      );
      expect(continued.status).toBe(400);
      expect(continued.json.error.code).toBe("previous_response_not_found");
    }
  }

  /** What alice still sees of her own. */
  async function visibleToAlice() {
    for (const id of [made.input, made.data, made.output])
      expect((await call(ALICE, "GET", `/v1/files/${id}`)).status).toBe(200);
    expect((await call(ALICE, "GET", `/v1/files/${made.data}/content`)).json).toBe("alice's data");
    const listed = (await call(ALICE, "GET", "/v1/files")).json.data.map((f: { id: string }) => f.id);
    expect(listed.sort()).toEqual([made.input, made.data, made.output].sort());
    expect((await call(ALICE, "GET", `/v1/batches/${made.batch}`)).json.status).toBe("completed");
    expect((await call(ALICE, "GET", "/v1/batches")).json.data.map((b: { id: string }) => b.id)).toEqual([made.batch]);
    for (const id of [made.response, made.next]) {
      const r = await call(ALICE, "GET", `/v1/responses/${id}`);
      expect(r.status).toBe(200);
      expect(JSON.stringify(r.json)).not.toContain("owner");
      expect((await call(ALICE, "GET", `/v1/responses/${id}/input_items`)).status).toBe(200);
    }
  }

  test("alice's files, batch and responses are hers alone; the global key's are shared with keyless callers", async () => {
    await start(keyed, GLOBAL);
    made.input = await upload(ALICE, `${chatLine}\n`, "batch");
    made.data = await upload(ALICE, "alice's data", "user_data");
    const created = await call(ALICE, "POST", "/v1/batches", {
      input_file_id: made.input,
      endpoint: CHAT,
      completion_window: "24h",
    });
    expect(created.status).toBe(200);
    expect(JSON.stringify(created.json)).not.toContain("owner");
    made.batch = created.json.id;
    await until(async () => (await call(ALICE, "GET", `/v1/batches/${made.batch}`)).json.status === "completed");
    made.output = (await call(ALICE, "GET", `/v1/batches/${made.batch}`)).json.output_file_id;
    expect(made.output).toMatch(/^file-/);

    const first = await call(ALICE, "POST", "/v1/responses", {
      model: s!.model,
      input: "hello",
      max_output_tokens: 16,
    });
    expect(first.status).toBe(200);
    made.response = first.json.id;
    const next = await call(ALICE, "POST", "/v1/responses", {
      model: s!.model,
      input: "and again",
      previous_response_id: made.response,
      max_output_tokens: 16,
    });
    expect(next.status).toBe(200);
    made.next = next.json.id;

    made.globalFile = await upload(GLOBAL, "shared data", "user_data");
    const g = await call(GLOBAL, "POST", "/v1/responses", { model: s!.model, input: "hello", max_output_tokens: 16 });
    expect(g.status).toBe(200);
    made.globalResponse = g.json.id;

    await hiddenFrom(BOB);
    await hiddenFrom(GLOBAL);
    await visibleToAlice();

    // The global key's objects are unknown to the policy keys, and its own list shows only them.
    expect((await unknownTo(ALICE, "GET", (x) => `/v1/files/${x}`, made.globalFile, NEVER_FILE)).status).toBe(404);
    expect((await unknownTo(BOB, "GET", (x) => `/v1/responses/${x}`, made.globalResponse, NEVER_RESPONSE)).status).toBe(
      404,
    );
    expect((await call(GLOBAL, "GET", "/v1/files")).json.data.map((f: { id: string }) => f.id)).toEqual([
      made.globalFile,
    ]);
    expect((await call(GLOBAL, "GET", `/v1/responses/${made.globalResponse}`)).status).toBe(200);
    expect((await call(BOB, "GET", "/v1/files")).json.data).toEqual([]);
    expect((await call(BOB, "GET", "/v1/batches")).json.data).toEqual([]);
  });

  test("after a restart on the same folder the scopes hold", async () => {
    await start(keyed, GLOBAL);
    await hiddenFrom(BOB);
    await hiddenFrom(GLOBAL);
    await visibleToAlice();
    expect((await call(GLOBAL, "GET", "/v1/files")).json.data.map((f: { id: string }) => f.id)).toEqual([
      made.globalFile,
    ]);
    // Alice may still continue her conversation.
    const more = await call(ALICE, "POST", "/v1/responses", {
      model: s!.model,
      input: "once more",
      previous_response_id: made.next,
      max_output_tokens: 16,
    });
    expect(more.status).toBe(200);
  });

  test("a server without keys on the same folder shares only what the global key made", async () => {
    await start([]);
    await hiddenFrom(undefined);
    expect((await call(undefined, "GET", "/v1/files")).json.data.map((f: { id: string }) => f.id)).toEqual([
      made.globalFile,
    ]);
    expect((await call(undefined, "GET", `/v1/responses/${made.globalResponse}`)).status).toBe(200);
    expect((await call(undefined, "DELETE", `/v1/files/${made.globalFile}`)).status).toBe(200);
  });
});
