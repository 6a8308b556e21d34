// The Files API (docs/api/files.md) through the official openai client:
// upload, list with cursors, retrieve, content, delete, the quota, bad
// input, records across a restart, and the expiry sweep.
import { afterAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toFile } from "openai";
import { parseServeOptions, UsageError, type ServeOptions } from "../../../src/cli/serve-options.ts";
import { apiError, envelope, RawConnection, startTestServer, useServer, type TestServer } from "../support.ts";

const jsonl = '{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}\n';

/** POSTs a multipart form built by fetch's FormData (fields in the order given). */
async function upload(s: TestServer, fields: [string, string | File][]): Promise<{ status: number; json: any }> {
  const form = new FormData();
  for (const [name, value] of fields) form.append(name, value);
  const res = await fetch(`${s.url}/v1/files`, { method: "POST", body: form });
  return { status: res.status, json: await res.json() };
}

const tmpFiles = (sessions: string) => readdirSync(join(sessions, "files", "tmp"));
/** The sessions folder useServer made (startTestServer returns it with the server). */
const sessionsOf = (t: TestServer) => (t as TestServer & { sessions: string }).sessions;

describe("files", () => {
  const s = useServer();

  test("upload, retrieve, content, list and delete with the openai client", async () => {
    const created = await s.client.files.create({
      file: await toFile(Buffer.from(jsonl), "input.jsonl"),
      purpose: "batch",
    });
    expect(created).toMatchObject({
      object: "file",
      bytes: Buffer.byteLength(jsonl),
      filename: "input.jsonl",
      purpose: "batch",
      status: "processed",
      expires_at: null,
    });
    expect(created.id).toMatch(/^file-[0-9a-f]{24}$/);
    expect(await s.client.files.retrieve(created.id)).toEqual(created);

    const content = await s.client.files.content(created.id);
    expect(content.headers.get("content-type")).toBe("application/octet-stream");
    expect(content.headers.get("content-disposition")).toContain('filename="input.jsonl"');
    expect(await content.text()).toBe(jsonl);

    const listed = await s.client.files.list();
    expect(listed.data.map((f) => f.id)).toContain(created.id);
    expect(await s.client.files.delete(created.id)).toEqual({ id: created.id, object: "file", deleted: true });
    expect((await apiError(s.client.files.retrieve(created.id))).status).toBe(404);
  });

  test("bytes come back exactly, over a streamed multipart body", async () => {
    const bytes = randomBytes(6 * 1024 * 1024 + 123);
    // toStreamingFile: the client streams the multipart body instead of building it whole.
    const created = await s.client.files.create({ file: await toFile(bytes, "blob.bin"), purpose: "user_data" });
    expect(created.bytes).toBe(bytes.byteLength);
    const back = Buffer.from(await (await s.client.files.content(created.id)).arrayBuffer());
    expect(createHash("sha256").update(back).digest("hex")).toBe(createHash("sha256").update(bytes).digest("hex"));
    const res = await fetch(`${s.url}/v1/files/${created.id}/content`);
    expect(res.headers.get("content-length")).toBe(String(bytes.byteLength));
    await res.arrayBuffer();
  });

  test("purpose may come before the file; names outside ASCII survive", async () => {
    const r = await upload(s, [
      ["purpose", "user_data"],
      ["file", new File(["héllo"], "naïve ✓.txt")],
    ]);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ filename: "naïve ✓.txt", purpose: "user_data", bytes: 6 });
    const res = await fetch(`${s.url}/v1/files/${r.json.id}/content`);
    expect(res.headers.get("content-disposition")).toBe(
      `attachment; filename="na_ve _.txt"; filename*=UTF-8''${encodeURIComponent("naïve ✓.txt")}`,
    );
    expect(await res.text()).toBe("héllo");
    // A nameless part typed as bytes is a file too, named as the Python SDK names nameless bytes.
    const nameless = await fetch(`${s.url}/v1/files`, {
      method: "POST",
      headers: { "content-type": "multipart/form-data; boundary=XX" },
      body: '--XX\r\ncontent-disposition: form-data; name="file"\r\ncontent-type: application/octet-stream\r\n\r\nabc\r\n--XX\r\ncontent-disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--XX--\r\n',
    });
    expect(await nameless.json()).toMatchObject({ filename: "upload", bytes: 3, purpose: "batch" });
  });

  test("expires_after sets expires_at, within OpenAI's bounds", async () => {
    const created = await s.client.files.create({
      file: await toFile(Buffer.from("x"), "x.txt"),
      purpose: "user_data",
      expires_after: { anchor: "created_at", seconds: 3600 },
    });
    expect(created.expires_at! - created.created_at).toBeGreaterThanOrEqual(3600);
    expect(created.expires_at! - created.created_at).toBeLessThanOrEqual(3601);
    const bad = await apiError(
      s.client.files.create({
        file: await toFile(Buffer.from("x"), "x.txt"),
        purpose: "user_data",
        expires_after: { anchor: "created_at", seconds: 5 },
      }),
    );
    expect(bad.status).toBe(400);
    expect(bad.param).toBe("expires_after.seconds");
  });

  test("list pages with limit and after, newest first unless asc; filters by purpose", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(
        (await s.client.files.create({ file: await toFile(Buffer.from(`${i}`), `p${i}.jsonl`), purpose: "evals" })).id,
      );
    }
    const newest = [...ids].reverse();
    const page = await s.client.files.list({ purpose: "evals", limit: 2 });
    expect(page.data.map((f) => f.id)).toEqual(newest.slice(0, 2));
    expect(page.has_more).toBe(true);
    // The client's own paging follows `after` through every page.
    const all: string[] = [];
    for await (const f of s.client.files.list({ purpose: "evals", limit: 2 })) all.push(f.id);
    expect(all).toEqual(newest);
    const asc = await s.client.files.list({ purpose: "evals", order: "asc", after: ids[1] });
    expect(asc.data.map((f) => f.id)).toEqual(ids.slice(2));
    const raw = await (await fetch(`${s.url}/v1/files?purpose=evals&limit=1`)).json();
    expect(raw).toEqual({
      object: "list",
      data: [expect.objectContaining({ id: newest[0] })],
      first_id: newest[0],
      last_id: newest[0],
      has_more: true,
    });
  });

  test("bad input: 400 naming the field, 404 for an unknown id", async () => {
    const noFile = await upload(s, [["purpose", "batch"]]);
    expect(noFile.status).toBe(400);
    expect(envelope(noFile.json)).toMatchObject({ type: "invalid_request_error", param: "file" });
    const noPurpose = await upload(s, [["file", new File(["x"], "x.jsonl")]]);
    expect(noPurpose.status).toBe(400);
    expect(envelope(noPurpose.json).param).toBe("purpose");
    const plainField = await upload(s, [
      ["purpose", "batch"],
      ["file", "not a file part"],
    ]);
    expect(plainField.status).toBe(400);
    expect(envelope(plainField.json).param).toBe("file");
    const twoFiles = await upload(s, [
      ["purpose", "batch"],
      ["file", new File(["a"], "a")],
      ["file", new File(["b"], "b")],
    ]);
    expect(twoFiles.status).toBe(400);

    const badPurpose = await apiError(
      s.client.files.create({ file: await toFile(Buffer.from("x"), "x.jsonl"), purpose: "batch_output" as "batch" }),
    );
    expect(badPurpose.status).toBe(400);
    expect(badPurpose.param).toBe("purpose");
    expect(badPurpose.message).toContain("'batch_output'");

    const json = await fetch(`${s.url}/v1/files`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"purpose":"batch"}',
    });
    expect(json.status).toBe(400);
    expect(envelope(await json.json())).toMatchObject({ param: "file", type: "invalid_request_error" });
    const torn = await fetch(`${s.url}/v1/files`, {
      method: "POST",
      headers: { "content-type": "multipart/form-data; boundary=XX" },
      body: '--XX\r\ncontent-disposition: form-data; name="file"; filename="a"\r\n\r\nno closing boundary',
    });
    expect(torn.status).toBe(400);

    const unknown = "file-000000000000000000000000";
    for (const [method, path] of [
      ["GET", unknown],
      ["GET", `${unknown}/content`],
      ["DELETE", unknown],
    ]) {
      const res = await fetch(`${s.url}/v1/files/${path}`, { method });
      expect(res.status).toBe(404);
      expect(envelope(await res.json())).toMatchObject({ message: `No such File object: ${unknown}`, param: "id" });
    }
    expect((await apiError(s.client.files.content(unknown))).status).toBe(404);
    expect((await apiError(s.client.files.delete(unknown))).status).toBe(404);

    for (const query of ["limit=0", "limit=10001", "limit=x", "order=sideways", `after=${unknown}`]) {
      const res = await fetch(`${s.url}/v1/files?${query}`);
      expect(res.status).toBe(400);
      expect(envelope(await res.json()).param).toBe(query.split("=")[0]!);
    }
    const put = await fetch(`${s.url}/v1/files/${unknown}`, { method: "PUT" });
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("DELETE, GET, HEAD");
    // Every refusal left nothing behind.
    expect(tmpFiles(sessionsOf(s))).toEqual([]);
  });

  test("a client that goes away midway leaves no file and nothing in tmp/", async () => {
    const sessions = sessionsOf(s);
    const before = (await s.client.files.list()).data.length;
    const conn = await RawConnection.open(s.port);
    const head =
      '--XX\r\ncontent-disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--XX\r\ncontent-disposition: form-data; name="file"; filename="cut.jsonl"\r\n\r\n';
    await conn.write(
      "POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: multipart/form-data; boundary=XX\r\n" +
        `content-length: ${10 * 1024 * 1024}\r\n\r\n` +
        head,
    );
    await conn.write(Buffer.alloc(256 * 1024, 0x61));
    // Wait until the part is being written, then cut the connection.
    const guard = Date.now() + 30_000;
    while (tmpFiles(sessions).length === 0 && Date.now() < guard) await Bun.sleep(10);
    expect(tmpFiles(sessions).length).toBe(1);
    conn.destroy();
    while (tmpFiles(sessions).length > 0 && Date.now() < guard) await Bun.sleep(10);
    expect(tmpFiles(sessions)).toEqual([]);
    expect((await s.client.files.list()).data.length).toBe(before);
  });

  test("an upload over 512 MiB is refused from its declared length", async () => {
    const conn = await RawConnection.open(s.port);
    await conn.write(
      "POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: multipart/form-data; boundary=XX\r\n" +
        `content-length: ${600 * 1024 * 1024}\r\n\r\n`,
    );
    const res = await conn.waitResponse(60_000);
    conn.destroy();
    expect(res?.status).toBe(413);
    expect(envelope(JSON.parse(res!.body))).toMatchObject({ code: "payload_too_large", param: "file" });
  });
});

describe("files with --files-max-bytes", () => {
  const s = useServer({ extraArgs: ["--files-max-bytes", "100"] });

  test("an upload past the quota is 413 files_quota_exceeded and leaves nothing", async () => {
    const ok = await s.client.files.create({ file: await toFile(Buffer.alloc(60, 1), "a.bin"), purpose: "user_data" });
    const err = await apiError(
      s.client.files.create({ file: await toFile(Buffer.alloc(60, 2), "b.bin"), purpose: "user_data" }),
    );
    expect(err.status).toBe(413);
    expect(err.code).toBe("files_quota_exceeded");
    expect(err.type).toBe("invalid_request_error");
    const list = await s.client.files.list();
    expect(list.data.map((f) => f.id)).toEqual([ok.id]);
    const sessions = sessionsOf(s);
    expect(tmpFiles(sessions)).toEqual([]);
    // Deleting frees the space.
    await s.client.files.delete(ok.id);
    expect(
      (await s.client.files.create({ file: await toFile(Buffer.alloc(100, 3), "c.bin"), purpose: "user_data" })).bytes,
    ).toBe(100);
  });
});

describe("files across a restart and expiry", () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test("records and bytes survive a restart on the same sessions folder", async () => {
    const sessions = mkdtempSync(join(tmpdir(), "superfluid-files-restart-"));
    dirs.push(sessions);
    const first = await startTestServer({ sessions });
    let created;
    try {
      created = await first.client.files.create({
        file: await toFile(Buffer.from(jsonl), "keep.jsonl"),
        purpose: "batch",
      });
    } finally {
      await first.server.close();
    }
    const second = await startTestServer({ sessions });
    try {
      expect(await second.client.files.retrieve(created.id)).toEqual(created);
      expect(await (await second.client.files.content(created.id)).text()).toBe(jsonl);
      expect((await second.client.files.list()).data.map((f) => f.id)).toEqual([created.id]);
    } finally {
      await second.server.close();
    }
  });

  test("--files-expiry 1 --files-sweep 1: the file is gone, then removed from disk", async () => {
    const sessions = mkdtempSync(join(tmpdir(), "superfluid-files-expiry-"));
    dirs.push(sessions);
    const s = await startTestServer({ sessions, extraArgs: ["--files-expiry", "1", "--files-sweep", "1"] });
    try {
      const created = await s.client.files.create({
        file: await toFile(Buffer.from("soon gone"), "t.txt"),
        purpose: "user_data",
      });
      expect(created.expires_at).not.toBeNull();
      expect(created.expires_at! - created.created_at).toBeGreaterThanOrEqual(1);
      const data = join(sessions, "files", `${created.id}.data`);
      // Polled; the guard only stops a hang.
      const guard = Date.now() + 60_000;
      let status = 200;
      while (Date.now() < guard) {
        status = (await fetch(`${s.url}/v1/files/${created.id}`)).status;
        if (status === 404 && !existsSync(data)) break;
        await Bun.sleep(100);
      }
      expect(status).toBe(404);
      expect(existsSync(data)).toBe(false);
    } finally {
      await s.server.close();
    }
  });
});

describe("files flags", () => {
  test("--files-max-bytes, --files-expiry and --files-sweep parse, with their defaults", () => {
    const defaults = parseServeOptions([]) as ServeOptions;
    expect(defaults.filesMaxBytes).toBeUndefined();
    expect(defaults.filesExpirySec).toBeUndefined();
    expect(defaults.filesSweepSec).toBe(300);
    const set = parseServeOptions([
      "--files-max-bytes",
      "1000",
      "--files-expiry",
      "60",
      "--files-sweep",
      "5",
    ]) as ServeOptions;
    expect([set.filesMaxBytes, set.filesExpirySec, set.filesSweepSec]).toEqual([1000, 60, 5]);
    for (const bad of [
      ["--files-max-bytes", "-1"],
      ["--files-expiry", "0"],
      ["--files-sweep", "1.5"],
      ["--files-sweep", "0"],
    ]) {
      expect(() => parseServeOptions(bad)).toThrow(UsageError);
    }
  });
});
