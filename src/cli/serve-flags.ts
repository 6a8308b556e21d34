// Every flag of `superfluid serve`, declared once: the parser, the --help and --help-all text,
// the ServeOptions type (serve-options.ts) and the flag tables of docs/cli.md#serve
// (flag-docs.ts; `bun run docs:cli` rewrites them) all come from this list.
// Order: within a help group or a docs table, flags are listed in this order.
import { join } from "node:path";
import { homedir } from "node:os";
import { DEFAULT_QOS } from "../engine/scheduler.ts";
import { MAX_DRAFT_TOKENS, SPECULATION_DEFAULTS as SPEC } from "../engine/speculation.ts";
import { physicalCores } from "../engine/threads.ts";
import { parseDeviceList, parseGpuLayers, parseSplitMode, parseTensorSplit } from "../engine/offload.ts";
import { defaultReplicaId } from "../http/replica.ts";
import { F16_KV } from "../gguf/kv-type.ts";
import type { Env, FlagDecl } from "./flag-decl.ts";
import {
  aliasOf,
  allowedHost,
  allowedOrigin,
  apiKey,
  cells,
  DEFAULT_PORT,
  httpAddress,
  kvBits,
  kvType,
  maxContext,
  nonEmpty,
  num,
  port,
  prefillBudget,
  qosClass,
  replicaId,
  rpcEndpoints,
  speculate,
  speedup,
  text,
  webAddress,
  webOrigin,
  whole,
} from "./flag-values.ts";

/**
 * The sections flags are grouped in, in order: the --help headings (a section with no flag shown is
 * left out) and the flag tables of docs/cli.md, each between `<!-- serve-flags:ID -->` and `<!-- /serve-flags -->`.
 */
export const SERVE_SECTIONS = [
  { id: "listener", title: "Listener" },
  { id: "engine", title: "Engine" },
  { id: "gpu", title: "GPU offload" },
  { id: "scheduling", title: "Scheduling" },
  { id: "speculation", title: "Speculative decoding" },
  { id: "http-policy", title: "HTTP policy" },
  { id: "fim", title: "Fill-in-the-middle" },
  { id: "sessions", title: "Sessions" },
  { id: "parking", title: "Parking" },
  { id: "prefix-cache", title: "Prefix cache" },
  { id: "model-lookup", title: "Model lookup and sampling" },
  { id: "refused", title: "Refused by this runtime" },
  { id: "logging", title: "Logging" },
] as const;

type Section = (typeof SERVE_SECTIONS)[number]["id"];
type ServeFlagDecl = FlagDecl & { readonly section: Section };

export function superfluidHome(env: Env = process.env): string {
  return env.SUPERFLUID_HOME ?? join(homedir(), ".superfluid");
}

export const SERVE_FLAGS = [
  {
    flag: "model",
    key: "model",
    value: "MODEL",
    parse: text,
    repeatable: true,
    internal: true,
    section: "model-lookup",
    help: "another model loaded at startup, after the positional one ([several models](#several-models))",
  },
  {
    flag: "model-dir",
    key: "modelDirs",
    value: "DIR",
    parse: text,
    repeatable: true,
    section: "model-lookup",
    help:
      "every GGUF under `DIR` is known and loads on the first request naming it ([several models](#several-models)); " +
      "references are looked up here too, before the Hugging Face cache",
  },
  {
    flag: "offline",
    key: "offline",
    env: "HF_HUB_OFFLINE",
    section: "model-lookup",
    help:
      "downloads nothing: a reference not found locally is refused instead of pulled ([pulling models](#pulling-models)); " +
      "`HF_HUB_OFFLINE=1` does the same",
  },
  {
    flag: "mmproj",
    key: "mmproj",
    negatable: true,
    default: true,
    section: "model-lookup",
    help:
      "a pulled reference brings the repo's vision projector (the nearest `mmproj` GGUF) beside the model; " +
      "`--no-mmproj` leaves it ([pulling models](#pulling-models))",
  },
  {
    flag: "idle-timeout",
    key: "idleTimeoutSec",
    value: "SEC",
    // setInterval takes at most 2^31-1 ms (the check runs every SEC/4).
    parse: num({ min: 0, max: 2_147_483 }),
    default: 0,
    shown: "0 = never",
    section: "model-lookup",
    help:
      "unloads a model other than the default after `SEC` seconds with no request in flight and none naming it; " +
      "checked every `SEC`/4",
  },
  {
    flag: "alias",
    key: "aliases",
    value: "NAME=ID",
    parse: aliasOf,
    repeatable: true,
    section: "model-lookup",
    help:
      "requests naming `NAME` get the served model `ID`, on every route that takes a model. `NAME` may hold `*` " +
      "wildcards (`claude-*=tiny-chat` maps every name Claude Code sends); a served id wins, then an exact alias, " +
      "then the patterns in the order given. `ID` must be the served id (else exit 1 naming it); an empty side " +
      "exits 2. `/v1/models` lists the names as `aliases` ([API](api/anthropic.md#model-names))",
  },
  {
    flag: "http",
    key: "http",
    value: "ADDR:PORT",
    parse: httpAddress,
    internal: true,
    shown: "`127.0.0.1:8453`",
    section: "listener",
    help: "where to listen; `[v6]:PORT` for IPv6; an empty address is `127.0.0.1`. Wins over `--host`/`--port`",
  },
  {
    flag: "host",
    key: "host",
    value: "ADDR",
    parse: text,
    default: "127.0.0.1",
    shown: "`127.0.0.1`",
    section: "listener",
    help: "the address to listen on",
  },
  {
    flag: "port",
    key: "port",
    value: "N",
    parse: port,
    default: DEFAULT_PORT,
    section: "listener",
    help: "the port to listen on, 0-65535; 0 = any free port",
  },
  {
    flag: "api-key",
    key: "apiKeys",
    value: "KEY",
    parse: apiKey,
    repeatable: true,
    section: "listener",
    help:
      "requests need this key (`Authorization: Bearer` or `X-Api-Key`); " +
      "a global key may use the admin routes ([security](api/security.md#keys))",
  },
  {
    flag: "key-policy",
    key: "keyPolicy",
    value: "FILE",
    parse: text,
    internal: true,
    section: "listener",
    help: "named keys with classes, limits and scopes ([format](api/key-policy.md)); a bad file exits 2 with the reason",
  },
  {
    flag: "rate-limit",
    key: "rateLimitRpm",
    value: "RPM",
    parse: whole(0, 1_000_000),
    default: 0,
    shown: "0 = off",
    section: "listener",
    help: "requests a minute per client IP ([security](api/security.md#rate-limits))",
  },
  {
    flag: "allow-origin",
    key: "allowOrigins",
    value: "PATTERN",
    parse: allowedOrigin,
    repeatable: true,
    env: "SUPERFLUID_ALLOW_ORIGINS",
    section: "listener",
    help:
      "also let browser pages from this origin call the API, answered with CORS, besides this machine's pages and " +
      "local desktop apps ([CORS](api/security.md#cors)); `*` stands for any run of characters " +
      "(`chrome-extension://*`, `https://*.example.com`); `*` alone (or `https://*`) only with a key",
  },
  {
    flag: "web-origin",
    key: "webOrigins",
    value: "URL",
    parse: webOrigin,
    repeatable: true,
    section: "listener",
    help:
      "also let in requests whose `Origin` is this page origin on the `--web` listener, and on the main one as " +
      "`--allow-origin` does",
  },
  {
    flag: "public-metrics",
    key: "publicMetrics",
    section: "listener",
    help:
      "`GET /metrics` and `/v1/metrics` need no key on a server with keys, for a scraper that cannot send one " +
      "(the Inference Extension's endpoint picker, [scale-out](guides/scale-out.md)); such a scrape leaves out the " +
      "`superfluid_key_*` series",
  },
  {
    flag: "allow-host",
    key: "allowHosts",
    value: "NAME",
    parse: allowedHost,
    repeatable: true,
    section: "listener",
    help:
      "also accept requests whose `Host` is NAME, e.g. the name a router or a Kubernetes Service sends " +
      "([Host check](api/openai.md#request-checks)); `*` accepts any, for a replica only a router reaches " +
      "([scale-out](guides/scale-out.md))",
  },
  {
    flag: "web",
    key: "web",
    value: "HOST:PORT",
    parse: webAddress,
    shown: "off",
    section: "listener",
    help:
      "the session API and the chat page on their own listener, loopback only (another address exits 2); " +
      "port 0 = any free port; a token is written to `<sessions>/web-token` at each start " +
      "([api/sessions.md](api/sessions.md))",
  },
  {
    flag: "max-batch",
    key: "maxBatch",
    aliases: ["max-batch-size"],
    value: "N",
    parse: whole(1, 256),
    default: 8,
    section: "engine",
    help: "concurrent lanes, 1-256",
  },
  {
    flag: "max-context",
    key: "maxContext",
    value: "N|auto",
    parse: maxContext,
    shown: "auto; 8192 with several models",
    section: "engine",
    help:
      "the window of a request (prompt plus reply). `N`: each of the `--max-batch` + 2 sequences (at least 4) " +
      "gets its own KV buffer of N cells; values below 512 are raised to 512. `auto`: up to the model's " +
      "trained window, sized from free memory, per-lane buffers where they fit, else one shared pool " +
      "([design](design.md#kv-layout))",
  },
  {
    flag: "kv-pool",
    key: "kvPool",
    value: "N",
    parse: cells,
    section: "engine",
    help: "one shared KV pool of N cells that every sequence draws from; `--max-context` then caps the window",
  },
  {
    flag: "max-tokens",
    key: "maxTokens",
    value: "N",
    parse: whole(1),
    shown: "the rest of the window",
    section: "engine",
    help: "the reply cap of a request that names none; also the fill-in-the-middle default (else 128)",
  },
  {
    flag: "threads",
    key: "threads",
    value: "N",
    parse: whole(1),
    default: (): number => physicalCores(),
    shown: "physical cores, at most the cgroup's CPU quota",
    section: "engine",
    help: "compute threads of the worker's ggml threadpool",
  },
  {
    flag: "gpu-layers",
    key: "gpuLayers",
    value: "N|auto|all",
    parse: parseGpuLayers,
    default: "auto" as const,
    aliases: ["n-gpu-layers"],
    section: "gpu",
    help:
      "layers placed on the GPU, counted as llama.cpp counts them (the output layer first, then the repeating " +
      "layers from the last): `auto` as many as fit in the devices' free memory with their KV and a reserve, " +
      "the rest on the CPU; `all` (refused by name, before loading, when it does not fit); or a count. The " +
      "startup log says what went where ([design](design.md#gpu-offload))",
  },
  {
    flag: "no-gpu",
    key: "noGpu",
    section: "gpu",
    help: "every layer on the CPU, even where a GPU is found (= --gpu-layers 0); no GPU backend is loaded",
  },
  {
    flag: "device",
    key: "device",
    value: "NAME[,NAME]",
    parse: parseDeviceList,
    shown: "every GPU",
    section: "gpu",
    help: "the devices that take layers, by ggml name (`Vulkan0`, `CUDA0`; `superfluid check --devices` lists them); an unknown name is refused with the list",
  },
  {
    flag: "rpc",
    key: "rpc",
    value: "HOST:PORT[,HOST:PORT]",
    parse: rpcEndpoints,
    section: "gpu",
    help:
      "`superfluid rpc-worker`s whose devices take layers beside this machine's, in proportion to their memory " +
      "(`--tensor-split` to choose); each is asked for its protocol and devices at start, and one that cannot " +
      "serve stops the start naming it ([multi-machine](guides/multi-machine.md))",
  },
  {
    flag: "split-mode",
    key: "splitMode",
    value: "layer|row|none",
    parse: parseSplitMode,
    default: "layer" as const,
    section: "gpu",
    help: "with several GPUs: whole layers to each (layer), rows of each matrix (row), or all on the first (none)",
  },
  {
    flag: "tensor-split",
    key: "tensorSplit",
    value: "N,N,...",
    parse: parseTensorSplit,
    shown: "by free memory",
    section: "gpu",
    help: "with several GPUs: each device's share of the offloaded layers (3,1)",
  },
  {
    flag: "kv-offload",
    key: "kvOffload",
    negatable: true,
    default: true,
    section: "gpu",
    help: "keep the KV of offloaded layers on their GPU; --no-kv-offload keeps all KV on the host",
  },
  {
    flag: "prefill-budget",
    key: "prefillBudget",
    value: "N",
    parse: prefillBudget,
    default: 4096,
    section: "scheduling",
    help:
      "prompt tokens per tick across lanes, 64-4096, or 0 for the adaptive controller; each tick is still cut " +
      "to one 512-token micro-batch ([design](design.md#prefill-budget))",
  },
  {
    flag: "starvation-ticks",
    key: "starvationTicks",
    value: "N",
    parse: whole(0, 2 ** 31 - 1),
    default: 8,
    section: "scheduling",
    help:
      "queue aging: a waiting request moves up one class per N ticks; 0 = no aging " +
      "([design](design.md#aging-and-lane-caps))",
  },
  {
    flag: "class-lanes",
    key: "classLanes",
    value: "CLASS=N[,...]",
    parse: text,
    internal: true,
    shown: "uncapped",
    section: "scheduling",
    help: "at most N lanes per class, each 1..`--max-batch`; classes by name, alias or number (`background=2,agent=6`)",
  },
  {
    flag: "http-default-qos",
    key: "defaultQos",
    value: "CLASS",
    parse: qosClass,
    default: DEFAULT_QOS,
    shown: "`agent`",
    section: "http-policy",
    help:
      "the class of a request that names none: `interactive` (0), `completion` (1), `agent` (2), " +
      "`background` (3), or an alias",
  },
  {
    flag: "no-http-qos-header",
    key: "noQosHeader",
    internal: true,
    section: "http-policy",
    help: "ignore `x-superfluid-qos` (not even refused when invalid)",
  },
  {
    flag: "http-allow-batch-invariant",
    key: "allowBatchInvariant",
    section: "http-policy",
    help: "accept `x-superfluid-batch-invariant` (403 `admin_required` otherwise); it is then run like any request",
  },
  {
    flag: "nonstream-keepalive",
    key: "nonstreamKeepalive",
    value: "SEC",
    parse: num({ min: 0, max: 3600 }),
    default: 0,
    shown: "0 = off",
    section: "http-policy",
    help:
      "0-3600: a non-streamed reply commits 200 at admission and sends a space every SEC seconds until its " +
      "JSON; also the SSE keep-alive period ([API](api/openai.md#non-streaming-keep-alive))",
  },
  {
    flag: "fim-model",
    key: "fimModel",
    value: "MODEL",
    parse: text,
    section: "fim",
    help:
      "a path or reference loaded in its own worker; fill-in-the-middle requests to the served model run on it. " +
      "Refused at startup when its vocabulary lacks FIM tokens",
  },
  {
    flag: "fim-max-context",
    key: "fimMaxContext",
    value: "N",
    parse: whole(1),
    shown: "min(the main window, 8192)",
    section: "fim",
    help: "its tokens per lane",
  },
  {
    flag: "fim-max-batch",
    key: "fimMaxBatch",
    value: "N",
    parse: whole(1, 256),
    default: 2,
    section: "fim",
    help: "its lanes, 1-256",
  },
  {
    flag: "completion-deadline-ms",
    key: "completionDeadlineMs",
    aliases: ["request-timeout"],
    value: "N",
    parse: whole(0),
    default: 0,
    shown: "0 = none",
    section: "fim",
    help: "a FIM completion not started within N ms expires",
  },
  {
    flag: "completion-rate",
    key: "completionRate",
    value: "F",
    parse: num({ min: 0 }),
    default: 10,
    section: "fim",
    help: "FIM requests per second per client; 0 = unmetered",
  },
  {
    flag: "completion-burst",
    key: "completionBurst",
    value: "N",
    parse: whole(1),
    default: 20,
    section: "fim",
    help: "the per-client bucket's size, ≥ 1",
  },
  {
    flag: "temperature",
    key: "temperature",
    value: "F",
    parse: num({ min: 0, max: 2 }),
    internal: true,
    shown: "the model's, else 1.0",
    section: "model-lookup",
    help: "0-2",
  },
  {
    flag: "top-p",
    key: "topP",
    value: "F",
    parse: num({ min: 0, max: 1 }),
    internal: true,
    shown: "the model's",
    section: "model-lookup",
    help: "0-1",
  },
  {
    flag: "top-k",
    key: "topK",
    value: "N",
    parse: whole(0, 2 ** 31 - 1),
    internal: true,
    shown: "the model's",
    section: "model-lookup",
    help: "≥ 0",
  },
  {
    flag: "min-p",
    key: "minP",
    value: "F",
    parse: num({ min: 0, max: 1 }),
    internal: true,
    shown: "the model's",
    section: "model-lookup",
    help: "0-1",
  },
  {
    flag: "repeat-penalty",
    key: "repeatPenalty",
    value: "F",
    parse: num({ min: 0.01, max: 2 }),
    internal: true,
    shown: "the model's, else 1.0",
    section: "model-lookup",
    help: "0.01-2",
  },
  {
    flag: "sessions",
    key: "sessions",
    value: "DIR",
    parse: text,
    env: "SUPERFLUID_SESSIONS",
    default: (env: Env): string => join(superfluidHome(env), "sessions"),
    shown: "`$SUPERFLUID_HOME/sessions`, else `~/.superfluid/sessions`",
    section: "sessions",
    help: "the session store; one server per directory ([Files and folders](#the-sessions-directory))",
  },
  {
    flag: "sessions-cache",
    key: "sessionsCache",
    section: "sessions",
    help: "start a fresh session log on each start, keeping the previous one as `wal.log.prev`",
  },
  {
    flag: "files-max-bytes",
    key: "filesMaxBytes",
    value: "N",
    parse: whole(0),
    shown: "unbounded",
    section: "sessions",
    help:
      "bytes all `/v1/files` uploads may hold together, uploads in progress counted; an upload that would pass " +
      "it gets 413 `files_quota_exceeded` ([API](api/files.md)). One upload is at most 512 MiB either way",
  },
  {
    flag: "files-expiry",
    key: "filesExpirySec",
    value: "SEC",
    parse: whole(1, 2 ** 31 - 1),
    shown: "never",
    section: "sessions",
    help: "an uploaded file is gone SEC seconds after its upload (files already stored included)",
  },
  {
    flag: "files-sweep",
    key: "filesSweepSec",
    value: "SEC",
    // setInterval takes at most 2^31-1 ms.
    parse: whole(1, 2_147_483),
    default: 300,
    section: "sessions",
    help: "how often expired files are deleted from disk (they stop being served at expiry either way)",
  },
  {
    flag: "host-cache-mb",
    key: "hostCacheMb",
    value: "N",
    parse: whole(0),
    shown: "60% of the memory free once the model is loaded, at most 8 GiB",
    section: "prefix-cache",
    help: "host memory for prefixes that leave the KV pool; 0 = no host tier ([design](design.md#host-tier))",
  },
  {
    flag: "pressure-high",
    key: "pressureHigh",
    value: "PCT",
    parse: whole(1, 100),
    default: 85,
    section: "prefix-cache",
    help: "KV occupancy (percent of the pool's cells) at which cached prefixes leave the pool",
  },
  {
    flag: "pressure-low",
    key: "pressureLow",
    value: "PCT",
    parse: whole(0, 100),
    default: 70,
    section: "prefix-cache",
    help: "the occupancy they leave it down to; may not exceed `--pressure-high`",
  },
  {
    flag: "pin-budget-pct",
    key: "pinBudgetPct",
    value: "PCT",
    parse: whole(0, 100),
    default: 50,
    section: "prefix-cache",
    help:
      "0-100: the share of the KV pool's cells that prefixes pinned by Anthropic `cache_control` breakpoints may " +
      "hold together (shared prefixes counted once; the least recently pinned give way first). Pinned prefixes " +
      "stay in the pool through the pressure marks. 0 = pins are counted (and reported in `usage`) but protect " +
      "nothing ([design](design.md#pinned-prefixes), [API](api/anthropic.md#prompt-caching))",
  },
  {
    flag: "tui",
    key: "tui",
    negatable: true,
    // --tui changes nothing, so giving both is no contradiction: --no-tui wins.
    bothOff: true,
    internal: true,
    shown: "on in a terminal",
    section: "logging",
    help: "the live monitor ([tui](#tui)); never on when stdin or stdout is a pipe or a file. `--tui` changes nothing",
  },
  {
    flag: "drain-timeout",
    key: "drainTimeout",
    value: "SEC",
    parse: num({ min: 0 }),
    default: 30,
    section: "listener",
    help:
      "on SIGTERM or SIGINT, how long running generations may take to finish: readiness answers 503 at once, " +
      "new generations get 503 `server_draining` with Retry-After, and what still runs at the deadline is cut " +
      "([shutdown](#startup-and-shutdown)); a second signal stops at once",
  },
  {
    flag: "replica-id",
    key: "replicaId",
    value: "ID",
    parse: replicaId,
    default: () => defaultReplicaId(),
    shown: "the host name",
    env: "SUPERFLUID_REPLICA_ID",
    section: "listener",
    help:
      "the name every reply carries in `x-superfluid-replica` (letters, digits, `.` `_` `:` `-`; up to 128): which " +
      "replica behind a router served it ([scale-out](guides/scale-out.md))",
  },
  {
    flag: "ready-file",
    key: "readyFile",
    value: "PATH",
    parse: nonEmpty,
    section: "listener",
    help:
      "once the default model serves, its URL is written to PATH (atomically; removed on stop), " +
      "for scripts that wait for the server ([startup](#startup-and-shutdown))",
  },
  {
    flag: "log-dir",
    key: "logDir",
    value: "DIR",
    parse: nonEmpty,
    section: "logging",
    help: "every line also as a JSON object in `DIR/superfluid.<n>.jsonl`; access records go there only, off stderr",
  },
  {
    flag: "log-file",
    key: "logFile",
    value: "PATH",
    parse: nonEmpty,
    section: "logging",
    help: "the plain lines appended to PATH instead of stderr",
  },
  {
    flag: "verbose",
    key: "verbose",
    short: "v",
    section: "logging",
    help: "access lines add the reply's id and the wait for a lane: `... finish=stop id=chatcmpl-superfluid-7 wait=3ms`",
  },
  {
    flag: "quiet",
    key: "quiet",
    env: "SUPERFLUID_QUIET",
    section: "logging",
    help: "no access lines in the plain stream (stderr or `--log-file`)",
  },
  {
    flag: "speculate",
    key: "speculate",
    value: "off|auto|prompt-lookup|draft-model:MODEL",
    parse: speculate,
    internal: true,
    shown: "`off`",
    section: "speculation",
    // The table's text is a list of the strategies; --help sums them up.
    brief:
      "speculative decoding: prompt-lookup drafts from the lane's own context, draft-model:MODEL with a small " +
      "GGUF of the same vocabulary; auto = prompt-lookup where the model can drop a rejected draft, else plain",
    help:
      "`draft-model:MODEL`: drafts greedily with a small GGUF model of the same vocabulary (checked at start: same " +
      "size, same pieces), run beside the model in its worker with a KV of its own; verified the same way. MODEL " +
      "is a path, or an `org/repo[:TAG]` reference found in the `--model-dir` folders or the Hugging Face cache, " +
      "else [pulled](#pulling-models) at start (honouring `--offline`). " +
      "`prompt-lookup`: as above; a model that cannot cut a rejected draft off its KV (recurrent or hybrid, or " +
      "with sliding-window attention) refuses it at startup (exit 1, naming why). `auto`: `prompt-lookup` where " +
      "the model allows it, else plain decoding. With several models each resolves on its own",
  },
  {
    flag: "spec-draft-tokens",
    key: "draftTokens",
    value: "N",
    parse: whole(1, MAX_DRAFT_TOKENS),
    default: SPEC.draftTokens,
    internal: true,
    section: "speculation",
    help: `draft depth, 1-${MAX_DRAFT_TOKENS}`,
  },
  {
    flag: "spec-min-yield",
    key: "minYield",
    value: "X",
    parse: num({ min: 0 }),
    env: "SUPERFLUID_SPEC_MIN_YIELD",
    default: SPEC.minYield,
    internal: true,
    expert: true,
    section: "speculation",
    help:
      "≥ 0: a request whose drafts keep fewer than X tokens a drafting round stops drafting once judged; two " +
      "failing requests and none passing turn it off for the model for good. 0 = no floor",
  },
  {
    flag: "spec-yield-rounds",
    key: "yieldRounds",
    value: "N",
    parse: whole(1),
    env: "SUPERFLUID_SPEC_LANE_YIELD_ROUNDS",
    default: SPEC.yieldRounds,
    internal: true,
    expert: true,
    section: "speculation",
    help: "≥ 1: the drafting rounds after which a request's yield is judged",
  },
  {
    flag: "spec-throughput-gate",
    key: "throughputGate",
    negatable: true,
    env: "SUPERFLUID_SPEC_GATE",
    default: SPEC.throughputGate,
    internal: true,
    expert: true,
    section: "speculation",
    help:
      "per lane count, compare decode speed with and without drafts and draft only where speculation is " +
      "`--spec-min-speedup` times faster",
  },
  {
    flag: "spec-adaptive",
    key: "adaptive",
    negatable: true,
    env: "SUPERFLUID_SPEC_ADAPTIVE",
    default: SPEC.adaptive,
    internal: true,
    expert: true,
    section: "speculation",
    help:
      "the gate's probe also tries the draft depth halved down to 1 (4, 2, 1) and keeps the fastest, " +
      "per lane count; without the gate the depth is `--spec-draft-tokens`",
  },
  {
    flag: "spec-bitexact",
    key: "bitexact",
    negatable: true,
    internal: true,
    expert: true,
    refused: {
      message:
        "--spec-bitexact: llama.cpp has no batch-invariant kernels, so a speculative decode cannot be made " +
        "bit-exact with a plain one on this runtime (greedy output is already the same; " +
        "docs/cli.md#speculative-decoding)",
    },
    shown: "refused",
    section: "speculation",
    help:
      "llama.cpp has no batch-invariant kernels, so a speculative decode cannot be forced bit-exact with a plain " +
      "one (exit 2; `--no-spec-bitexact` is accepted); greedy output is the same anyway",
  },
  {
    flag: "spec-max-temperature",
    key: "specMaxTemperature",
    value: "F",
    parse: num({ min: 0, max: 2 }),
    expert: true,
    section: "speculation",
    help:
      "0-2: on a model that speculates, a temperature that came from the model's own defaults (its GGUF " +
      "`general.sampling.temp`) is capped at F; a request's `temperature` or `--temperature` never is",
  },
  {
    flag: "spec-min-speedup",
    key: "minSpeedup",
    value: "X",
    parse: speedup,
    env: "SUPERFLUID_SPEC_MIN_SPEEDUP",
    default: SPEC.minSpeedup,
    internal: true,
    expert: true,
    section: "speculation",
    help: "> 0: how many times faster than plain decoding speculation must be for the gate to let it draft",
  },
  {
    flag: "spec-gate-probe-tokens",
    key: "probeTokens",
    value: "N",
    parse: whole(1),
    env: "SUPERFLUID_SPEC_GATE_PROBE",
    default: SPEC.probeTokens,
    internal: true,
    expert: true,
    section: "speculation",
    help: "≥ 1: decode steps each side of a comparison measures",
  },
  {
    flag: "spec-gate-reprobe",
    key: "reprobe",
    value: "N",
    parse: whole(0),
    env: "SUPERFLUID_SPEC_GATE_REPROBE",
    default: SPEC.reprobe,
    internal: true,
    expert: true,
    section: "speculation",
    help:
      "≥ 0: after the gate turns speculation off for a lane count, measure again after N requests, " +
      "doubling each time; 0 = off for good",
  },
  {
    flag: "spec-gate-reprobe-max",
    key: "reprobeMax",
    value: "N",
    parse: whole(1),
    env: "SUPERFLUID_SPEC_GATE_REPROBE_MAX",
    shown: `${SPEC.reprobeMax}, or \`--spec-gate-reprobe\` when above`,
    internal: true,
    expert: true,
    section: "speculation",
    help: "the most requests between re-measurements; not below `--spec-gate-reprobe`",
  },
  {
    flag: "park",
    key: "park",
    negatable: true,
    default: false,
    section: "parking",
    help:
      "when a generation of a session (the session API) ends, seal its KV to `<sessions>/park/<session>.park`; " +
      "the next generation on that session restores it instead of prefilling the history again, across " +
      "restarts. Cannot be combined with `--sessions-cache`",
  },
  {
    flag: "park-budget-gb",
    key: "parkBudgetGb",
    value: "N",
    parse: num({ min: 0 }),
    default: 20,
    section: "parking",
    help: "size bound of each park directory: past it the artifacts written longest ago are deleted; 0 = unbounded",
  },
  {
    flag: "kv-bits",
    key: "kvBits",
    value: "N",
    parse: kvBits,
    default: F16_KV,
    shown: "`0` (f16)",
    internal: true,
    section: "engine",
    help: "KV cache precision: `0` = auto (f16), `16` = f16, `8` = q8_0 (half the bytes a token takes), `4` = q4_0 (a quarter), `84` = K q8_0, V q4_0. A quantized V needs flash attention ([quantized KV](#quantized-kv)); the draft and FIM models use the same types",
  },
  {
    flag: "cache-type-k",
    key: "cacheTypeK",
    short: "ctk",
    value: "TYPE",
    parse: kvType,
    internal: true,
    section: "engine",
    help: "the K cache's type, as llama-server's -ctk (f16, q8_0, q4_0, bf16, f32, q4_1, q5_0, q5_1, iq4_nl); beats --kv-bits",
  },
  {
    flag: "cache-type-v",
    key: "cacheTypeV",
    short: "ctv",
    value: "TYPE",
    parse: kvType,
    internal: true,
    section: "engine",
    help: "the V cache's type, as llama-server's -ctv; a quantized V needs flash attention; beats --kv-bits",
  },
  {
    flag: "park-lossy",
    key: "parkLossy",
    internal: true,
    expert: true,
    refused: { message: "the llamacpp runtime exports no lossy encoding" },
    section: "refused",
    help: "refused: llama.cpp exports no lossy encoding of a parked KV",
  },
  {
    flag: "prefix-blob-budget-mb",
    key: "prefixBlobBudgetMb",
    value: "N",
    parse: text,
    internal: true,
    expert: true,
    // A baseRT knob: llama.cpp's evicted prefixes are its own state exports, bounded by --host-cache-mb.
    refused: {
      message:
        "the llamacpp runtime keeps evicted prefixes as its own state exports and has no prefix blob store; " +
        "bound them with --host-cache-mb",
    },
    section: "refused",
    help: "refused: llama.cpp has no prefix blob store; bound evicted prefixes with --host-cache-mb",
  },
] as const satisfies readonly ServeFlagDecl[];

/** Handled by the parser itself rather than declared: they print the help. */
export const HELP_FLAGS = ["help", "help-all"] as const;
