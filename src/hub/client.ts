// The Hub's HTTP API, the three calls a pull makes (the ones llama.cpp makes):
//   GET {endpoint}/api/models/{repo}/refs                          the main branch's commit
//   GET {endpoint}/api/models/{repo}/tree/{commit}?recursive=true  the files, paged by the Link header
//   GET {endpoint}/{repo}/resolve/{commit}/{path}                  a file (a redirect to the CDN for LFS files)
// Redirects are followed here, not by fetch: the token goes to the Hub's own
// host and never to another (the CDN's URLs are signed already). Each request
// goes through the proxy the environment names for its URL.
import { version } from "../../package.json";
import { HubError } from "./errors.ts";
import type { HubSettings } from "./settings.ts";

export interface TreeEntry {
  type: "file" | "directory";
  path: string;
  /** The git blob id (sha1 of the git object). */
  oid: string;
  size: number;
  /** Present for files stored in LFS: `oid` is the sha256 of the content. */
  lfs?: { oid: string; size: number };
}

interface RequestOptions {
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

const MAX_REDIRECTS = 5;
const MAX_TREE_PAGES = 1000;

/** How a request failed before an answer, as a person reads it. */
function networkError(url: URL, err: unknown, proxy: string | undefined): HubError {
  const e = err as { code?: string; message?: string };
  const why = e.code ?? e.message ?? String(err);
  const via = proxy ? ` through the proxy ${new URL(proxy).host}` : "";
  return new HubError(
    "network",
    `cannot reach ${url.host}${via} (${why}): check the network${proxy ? " and the proxy" : ""}; ` +
      "with HF_HUB_OFFLINE=1 (or --offline) models already in the cache start without it",
  );
}

async function errorText(res: Response): Promise<string> {
  try {
    const text = await res.text();
    try {
      const body = JSON.parse(text) as { error?: unknown };
      if (typeof body.error === "string") return body.error.slice(0, 300);
    } catch {
      // Not JSON: the text itself.
    }
    return text.slice(0, 300);
  } catch {
    return "";
  }
}

export class HubClient {
  private readonly hubHost: string;

  constructor(
    private readonly settings: HubSettings,
    private readonly fetchImpl: typeof fetch = fetch,
  ) {
    this.hubHost = new URL(settings.endpoint).host;
  }

  /** One request, no redirect followed; the token only to the Hub's host, each URL through its proxy. */
  private async send(url: URL, init: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { "user-agent": `superfluid/${version}`, ...init.headers };
    if (this.settings.token !== undefined && url.host === this.hubHost)
      headers.authorization = `Bearer ${this.settings.token}`;
    const proxy = this.settings.proxyFor(url.href);
    try {
      return await this.fetchImpl(url, {
        headers,
        redirect: "manual",
        ...(init.signal ? { signal: init.signal } : {}),
        // Bun's fetch takes the proxy per request.
        ...(proxy === undefined ? {} : { proxy }),
      } as RequestInit);
    } catch (err) {
      if ((err as Error).name === "AbortError" || init.signal?.aborted) throw err;
      throw networkError(url, err, proxy);
    }
  }

  /** A request with its redirects followed (relative or to another host), at most MAX_REDIRECTS. */
  async request(url: string, init: RequestOptions = {}): Promise<Response> {
    let current = new URL(url);
    for (let hop = 0; ; hop++) {
      const res = await this.send(current, init);
      const location = res.headers.get("location");
      if (res.status < 300 || res.status >= 400 || location === null) return res;
      if (hop >= MAX_REDIRECTS) throw new HubError("hub", `${url}: more than ${MAX_REDIRECTS} redirects`);
      await res.body?.cancel();
      current = new URL(location, current);
    }
  }

  /** Turns a failed answer into the HubError a person can act on. */
  private async failure(res: Response, repo: string, what: string): Promise<HubError> {
    const code = res.headers.get("x-error-code") ?? "";
    const page = `${this.settings.endpoint}/${repo}`;
    const detail = await errorText(res);
    const tokenNote =
      this.settings.token === undefined
        ? "set HF_TOKEN (or run `hf auth login`)"
        : "check that HF_TOKEN is a valid token of an account that may read it";
    if (code === "GatedRepo" || (res.status === 403 && code !== "RepoNotFound")) {
      return new HubError(
        "gated",
        `${repo} is gated or private (HTTP ${res.status}): accept its licence at ${page} and ${tokenNote}`,
      );
    }
    if (code === "RepoNotFound" || (res.status === 404 && what !== "file") || res.status === 401) {
      return new HubError(
        "not_found",
        `${repo} was not found on ${this.settings.endpoint} (HTTP ${res.status}): check the name; ` +
          `if it is private or gated, ${tokenNote}`,
      );
    }
    return new HubError(
      "hub",
      `${this.settings.endpoint} answered ${res.status} for ${what} of ${repo}${detail ? `: ${detail}` : ""}`,
    );
  }

  private apiUrl(repo: string, rest: string): string {
    return `${this.settings.endpoint}/api/models/${repo}/${rest}`;
  }

  /** The commit the `main` branch points at. */
  async mainCommit(repo: string): Promise<string> {
    const res = await this.request(this.apiUrl(repo, "refs"));
    if (!res.ok) throw await this.failure(res, repo, "the branches");
    const body = (await res.json().catch(() => undefined)) as
      | { branches?: { name?: string; targetCommit?: string }[] }
      | undefined;
    const main = body?.branches?.find((b) => b.name === "main");
    if (!main?.targetCommit || !/^[0-9a-f]{40}$/.test(main.targetCommit))
      throw new HubError("hub", `${this.settings.endpoint} lists no main branch for ${repo}`);
    return main.targetCommit;
  }

  /** Every file at the commit, all pages (the Link header's rel="next"). */
  async listFiles(repo: string, commit: string): Promise<TreeEntry[]> {
    const files: TreeEntry[] = [];
    let next: string | undefined = `${this.apiUrl(repo, `tree/${commit}`)}?recursive=true`;
    for (let page = 0; next !== undefined; page++) {
      if (page >= MAX_TREE_PAGES) throw new HubError("hub", `${repo}: the file list has more than ${page} pages`);
      const res = await this.request(next);
      if (!res.ok) throw await this.failure(res, repo, "the file list");
      const entries = (await res.json().catch(() => undefined)) as TreeEntry[] | undefined;
      if (!Array.isArray(entries)) throw new HubError("hub", `${repo}: the file list is not a JSON array`);
      for (const e of entries) if (e?.type === "file" && typeof e.path === "string") files.push(e);
      next = nextLink(res.headers.get("link"), next);
    }
    return files;
  }

  /** The URL a file is downloaded from (before redirects). */
  fileUrl(repo: string, commit: string, path: string): string {
    return `${this.settings.endpoint}/${repo}/resolve/${commit}/${path.split("/").map(encodeURIComponent).join("/")}`;
  }

  /**
   * A file's bytes from `start` (to `end`, exclusive, when given): a 200 or a 206 with the body unread. A 200 to a
   * ranged request (a server that ignores Range) is answered as it is: the caller checks.
   */
  async openFile(
    repo: string,
    commit: string,
    path: string,
    range: { start: number; end?: number } | undefined,
    signal?: AbortSignal,
  ): Promise<Response> {
    const headers: Record<string, string> = {};
    if (range && (range.start > 0 || range.end !== undefined))
      headers.range = `bytes=${range.start}-${range.end === undefined ? "" : range.end - 1}`;
    const res = await this.request(this.fileUrl(repo, commit, path), { headers, ...(signal ? { signal } : {}) });
    if (res.status === 200 || res.status === 206) return res;
    throw await this.failure(res, repo, "file");
  }
}

/** The rel="next" URL of a Link header, resolved against the page it came with. */
export function nextLink(link: string | null, base: string): string | undefined {
  if (!link) return undefined;
  for (const part of link.split(",")) {
    const m = /<([^>]+)>\s*;\s*rel="?next"?/i.exec(part);
    if (m) return new URL(m[1]!, base).href;
  }
  return undefined;
}
