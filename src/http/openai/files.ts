// The Files API (docs/api/files.md): POST and GET /v1/files, GET and DELETE
// /v1/files/{id}, GET /v1/files/{id}/content, over the store in src/files/.
//
// Uploads are multipart/form-data, parsed as they arrive by @fastify/busboy
// (request.formData() would buffer the whole body): the `file` part streams
// into the store's tmp/ folder while it is read, so a 512 MiB upload never
// sits in memory. Clients send `file` before or after `purpose` (the openai
// SDK sends it first), so the part is staged first and becomes a file only
// once the whole form has been read and checked.
//
// Every file belongs to the scope of the key that uploaded it
// (docs/api/security.md#scoping): each route passes the caller's scope to the
// store, and another scope's file answers as an unknown id.
import Busboy, { type BusboyInstance } from "@fastify/busboy";
import type { Elysia } from "elysia";
import { open } from "node:fs/promises";
import type { Readable } from "node:stream";
import {
  FilesCursorError,
  FilesQuotaError,
  type FileRecord,
  type FileStore,
  type StagedUpload,
} from "../../files/store.ts";
import { scopeOf } from "../auth/principal.ts";
import { bodyReader, readBodyStep } from "../body.ts";
import { RequestError, invalidRequest } from "../../daemon/request-error.ts";
import type { ServerContext } from "../server-context.ts";

/** The purposes OpenAI accepts on upload. */
export const FILE_PURPOSES: readonly string[] = ["assistants", "batch", "fine-tune", "vision", "user_data", "evals"];

/**
 * One upload's size cap, OpenAI's (512 MB per file): without --files-max-bytes one request still cannot fill the disk.
 */
export const MAX_UPLOAD_BYTES = 512 * 1024 * 1024;

/** The whole multipart request may carry this much beside the file (boundaries, headers, the small fields). */
const FORM_OVERHEAD_BYTES = 1024 * 1024;

/** expires_after[seconds] bounds, as OpenAI's. */
const EXPIRES_AFTER_MIN = 3600;
const EXPIRES_AFTER_MAX = 2_592_000;

const DEFAULT_LIST_LIMIT = 10_000;

const noSuchFile = (id: string) => new RequestError(404, `No such File object: ${id}`, null, "id");
const missing = (field: string) => invalidRequest(`Missing required parameter: '${field}'.`, field);
const uploadTooLarge = () =>
  new RequestError(
    413,
    `the file is larger than the limit of ${MAX_UPLOAD_BYTES} bytes (512 MiB) per upload`,
    "payload_too_large",
    "file",
  );

function storeRefusal(err: unknown): unknown {
  if (err instanceof FilesQuotaError)
    return new RequestError(413, `${err.message} (--files-max-bytes)`, "files_quota_exceeded", "file");
  return err;
}

function checkPurpose(value: string): string {
  if (FILE_PURPOSES.includes(value)) return value;
  const list = FILE_PURPOSES.map((p) => `'${p}'`).join(", ");
  throw invalidRequest(`Invalid value for 'purpose': '${value}'. Supported values are: ${list}.`, "purpose");
}

/** One multipart upload being read: its fields, its staged file, and the first refusal, which stops the reading. */
class Upload {
  private readonly form: BusboyInstance;
  private purpose: string | undefined;
  private expires: { anchor?: string; seconds?: string } = {};
  private filename = "";
  private part: Readable | undefined;
  private staging: Promise<StagedUpload> | undefined;
  private failure: { err: unknown } | undefined;
  private readonly failed: Promise<void>;
  private wake!: () => void;

  constructor(
    private readonly store: FileStore,
    contentType: string,
    private readonly owner: string | undefined,
  ) {
    this.failed = new Promise((resolve) => (this.wake = resolve));
    this.form = new Busboy({
      headers: { "content-type": contentType },
      // A part over fileSize ends truncated and emits 'limit'; the small fields are held to a few KiB.
      limits: { fileSize: MAX_UPLOAD_BYTES, fieldSize: 64 * 1024, fields: 16, parts: 32, headerPairs: 64 },
    });
    this.form.on("file", (field: string, part: Readable, filename: string) => this.onFile(field, part, filename));
    this.form.on("field", (field: string, value: string, _nameCut: boolean, valueCut: boolean) =>
      this.onField(field, value, valueCut),
    );
    for (const event of ["partsLimit", "fieldsLimit", "filesLimit"]) {
      this.form.on(event, () =>
        this.fail(invalidRequest("the form has too many parts: send 'file' and 'purpose'", "file")),
      );
    }
    this.form.on("error", (err: unknown) =>
      this.fail(invalidRequest(`the multipart body is malformed: ${(err as Error).message}`, "file")),
    );
  }

  private fail(err: unknown): void {
    if (this.failure) return;
    this.failure = { err };
    // The part's reader (the store) stops and removes what it wrote.
    this.part?.destroy(err instanceof Error ? err : new Error(String(err)));
    this.wake();
  }

  private onFile(field: string, part: Readable, filename: string): void {
    if (field !== "file" || this.failure) {
      part.resume();
      return;
    }
    if (this.part) {
      part.resume();
      return this.fail(invalidRequest("only one 'file' may be sent per upload", "file"));
    }
    this.part = part;
    // A part busboy takes as a file without a name (typed application/octet-stream) gets the one the Python SDK gives
    // nameless bytes.
    this.filename = filename || "upload";
    // fail() may destroy the part after the store has read it to its end: that error has no reader left.
    part.on("error", () => {});
    part.once("limit", () => this.fail(uploadTooLarge()));
    this.staging = this.store.stage(part as AsyncIterable<Uint8Array>);
    this.staging.catch((err) => this.fail(storeRefusal(err)));
  }

  private onField(field: string, value: string, cut: boolean): void {
    if (field === "file")
      return this.fail(
        invalidRequest("'file' must be a file part (a part with a filename), not a plain field", "file"),
      );
    if (cut) return this.fail(invalidRequest(`the field '${field}' is too long`, field));
    if (field === "purpose") {
      try {
        this.purpose = checkPurpose(value);
      } catch (err) {
        this.fail(err);
      }
    } else if (field === "expires_after[anchor]") this.expires.anchor = value;
    else if (field === "expires_after[seconds]") this.expires.seconds = value;
    // Other fields are ignored, as OpenAI ignores fields it does not know.
  }

  /** expires_after as seconds (undefined when not sent). */
  private expiresAfterSec(): number | undefined {
    const { anchor, seconds } = this.expires;
    if (anchor === undefined && seconds === undefined) return undefined;
    if (anchor !== "created_at")
      throw invalidRequest(`Invalid value for 'expires_after.anchor': expected 'created_at'.`, "expires_after.anchor");
    const n = Number(seconds);
    if (
      seconds === undefined ||
      seconds.trim() === "" ||
      !Number.isInteger(n) ||
      n < EXPIRES_AFTER_MIN ||
      n > EXPIRES_AFTER_MAX
    ) {
      throw invalidRequest(
        `Invalid value for 'expires_after.seconds': expected a whole number between ${EXPIRES_AFTER_MIN} and ${EXPIRES_AFTER_MAX}.`,
        "expires_after.seconds",
      );
    }
    return n;
  }

  /** Feeds the body to the parser, at the pace the store writes it, until the end or the first refusal. */
  private async pump(body: ReadableStream<Uint8Array>): Promise<void> {
    const reader = bodyReader(body);
    let total = 0;
    while (!this.failure) {
      let step: Awaited<ReturnType<typeof readBodyStep>>;
      try {
        // The JSON routes' idle deadline: an upload that stops sending is a 408, not a socket held for ever.
        step = await readBodyStep(reader);
      } catch (err) {
        this.fail(err);
        break;
      }
      if (step.done) {
        const finished = new Promise<void>((resolve) => this.form.once("finish", () => resolve()));
        this.form.end();
        await Promise.race([finished, this.failed]);
        return;
      }
      total += step.value.byteLength;
      if (total > MAX_UPLOAD_BYTES + FORM_OVERHEAD_BYTES) {
        this.fail(uploadTooLarge());
        break;
      }
      if (!this.form.write(step.value))
        await Promise.race([new Promise((resolve) => this.form.once("drain", resolve)), this.failed]);
    }
    // Refused: the rest of the body is not read (the listener drains it after the reply).
    reader.cancel().catch(() => {});
  }

  async run(body: ReadableStream<Uint8Array>): Promise<FileRecord> {
    await this.pump(body);
    const staged = await this.staging?.catch(() => undefined);
    try {
      if (this.failure) throw this.failure.err;
      if (!staged) throw missing("file");
      if (this.purpose === undefined) throw missing("purpose");
      const expiresAfterSec = this.expiresAfterSec();
      return await this.store.commit(staged, {
        filename: this.filename,
        purpose: this.purpose,
        ...(expiresAfterSec === undefined ? {} : { expiresAfterSec }),
        ...(this.owner === undefined ? {} : { owner: this.owner }),
      });
    } catch (err) {
      if (staged) await this.store.discard(staged);
      throw err;
    }
  }
}

async function uploadFile(store: FileStore, request: Request): Promise<FileRecord> {
  const contentType = request.headers.get("content-type") ?? "";
  const essence = contentType.split(";", 1)[0]!.trim().toLowerCase();
  if (essence !== "multipart/form-data" || !/;\s*boundary=/i.test(contentType)) {
    throw invalidRequest(
      `the upload must be multipart/form-data with the fields 'file' and 'purpose', not '${essence || "no content type"}'`,
      "file",
    );
  }
  if (Number(request.headers.get("content-length") ?? NaN) > MAX_UPLOAD_BYTES + FORM_OVERHEAD_BYTES)
    throw uploadTooLarge();
  if (!request.body) throw missing("file");
  return new Upload(store, contentType, scopeOf(request)).run(request.body);
}

function listFiles(store: FileStore, request: Request) {
  const query = new URL(request.url).searchParams;
  const purpose = query.get("purpose") ?? undefined;
  const after = query.get("after") ?? undefined;
  const order = query.get("order") ?? "desc";
  if (order !== "asc" && order !== "desc")
    throw invalidRequest(`Invalid value for 'order': '${order}'. Supported values are: 'asc' and 'desc'.`, "order");
  const rawLimit = query.get("limit");
  const limit = rawLimit === null ? DEFAULT_LIST_LIMIT : Number(rawLimit);
  if (
    rawLimit !== null &&
    (rawLimit.trim() === "" || !Number.isInteger(limit) || limit < 1 || limit > DEFAULT_LIST_LIMIT)
  ) {
    throw invalidRequest(
      `Invalid value for 'limit': expected a whole number between 1 and ${DEFAULT_LIST_LIMIT}, got '${rawLimit}'.`,
      "limit",
    );
  }
  try {
    return { object: "list", ...store.list({ purpose, after, order, limit, owner: scopeOf(request) }) };
  } catch (err) {
    if (err instanceof FilesCursorError) throw invalidRequest(err.message, "after");
    throw err;
  }
}

function fileOr404(store: FileStore, id: string, owner: string | undefined): FileRecord {
  const record = store.get(id, owner);
  if (!record) throw noSuchFile(id);
  return record;
}

/** A header-safe Content-Disposition naming the file (RFC 6266: an ASCII fallback and the UTF-8 name). */
function attachment(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

/** The bytes, streamed from a descriptor opened first: a delete or sweep after that cannot cut the reply short. */
async function fileContent(store: FileStore, id: string, owner: string | undefined): Promise<Response> {
  const record = fileOr404(store, id, owner);
  const fh = await open(store.contentPath(id), "r").catch((err: NodeJS.ErrnoException) => {
    throw err.code === "ENOENT" ? noSuchFile(id) : err;
  });
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    fh.close().catch(() => {});
  };
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const buffer = Buffer.allocUnsafe(256 * 1024);
        const { bytesRead } = await fh.read(buffer, 0, buffer.byteLength, null);
        if (bytesRead === 0) {
          close();
          controller.close();
        } else controller.enqueue(buffer.subarray(0, bytesRead));
      } catch (err) {
        close();
        controller.error(err);
      }
    },
    cancel: close,
  });
  return new Response(body, {
    headers: {
      "content-type": "application/octet-stream",
      "content-length": String(record.bytes),
      "content-disposition": attachment(record.filename),
    },
  });
}

async function deleteFile(
  store: FileStore,
  id: string,
  owner: string | undefined,
): Promise<{ id: string; object: "file"; deleted: true }> {
  if (!(await store.delete(id, owner))) throw noSuchFile(id);
  return { id, object: "file", deleted: true };
}

/** Adds the Files routes to the OpenAI family's app. */
export function mountFiles(app: Elysia, ctx: ServerContext): void {
  app
    .post("/v1/files", ({ request }) => uploadFile(ctx.files, request), { parse: "none" })
    .get("/v1/files", ({ request }) => listFiles(ctx.files, request))
    .get("/v1/files/:id", ({ params, request }) => fileOr404(ctx.files, params.id, scopeOf(request)))
    .delete("/v1/files/:id", ({ params, request }) => deleteFile(ctx.files, params.id, scopeOf(request)))
    .get("/v1/files/:id/content", ({ params, request }) => fileContent(ctx.files, params.id, scopeOf(request)));
}
