// A Hugging Face Hub stand-in on loopback for the pull tests: nothing is
// downloaded from the internet. Two origins, as the real Hub has: the Hub
// (API routes and resolve) and a CDN the resolve route redirects LFS files to
// with a 302 and the X-Repo-Commit / X-Linked-Etag / X-Linked-Size headers.
// Both honour Range. Faults on demand: cut a transfer after N bytes, stall
// one, corrupt a blob's bytes, throttle the CDN's rate; every request is
// logged (origin, path, Authorization, Range) and CDN bytes counted.
import { createHash, randomBytes } from "node:crypto";
import {
  createServer,
  type IncomingMessage,
  request as httpRequest,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { HEADER_FIRST_BYTES } from "../../src/hub/header.ts";

export interface StandinFile {
  bytes: Uint8Array;
  /** Stored in LFS (default: .gguf files are, others are not). */
  lfs?: boolean;
}

interface Repo {
  commit: string;
  files: Map<string, { bytes: Uint8Array; lfs: boolean; sha256: string; oid: string }>;
  gated: boolean;
}

export interface LoggedRequest {
  origin: "hub" | "cdn";
  method: string;
  path: string;
  authorization?: string;
  range?: string;
}

export interface Faults {
  /** The next `times` CDN responses are cut (socket destroyed) after `afterBytes` bytes of body. */
  cut?: { afterBytes: number; times: number };
  /** Every CDN response stops sending after `afterBytes` bytes and keeps the connection open. */
  stall?: { afterBytes: number };
  /** Blobs (by sha256) served with one byte flipped. */
  corrupt: Set<string>;
  /** CDN bytes per second per connection (0 = unthrottled). */
  rate: number;
  /**
   * Each CDN response waits (at most BARRIER_GUARD_MS) until this many are in flight at once: a download that uses
   * that many connections passes at once, one that does not is caught by cdnMaxActive.
   */
  barrier?: number;
  /**
   * While set, every CDN response of a download waits for it before its first byte (a download seen in progress).
   * A header read (a range from byte 0 within HEADER_FIRST_BYTES: a pull's fit check, src/hub/header.ts) is not
   * held: the download it comes before could never start.
   */
  hold?: Promise<void>;
}

const BARRIER_GUARD_MS = 30_000;

const gitOid = (bytes: Uint8Array) => createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

function listen(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

/** A ranged read of a file's first HEADER_FIRST_BYTES at most, as src/hub/header.ts makes first. */
function headerRead(range: string | undefined): boolean {
  const m = /^bytes=0-(\d+)$/.exec(range ?? "");
  return m !== null && Number(m[1]) < HEADER_FIRST_BYTES;
}

function parseRange(header: string | undefined, size: number): { start: number; end: number } | undefined {
  const m = /^bytes=(\d+)-(\d*)$/.exec(header ?? "");
  if (!m) return undefined;
  const start = Number(m[1]);
  const end = m[2] === "" ? size : Math.min(size, Number(m[2]) + 1);
  return { start, end };
}

export class HubStandin {
  hubUrl = "";
  cdnUrl = "";
  /** The token gated repos accept. */
  token = "hf_standin_token";
  /** Tree entries per page (the Link header pages the rest). */
  pageSize = 1000;
  readonly requests: LoggedRequest[] = [];
  readonly faults: Faults = { corrupt: new Set(), rate: 0 };
  /** Body bytes the CDN has written. */
  cdnBytes = 0;
  /** CDN responses in flight now, and the most at once. */
  cdnActive = 0;
  cdnMaxActive = 0;
  private readonly repos = new Map<string, Repo>();
  private readonly blobs = new Map<string, Uint8Array>();
  private hub?: Server;
  private cdn?: Server;
  private readonly open = new Set<ServerResponse>();

  async start(): Promise<this> {
    this.hub = createServer((req, res) => void this.onHub(req, res));
    this.cdn = createServer((req, res) => void this.onCdn(req, res));
    this.hubUrl = await listen(this.hub);
    this.cdnUrl = await listen(this.cdn);
    return this;
  }

  async stop(): Promise<void> {
    for (const res of this.open) res.destroy();
    await Promise.all(
      [this.hub, this.cdn].map(
        (s) =>
          new Promise<void>((resolve) => {
            if (!s) return resolve();
            s.closeAllConnections?.();
            s.close(() => resolve());
          }),
      ),
    );
  }

  addRepo(repo: string, files: Record<string, Uint8Array | StandinFile>, options: { gated?: boolean } = {}): string {
    const commit = randomBytes(20).toString("hex");
    const map: Repo["files"] = new Map();
    for (const [path, f] of Object.entries(files)) {
      const file = f instanceof Uint8Array ? { bytes: f } : f;
      const lfs = file.lfs ?? /\.gguf$/i.test(path);
      const entry = { bytes: file.bytes, lfs, sha256: sha256(file.bytes), oid: gitOid(file.bytes) };
      map.set(path, entry);
      if (lfs) this.blobs.set(entry.sha256, file.bytes);
    }
    this.repos.set(repo, { commit, files: map, gated: options.gated === true });
    return commit;
  }

  /** The sha256 of a file of a repo (its blob name in the cache). */
  sha(repo: string, path: string): string {
    return this.repos.get(repo)!.files.get(path)!.sha256;
  }

  commitOf(repo: string): string {
    return this.repos.get(repo)!.commit;
  }

  hubRequests(): LoggedRequest[] {
    return this.requests.filter((r) => r.origin === "hub");
  }

  cdnRequests(): LoggedRequest[] {
    return this.requests.filter((r) => r.origin === "cdn");
  }

  resetCounters(): void {
    this.requests.length = 0;
    this.cdnBytes = 0;
    this.cdnMaxActive = 0;
  }

  private log(origin: "hub" | "cdn", req: IncomingMessage): void {
    this.requests.push({
      origin,
      method: req.method ?? "GET",
      path: req.url ?? "",
      ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      ...(req.headers.range ? { range: req.headers.range } : {}),
    });
  }

  private json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  }

  private repoOr401(res: ServerResponse, name: string, auth: string | undefined): Repo | undefined {
    const repo = this.repos.get(name);
    if (!repo) {
      // As the Hub does: an unknown repo reads as "not found or private", 401 without a token.
      this.json(res, auth ? 404 : 401, { error: "Repository not found" }, { "x-error-code": "RepoNotFound" });
      return undefined;
    }
    return repo;
  }

  private async onHub(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.log("hub", req);
    const url = new URL(req.url ?? "/", this.hubUrl);
    const auth = req.headers.authorization;
    const api = /^\/api\/models\/([^/]+\/[^/]+)\/(refs|tree\/([0-9a-f]{40}))$/.exec(url.pathname);
    if (api) {
      const repo = this.repoOr401(res, api[1]!, auth);
      if (!repo) return;
      if (api[2] === "refs") {
        this.json(res, 200, {
          branches: [{ name: "main", ref: "refs/heads/main", targetCommit: repo.commit }],
          tags: [],
          converts: [],
        });
        return;
      }
      if (api[3] !== repo.commit)
        return this.json(res, 404, { error: "Invalid rev id" }, { "x-error-code": "RevisionNotFound" });
      const entries = [...repo.files.entries()].map(([path, f]) => ({
        type: "file",
        oid: f.oid,
        size: f.bytes.length,
        path,
        ...(f.lfs ? { lfs: { oid: f.sha256, size: f.bytes.length, pointerSize: 134 } } : {}),
      }));
      const cursor = Number(url.searchParams.get("cursor") ?? 0);
      const page = entries.slice(cursor, cursor + this.pageSize);
      const headers: Record<string, string> = {};
      if (cursor + this.pageSize < entries.length) {
        const next = new URL(url);
        next.searchParams.set("cursor", String(cursor + this.pageSize));
        headers.link = `<${next.href}>; rel="next"`;
      }
      return this.json(res, 200, page, headers);
    }
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([0-9a-f]{40})\/(.+)$/.exec(url.pathname);
    if (resolve) {
      const repo = this.repoOr401(res, resolve[1]!, auth);
      if (!repo) return;
      if (repo.gated && auth !== `Bearer ${this.token}`) {
        return this.json(
          res,
          auth ? 403 : 401,
          { error: `Access to model ${resolve[1]} is restricted. You must have access to it and be authenticated.` },
          { "x-error-code": "GatedRepo" },
        );
      }
      const file = repo.files.get(decodeURIComponent(resolve[3]!));
      if (!file || resolve[2] !== repo.commit)
        return this.json(res, 404, { error: "Entry not found" }, { "x-error-code": "EntryNotFound" });
      if (file.lfs) {
        res.writeHead(302, {
          location: `${this.cdnUrl}/blobs/${file.sha256}?signature=standin`,
          "x-repo-commit": repo.commit,
          "x-linked-etag": `"${file.sha256}"`,
          "x-linked-size": String(file.bytes.length),
          etag: `"${file.oid}"`,
        });
        res.end();
        return;
      }
      return this.send(req, res, file.bytes, false);
    }
    this.json(res, 404, { error: "not found" });
  }

  private async onCdn(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.log("cdn", req);
    const m = /^\/blobs\/([0-9a-f]{64})$/.exec(new URL(req.url ?? "/", this.cdnUrl).pathname);
    const blob = m ? this.blobs.get(m[1]!) : undefined;
    if (!blob) return this.json(res, 404, { error: "no such blob" });
    let bytes = blob;
    if (this.faults.corrupt.has(m![1]!)) {
      bytes = Uint8Array.from(blob);
      bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
    }
    this.cdnActive++;
    this.cdnMaxActive = Math.max(this.cdnMaxActive, this.cdnActive);
    try {
      if (this.faults.hold && !headerRead(req.headers.range)) await this.faults.hold;
      const barrier = this.faults.barrier;
      if (barrier !== undefined) {
        const until = Date.now() + BARRIER_GUARD_MS;
        while (this.cdnMaxActive < barrier && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
      }
      await this.send(req, res, bytes, true);
    } finally {
      this.cdnActive--;
    }
  }

  /** The bytes (a Range of them when asked), in small writes, with the CDN's faults and throttle applied. */
  private async send(req: IncomingMessage, res: ServerResponse, bytes: Uint8Array, cdn: boolean): Promise<void> {
    const range = parseRange(req.headers.range, bytes.length);
    const start = range?.start ?? 0;
    const end = range?.end ?? bytes.length;
    if (start > end || start > bytes.length) {
      res.writeHead(416, { "content-range": `bytes */${bytes.length}` });
      res.end();
      return;
    }
    res.writeHead(range ? 206 : 200, {
      "content-length": String(end - start),
      "accept-ranges": "bytes",
      ...(range ? { "content-range": `bytes ${start}-${end - 1}/${bytes.length}` } : {}),
    });
    if (req.method === "HEAD") return void res.end();
    this.open.add(res);
    const cut = cdn && this.faults.cut && this.faults.cut.times > 0 ? this.faults.cut : undefined;
    if (cut) cut.times--;
    const stall = cdn ? this.faults.stall : undefined;
    const chunk = 16 * 1024;
    let sent = 0;
    try {
      for (let pos = start; pos < end; pos += chunk) {
        let piece = bytes.subarray(pos, Math.min(end, pos + chunk));
        const limit = Math.min(cut?.afterBytes ?? Infinity, stall?.afterBytes ?? Infinity);
        if (sent + piece.length > limit) piece = piece.subarray(0, Math.max(0, limit - sent));
        if (piece.length > 0) {
          if (!res.write(piece)) await new Promise((r) => res.once("drain", r));
          sent += piece.length;
          if (cdn) this.cdnBytes += piece.length;
        }
        if (sent >= limit) {
          if (cut && sent >= cut.afterBytes) {
            // Let the bytes go out first, then drop the connection mid-body.
            await new Promise((r) => setTimeout(r, 20));
            res.destroy();
            return;
          }
          // A stall: the connection stays open and sends nothing more.
          await new Promise<void>((r) => res.once("close", () => r()));
          return;
        }
        if (cdn && this.faults.rate > 0)
          await new Promise((r) => setTimeout(r, (piece.length / this.faults.rate) * 1000));
        if (res.destroyed) return;
      }
      res.end();
    } finally {
      this.open.delete(res);
    }
  }
}

/** A forward proxy on loopback for plain-http targets (absolute-form requests), counting what it forwards. */
export class ForwardProxy {
  url = "";
  readonly forwarded: string[] = [];
  private server?: Server;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const target = new URL(req.url ?? "");
      this.forwarded.push(target.href);
      const upstream = httpRequest(
        target,
        { method: req.method, headers: { ...req.headers, host: target.host } },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      upstream.on("error", () => res.destroy());
      req.pipe(upstream);
    });
    this.url = await listen(this.server);
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server?.closeAllConnections?.();
      this.server?.close(() => resolve());
    });
  }
}

/** Random bytes standing in for a GGUF file (a download test never parses them). */
export function fakeGguf(size: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(size);
  bytes.set(randomBytes(size));
  bytes.set([0x47, 0x47, 0x55, 0x46], 0);
  return bytes;
}
