// The source tree's layers (docs/design.md#layers): every import from one
// folder to another goes down this order, and no module imports itself back
// through a chain of others. A new upward import or cycle fails here, with the
// importing file named.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");

/** Lowest first; a folder may import only from folders on earlier lines. */
const LAYERS: string[][] = [
  ["ffi", "grammar", "src/gguf", "src/runtime"],
  ["src/codec", "src/fixtures", "src/version.ts", "src/logging", "src/files", "src/rpc", "src/hub"],
  ["src/engine"],
  ["src/session-log"],
  ["src/daemon"],
  ["src/pipeline"],
  ["src/batches", "src/response-store", "src/session-api"],
  ["src/http"],
  ["src/web"],
  ["src/worker", "src/cli", "src/release"],
  ["src/main.ts"],
];

/** The unit a file belongs to: its top folder under src/ (or ffi/, grammar/), or a lone file in src/. */
function unitOf(file: string): string {
  const parts = relative(ROOT, file).split("/");
  if (parts[0] === "src") return parts.length > 2 ? `src/${parts[1]}` : `src/${parts[1]}`;
  return parts[0]!;
}

function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith(".ts")) out.push(path);
    }
  };
  for (const top of ["src", "ffi", "grammar"]) walk(join(ROOT, top));
  return out;
}

/** Every relative module a file imports or re-exports, statically or with import(). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const specs = [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^"';]*?\bfrom\s+["']([^"']+)["']/g),
    ...text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g),
    ...text.matchAll(/(?:^|\n)\s*import\s+["']([^"']+)["']/g),
  ];
  return specs
    .map((m) => m[1]!)
    .filter((s) => s.startsWith("."))
    .map((s) => resolve(dirname(file), s))
    .filter((t) => t.endsWith(".ts"));
}

const rank = new Map<string, number>();
LAYERS.forEach((units, i) => units.forEach((u) => rank.set(u, i)));
const files = sourceFiles();
const graph = new Map(files.map((f) => [f, importsOf(f)]));

describe("layers", () => {
  test("every source folder has a layer", () => {
    const units = [...new Set(files.map(unitOf))].filter((u) => !rank.has(u));
    expect(units).toEqual([]);
  });

  test("imports between folders only go down", () => {
    const upward: string[] = [];
    for (const [file, targets] of graph) {
      const from = unitOf(file);
      for (const target of targets) {
        const to = unitOf(target);
        if (to === from || to === "package.json") continue;
        if (!(rank.get(to)! < rank.get(from)!)) upward.push(`${relative(ROOT, file)} -> ${relative(ROOT, target)}`);
      }
    }
    expect(upward).toEqual([]);
  });

  test("no module imports itself back through others", () => {
    // Tarjan's strongly connected components; any with more than one file is a cycle.
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const cycles: string[][] = [];
    let next = 0;
    const visit = (v: string) => {
      index.set(v, next);
      low.set(v, next++);
      stack.push(v);
      onStack.add(v);
      for (const w of graph.get(v) ?? []) {
        if (!graph.has(w)) continue;
        if (!index.has(w)) {
          visit(w);
          low.set(v, Math.min(low.get(v)!, low.get(w)!));
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
      if (low.get(v) === index.get(v)) {
        const component: string[] = [];
        for (let w = stack.pop()!; ; w = stack.pop()!) {
          onStack.delete(w);
          component.push(relative(ROOT, w));
          if (w === v) break;
        }
        if (component.length > 1) cycles.push(component.sort());
      }
    };
    for (const f of files) if (!index.has(f)) visit(f);
    expect(cycles).toEqual([]);
  });

  test("the test sees imports of every kind", () => {
    // Guards the scanner itself: main.ts loads the serve command with import().
    expect(graph.get(join(ROOT, "src/main.ts"))!.some((t) => t.endsWith("src/cli/serve.ts"))).toBe(true);
    expect(graph.get(join(ROOT, "src/http/errors.ts"))!.some((t) => t.endsWith("src/daemon/request-error.ts"))).toBe(
      true,
    );
  });
});
