// The deployment files (deploy/Containerfile, deploy/k8s/*.yaml) checked
// against the program they deploy rather than against copies of it: every
// flag the image and the StatefulSet pass is a `serve` flag and the whole
// command line parses (the real parser); the ports agree from the
// Containerfile's EXPOSE to the InferencePool; the probes' paths answer 200,
// with no key, on a server started with the StatefulSet's own arguments; the
// image's HEALTHCHECK command succeeds against it; the grace period outlasts
// the drain; the selectors match the pod labels; the image's user is not root.
// The flags the manifests rely on are checked for what the notes say they do:
// --allow-host lets a Service's or a router's Host through, with or without
// the key; --public-metrics lets the endpoint picker scrape /metrics without
// the key (and without the per-key series) while the API still wants it; the
// compute threads left to their default follow the pod's CPU limit.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { flagSpecs } from "../../src/cli/flag-decl.ts";
import { HELP_FLAGS, SERVE_FLAGS } from "../../src/cli/serve-flags.ts";
import { parseServeOptions, type ServeOptions } from "../../src/cli/serve-options.ts";
import { healthUrl } from "../../src/cli/wait.ts";
import { cgroupCpuLimit, physicalCores } from "../../src/engine/threads.ts";
import { foreignRequestRefusal } from "../../src/http/origin-guard.ts";
import { REPLICA_HEADER } from "../../src/http/replica.ts";
import { archiveName } from "../../src/release/platforms.ts";
import { freePort } from "../scenarios/support.ts";

const REPO = resolve(import.meta.dir, "../..");
const DEPLOY = join(REPO, "deploy");

// --- The Containerfile ------------------------------------------------------

interface Instruction {
  op: string;
  args: string;
}

/** The instructions, continuation lines joined and comment lines dropped (as the builders read them). */
function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = "";
  for (const raw of text.split("\n")) {
    if (/^\s*#/.test(raw)) continue;
    const line = raw.trimEnd();
    if (line.endsWith("\\")) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    const whole = (pending + line).trim();
    pending = "";
    if (whole === "") continue;
    const m = /^(\w+)\s+([\s\S]*)$/.exec(whole);
    if (!m) throw new Error(`Containerfile: cannot read '${whole}'`);
    out.push({ op: m[1]!.toUpperCase(), args: m[2]!.trim() });
  }
  return out;
}

const containerfile = instructions(readFileSync(join(DEPLOY, "Containerfile"), "utf8"));

/** ARG defaults, for ${NAME} in later instructions. */
const buildArgs = new Map<string, string>();
for (const i of containerfile) {
  if (i.op !== "ARG") continue;
  const [name, value] = i.args.split("=", 2);
  if (value !== undefined) buildArgs.set(name!, value);
}

function expand(text: string): string {
  return text.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a: string | undefined, b: string | undefined) => {
    const name = (a ?? b)!;
    const value = buildArgs.get(name);
    if (value === undefined) throw new Error(`Containerfile: \${${name}} has no default`);
    return value;
  });
}

/** The one instruction `op` (the last, as the builders take it), its ARGs expanded. */
function last(op: string): string {
  const found = containerfile.filter((i) => i.op === op).at(-1);
  if (!found) throw new Error(`Containerfile: no ${op}`);
  return expand(found.args);
}

/** An exec-form (JSON array) instruction's words. */
function execForm(args: string): string[] {
  const words = JSON.parse(args) as unknown;
  if (!Array.isArray(words) || !words.every((w) => typeof w === "string"))
    throw new Error(`Containerfile: '${args}' is not the exec form`);
  return words;
}

const entrypoint = execForm(last("ENTRYPOINT"));
const exposed = Number(last("EXPOSE").split("/")[0]);

// --- The Kubernetes manifests ----------------------------------------------

// Parsed YAML, checked field by field below.
type Manifest = any;

function manifests(file: string): Manifest[] {
  const parsed = Bun.YAML.parse(readFileSync(join(DEPLOY, "k8s", file), "utf8")) as unknown;
  return (Array.isArray(parsed) ? parsed : [parsed]).filter((d) => d !== null && d !== undefined);
}

function one(docs: Manifest[], kind: string, name?: string): Manifest {
  const found = docs.filter((d) => d.kind === kind && (name === undefined || d.metadata?.name === name));
  if (found.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ""}, found ${found.length}`);
  return found[0];
}

const statefulSet = one(manifests("statefulset.yaml"), "StatefulSet");
const services = manifests("service.yaml").filter((d) => d.kind === "Service");
const gie = manifests("inferencepool.yaml");
const pool = one(gie, "InferencePool");
const route = one(gie, "HTTPRoute");
const policy = one(gie, "NetworkPolicy");

const pod = statefulSet.spec.template;
const podLabels: Record<string, string> = pod.metadata.labels;
if (pod.spec.containers.length !== 1) throw new Error("statefulset.yaml: expected one container");
const container = pod.spec.containers[0];

/** A container port by name or number, as a probe or a Service's targetPort names it. */
function containerPort(ref: string | number): number {
  if (typeof ref === "number") return ref;
  const port = (container.ports as Manifest[]).find((p) => p.name === ref);
  if (!port) throw new Error(`the container has no port named ${ref}`);
  return port.containerPort;
}

/** Whether a label selector (matchLabels, or a Service's plain map) selects the pods. */
function selectsPods(selector: Record<string, string>): boolean {
  return Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => podLabels[k] === v);
}

// The values Kubernetes substitutes for $(VAR) in args: the first pod's name, a key for the Secret.
const POD_NAME = `${statefulSet.metadata.name}-0`;
const API_KEY = "deploy-test-key";

function envValue(v: Manifest): string {
  if (v.value !== undefined) return String(v.value);
  if (v.valueFrom?.fieldRef?.fieldPath === "metadata.name") return POD_NAME;
  if (v.valueFrom?.secretKeyRef) return API_KEY;
  throw new Error(`no test value for the variable ${v.name}`);
}
const containerEnv = new Map<string, string>(
  (container.env ?? []).map((v: Manifest) => [v.name as string, envValue(v)]),
);

/** The container's args as the kubelet passes them: each $(VAR) the container defines replaced by its value. */
const podArgs: string[] = (container.args ?? []).map((a: string) =>
  a.replace(/\$\((\w+)\)/g, (whole, name: string) => containerEnv.get(name) ?? whole),
);

/** `serve`'s argv in the pod: the image's entrypoint after `superfluid serve`, then the args. */
const serveArgv = [...entrypoint.slice(2), ...podArgs];
const served = parseServeOptions(serveArgv, {}) as ServeOptions;
/** The same pod without its key, as the notes say it may run (the --api-key argument removed). */
const servedWithoutKey = parseServeOptions(
  serveArgv.filter((a) => !/^--api-key(=|$)/.test(a)),
  {},
) as ServeOptions;

/** A Service's DNS name as a client in the cluster sends it, and a name a client gives a router in front. */
const SERVICE_HOST = `${statefulSet.metadata.name}.default.svc.cluster.local:8080`;
const ROUTER_HOST = "llm.example.com";

describe("Containerfile", () => {
  test("the base is glibc Debian 12, which the linux-x64 binary links", () => {
    expect(last("FROM")).toMatch(/(^|\/)debian:12(-slim)?$/);
  });

  test("it installs the linux-x64 release archive, named as the release names it", () => {
    const version = (JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string }).version;
    expect(buildArgs.get("ARCHIVE")).toBe(archiveName(version, "linux-x64"));
    expect(containerfile.some((i) => i.op === "ADD" && expand(i.args).startsWith(`${buildArgs.get("ARCHIVE")} `))).toBe(
      true,
    );
  });

  test("it runs as a fixed uid that is not root, the one the StatefulSet names", () => {
    const [uid, gid] = last("USER").split(":").map(Number);
    expect(Number.isInteger(uid)).toBe(true);
    expect(uid).toBeGreaterThan(0);
    const sc = pod.spec.securityContext;
    expect(sc.runAsNonRoot).toBe(true);
    expect(sc.runAsUser).toBe(uid);
    if (gid !== undefined) {
      expect(sc.runAsGroup).toBe(gid);
      expect(sc.fsGroup).toBe(gid);
    }
  });

  test("the entrypoint is `superfluid serve` off loopback, its sessions on the image's volume", () => {
    expect(entrypoint.slice(0, 2)).toEqual(["superfluid", "serve"]);
    const own = parseServeOptions(entrypoint.slice(2), {}) as ServeOptions;
    expect(own.host).toBe("0.0.0.0");
    const volume = last("VOLUME");
    expect(own.sessions.startsWith(`${volume}/`)).toBe(true);
    expect(execForm(last("CMD"))).toEqual([]);
  });

  test("it stops with SIGTERM, the signal that drains", () => {
    expect(last("STOPSIGNAL")).toBe("SIGTERM");
  });

  test("the HEALTHCHECK is `superfluid wait` asking /health once on the exposed port", () => {
    const check = last("HEALTHCHECK");
    const words = execForm(check.slice(check.indexOf("CMD ") + 4));
    expect(words.slice(0, 2)).toEqual(["superfluid", "wait"]);
    expect(words.slice(2, 4)).toEqual(["--timeout", "0"]);
    const url = new URL(healthUrl(words.at(-1)!));
    expect(url.pathname).toBe("/health");
    expect(Number(url.port)).toBe(exposed);
  });
});

describe("the command line in the pod", () => {
  test("every flag in the entrypoint and the StatefulSet's args is a `serve` flag", () => {
    const known = new Set<string>();
    for (const [name, spec] of Object.entries(flagSpecs(SERVE_FLAGS, HELP_FLAGS))) {
      known.add(name);
      for (const alias of spec.aliases ?? []) known.add(alias);
    }
    const flags = serveArgv.filter((a) => a.startsWith("--")).map((a) => a.slice(2).split("=")[0]!);
    expect(flags.length).toBeGreaterThan(0);
    expect(flags.filter((f) => !known.has(f))).toEqual([]);
  });

  test("every $(VAR) in the args is a variable the container defines", () => {
    const used = (container.args as string[]).flatMap((a) => [...a.matchAll(/\$\((\w+)\)/g)].map((m) => m[1]!));
    expect(used.filter((name) => !containerEnv.has(name))).toEqual([]);
  });

  test("the replica id is the pod's name, from the downward API", () => {
    expect(served.replicaId).toBe(POD_NAME);
  });

  test("the server listens on the port the Containerfile exposes and the container declares", () => {
    expect(served.port).toBe(exposed);
    expect(containerPort("http")).toBe(exposed);
  });
});

describe("the Kubernetes manifests", () => {
  test("the grace period outlasts --drain-timeout, so SIGKILL never cuts the drain", () => {
    expect(pod.spec.terminationGracePeriodSeconds).toBeGreaterThan(served.drainTimeout);
  });

  test("the probes: startup and liveness on /health, readiness on /health/ready, on the server's port", () => {
    expect(container.startupProbe.httpGet.path).toBe("/health");
    expect(container.livenessProbe.httpGet.path).toBe("/health");
    expect(container.readinessProbe.httpGet.path).toBe("/health/ready");
    for (const probe of [container.startupProbe, container.livenessProbe, container.readinessProbe])
      expect(containerPort(probe.httpGet.port)).toBe(served.port);
  });

  test("the selectors select the pods: the StatefulSet's, both Services', the pool's, the policy's", () => {
    expect(selectsPods(statefulSet.spec.selector.matchLabels)).toBe(true);
    expect(services.length).toBe(2);
    for (const s of services) expect(selectsPods(s.spec.selector)).toBe(true);
    expect(selectsPods(pool.spec.selector.matchLabels)).toBe(true);
    expect(selectsPods(policy.spec.podSelector.matchLabels)).toBe(true);
  });

  test("the pods carry the engine-type label that makes the endpoint picker read the vllm:* gauges", () => {
    expect(podLabels["inference.networking.k8s.io/engine-type"]).toBe("vllm");
  });

  test("the headless Service governs the StatefulSet; both Services reach the server's port", () => {
    const headless = services.find((s) => s.spec.clusterIP === "None");
    expect(headless?.metadata.name).toBe(statefulSet.spec.serviceName);
    for (const s of services) for (const p of s.spec.ports) expect(containerPort(p.targetPort)).toBe(served.port);
  });

  test("the InferencePool is the v1 API, on the server's port, with an endpoint picker", () => {
    expect(pool.apiVersion).toBe("inference.networking.k8s.io/v1");
    expect(pool.spec.targetPorts).toEqual([{ number: served.port }]);
    expect(typeof pool.spec.endpointPickerRef.name).toBe("string");
    expect(Number.isInteger(pool.spec.endpointPickerRef.port.number)).toBe(true);
    const backends = route.spec.rules.flatMap((r: Manifest) => r.backendRefs);
    expect(backends).toContainEqual({
      group: "inference.networking.k8s.io",
      kind: "InferencePool",
      name: pool.metadata.name,
    });
    const ports = policy.spec.ingress.flatMap((r: Manifest) => r.ports.map((p: Manifest) => p.port));
    expect(ports).toEqual([served.port]);
  });

  test("each replica's claim is mounted where the sessions are", () => {
    const claim = statefulSet.spec.volumeClaimTemplates[0].metadata.name;
    const mount = (container.volumeMounts as Manifest[]).find((m) => m.name === claim);
    expect(mount?.mountPath).toBe(last("VOLUME"));
    expect(served.sessions.startsWith(`${mount.mountPath}/`)).toBe(true);
  });

  test("the Host check lets a Service's and a router's name through, with the key or without it", () => {
    const ask = (options: ServeOptions, host: string, authenticated: boolean) =>
      foreignRequestRefusal(new Request("http://x/v1/models", { headers: { host } }), {
        bind: options.host,
        authenticated,
        hosts: options.allowHosts,
      })?.status ?? 200;
    expect(served.apiKeys.length).toBe(1);
    expect(servedWithoutKey.apiKeys).toEqual([]);
    for (const host of [SERVICE_HOST, ROUTER_HOST]) {
      expect({ host, status: ask(served, host, true) }).toEqual({ host, status: 200 });
      // What --allow-host is for: the pod without its key still answers those names.
      expect({ host, status: ask(servedWithoutKey, host, false) }).toEqual({ host, status: 200 });
      // ...which it would refuse without the flag (the DNS-rebinding defence off loopback).
      const bare = { ...servedWithoutKey, allowHosts: [] };
      expect({ host, status: ask(bare, host, false) }).toEqual({ host, status: 403 });
    }
  });

  test("the endpoint picker's scrape is let in: /metrics needs no key", () => {
    expect(served.publicMetrics).toBe(true);
  });

  test("compute threads are left to their default, which the pod's CPU limit caps", () => {
    expect(serveArgv.some((a) => /^--threads(=|$)/.test(a))).toBe(false);
    const limit = Number(container.resources.limits.cpu);
    expect(Number.isInteger(limit) && limit > 0).toBe(true);
    // The container's cgroup as the kubelet sets it for that limit: cgroup v2's cpu.max, and v1's CFS quota.
    const v2 = mkdtempSync(join(tmpdir(), "sf-cgroup-"));
    const v1 = mkdtempSync(join(tmpdir(), "sf-cgroup-"));
    try {
      writeFileSync(join(v2, "cpu.max"), `${limit * 100000} 100000\n`);
      mkdirSync(join(v1, "cpu"));
      writeFileSync(join(v1, "cpu", "cpu.cfs_quota_us"), `${limit * 100000}\n`);
      writeFileSync(join(v1, "cpu", "cpu.cfs_period_us"), "100000\n");
      for (const root of [v2, v1]) {
        expect(cgroupCpuLimit(root)).toBe(limit);
        const threads = physicalCores(cgroupCpuLimit(root));
        expect(threads).toBeGreaterThan(0);
        expect(threads).toBeLessThanOrEqual(limit);
      }
    } finally {
      rmSync(v2, { recursive: true, force: true });
      rmSync(v1, { recursive: true, force: true });
    }
  });
});

// --- A server started with the pod's own arguments --------------------------

describe("a server started with the pod's arguments", () => {
  let dir = "";
  let proc: Subprocess<"ignore", "ignore", "pipe"> | undefined;
  let url = "";
  let stderr = "";

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "sf-deploy-"));
    const port = await freePort();
    // The pod's argv, then what differs on this machine (the last occurrence of a flag wins): loopback instead of
    // 0.0.0.0, a scratch sessions folder, one compute thread on this 2-core box.
    const argv = [
      ...serveArgv,
      "--http",
      `127.0.0.1:${port}`,
      "--sessions",
      join(dir, "sessions"),
      "--threads",
      "1",
      "--no-tui",
    ];
    proc = Bun.spawn([process.execPath, join(REPO, "src/main.ts"), "serve", ...argv], {
      stdin: "ignore",
      stdout: "ignore",
      stderr: "pipe",
      env: { ...process.env, SUPERFLUID_QUIET: "1" },
    });
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of proc!.stderr) stderr += decoder.decode(chunk, { stream: true });
    })().catch(() => {});
    url = `http://127.0.0.1:${port}`;
    // Until /health answers 200 or the process ends; the test runner's timeout is the only bound.
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`the server exited ${proc.exitCode}:\n${stderr}`);
      const status = await fetch(`${url}/health`).then(
        (r) => r.status,
        () => 0,
      );
      if (status === 200) break;
      await Bun.sleep(50);
    }
  });

  afterAll(async () => {
    if (proc && proc.exitCode === null) {
      proc.kill("SIGKILL");
      await proc.exited;
    }
    if (dir && existsSync(dir)) rmSync(dir, { recursive: true, force: true });
  });

  test("each probe's path answers 200 without a key, as the kubelet asks it", async () => {
    for (const probe of [container.startupProbe, container.livenessProbe, container.readinessProbe]) {
      const res = await fetch(`${url}${probe.httpGet.path}`);
      expect({ path: probe.httpGet.path, status: res.status }).toEqual({ path: probe.httpGet.path, status: 200 });
      // Every reply names the replica: the pod's name.
      expect(res.headers.get(REPLICA_HEADER)).toBe(POD_NAME);
    }
  });

  test("the image's HEALTHCHECK command succeeds against it", async () => {
    const check = last("HEALTHCHECK");
    const words = execForm(check.slice(check.indexOf("CMD ") + 4));
    const target = new URL(url).host;
    const run = Bun.spawn([process.execPath, join(REPO, "src/main.ts"), ...words.slice(1, -1), target], {
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(await run.exited).toBe(0);
  });

  test("the key the pod is given is required on the API, through any Host the router sends", async () => {
    // Bound to loopback here, the server would refuse these names even with a key: --allow-host lets them in.
    for (const host of [SERVICE_HOST, ROUTER_HOST]) {
      const without = await fetch(`${url}/v1/models`, { headers: { host } });
      expect({ host, status: without.status }).toEqual({ host, status: 401 });
      const models = await fetch(`${url}/v1/models`, { headers: { host, authorization: `Bearer ${API_KEY}` } });
      expect({ host, status: models.status }).toEqual({ host, status: 200 });
      expect(models.headers.get(REPLICA_HEADER)).toBe(POD_NAME);
    }
  });

  test("/metrics answers the endpoint picker's scrape without a key: the vllm:* gauges, no key's series", async () => {
    for (const path of ["/metrics", "/v1/metrics"]) {
      const res = await fetch(`${url}${path}`, { headers: { host: SERVICE_HOST } });
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
      const text = await res.text();
      for (const name of [
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
        "vllm:cache_config_info",
        "vllm:lora_requests_info",
      ])
        expect(text).toMatch(new RegExp(`^${name}\\{[^}]*model_name="`, "m"));
      expect(text).not.toContain("superfluid_key_");
    }
    // A scrape with the key is the whole exposition, the per-key families included (their rows come with
    // --key-policy keys; a lone --api-key has none).
    const keyed = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${API_KEY}` } });
    expect(await keyed.text()).toMatch(/^# TYPE superfluid_key_requests_total counter$/m);
  });

  test("SIGTERM, the StatefulSet's stop signal, ends it with status 0", async () => {
    proc!.kill("SIGTERM");
    expect(await proc!.exited).toBe(0);
  });
});
