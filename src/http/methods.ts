// Which methods a path answers, from the app's route table: a path that
// exists answers another method with 405 and an Allow header, one that does
// not with 404 (the envelope of docs/api/openai.md#error-envelope either way).
import { RequestError } from "../daemon/request-error.ts";

export interface RouteEntry {
  method: string;
  path: string;
}

/** An Elysia path ("/v1/models/*", "/slots/:id/save") as a pattern over request paths. */
function patternOf(path: string): RegExp {
  const segments = path
    .split("/")
    .map((seg) => (seg === "*" ? ".*" : seg.startsWith(":") ? "[^/]+" : seg.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
  return new RegExp(`^${segments.join("/")}$`);
}

/** A method list for Allow: HEAD goes with GET (the listener answers it as a GET without the body). */
function allowList(methods: Iterable<string>): string[] {
  const set = new Set(methods);
  if (set.has("GET")) set.add("HEAD");
  return [...set].sort();
}

export class RouteTable {
  private readonly entries: { method: string; pattern: RegExp }[];

  constructor(routes: readonly RouteEntry[]) {
    this.entries = routes.map((r) => ({ method: r.method.toUpperCase(), pattern: patternOf(r.path) }));
  }

  /** The methods a path answers; empty when no route has it. */
  allowed(path: string): string[] {
    return allowList(this.entries.filter((e) => e.pattern.test(path)).map((e) => e.method));
  }

  /** The answer to a request no route took: 405 with Allow when the path exists, else 404. */
  unrouted(method: string, target: string): RequestError {
    const path = target.split("?", 1)[0]!;
    if (!path.startsWith("/")) {
      // CONNECT's authority target, an asterisk: nothing here is addressed that way.
      const all = allowList(this.entries.map((e) => e.method));
      return new RequestError(
        405,
        `${method} ${target} is not supported: this server is not a proxy and takes only paths`,
        "method_not_allowed",
        null,
        { allow: all.join(", ") },
      );
    }
    const allow = this.allowed(path);
    if (allow.length === 0) return new RequestError(404, `no route ${method} ${path}`);
    return new RequestError(
      405,
      `${method} is not allowed on ${path}; it takes ${allow.join(", ")}`,
      "method_not_allowed",
      null,
      { allow: allow.join(", ") },
    );
  }
}
