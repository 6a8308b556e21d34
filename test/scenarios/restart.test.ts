// Scenario (issue #6): the daemon itself is SIGKILLed in the middle of a
// streamed greedy reply. Its worker must not outlive it; a new server on the
// same --sessions dir starts (the dead server's lock is recovered) and gives
// the same reply; the write-ahead log holds at least everything the client
// was sent, and the restart bumps the epoch. A second server on a --sessions
// dir in use refuses to start.
//
// The WAL (<sessions>/wal.log): one record per line, `<crc32 8 hex> <json>`,
// json = {session, event_id, epoch, ts_unix_ms, body}, body one of
// {"Created":{parent,params}}, {"Appended":{text,span}},
// {"Generated":{span,text,finish}}, {"EpochBump":{}}; finish 0 open, 1 end of
// turn, 2 max_tokens, 4 cancelled, 5 error.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  alive,
  childPids,
  FINISH,
  parseWal,
  postChat,
  ServerProcess,
  sessionsInOrder,
  streamChat,
  waitGone,
  type StreamResult,
  type WalRead,
} from "./support.ts";

const KILL_AFTER_CHUNKS = 5;
const SERVER_ARGS = (sessions: string) => ["--sessions", sessions, "--max-batch", "2", "--max-context", "2048"];

let sessions: string;
let model: string;
const servers: ServerProcess[] = [];
/** Worker pids seen, killed in afterAll if any survived. */
const workers: number[] = [];

beforeAll(() => {
  sessions = mkdtempSync(join(tmpdir(), "superfluid-restart-"));
});

afterAll(async () => {
  for (const s of servers) if (s.proc.exitCode === null && s.proc.signalCode === null) await s.killHard();
  for (const pid of workers) if (alive(pid)) process.kill(pid, "SIGKILL");
  rmSync(sessions, { recursive: true, force: true });
});

async function startServer(): Promise<ServerProcess> {
  const server = await ServerProcess.spawn(SERVER_ARGS(sessions));
  servers.push(server);
  const state = await server.waitHealthy();
  if (state !== "healthy") throw new Error(`the server did not come up (${state}); stderr:\n${server.stderr}`);
  workers.push(...childPids(server.pid));
  return server;
}

const request = () => ({
  model,
  messages: [{ role: "user", content: "tell me a story about the river and the old mountain" }],
  temperature: 0,
  ignore_eos: true,
  max_tokens: 1000,
});

let reference: string | undefined;
let killed: { stream: StreamResult; worker: number } | undefined;
/** wal.log as the killed server left it (undefined: there was none). */
let walAtKill: string | undefined;
let restarted: ServerProcess | undefined;

describe("daemon SIGKILLed mid-stream", () => {
  test("reference: a non-streamed greedy reply from a fresh server", async () => {
    const first = await startServer();
    const models = (await (await fetch(`${first.url}/v1/models`)).json()) as { data: { id: string }[] };
    model = models.data[0]!.id;
    const r = await postChat(first.url, request());
    expect(r.status).toBe(200);
    // A reply with no reasoning split keeps the WAL comparison below plain text against plain text.
    expect(r.json.choices[0].message.reasoning_content).toBeUndefined();
    expect(r.json.usage.completion_tokens).toBe(1000);
    reference = r.json.choices[0].message.content;
    expect(reference!.length).toBeGreaterThan(0);
  });

  test(`SIGKILL after ${KILL_AFTER_CHUNKS} chunks: the stream is cut, and the worker dies with its server within 3 s`, async () => {
    expect(reference).toBeDefined();
    const server = servers[0]!;
    const children = childPids(server.pid);
    expect(children).toHaveLength(1); // the worker
    const worker = children[0]!;
    const stream = await streamChat(server.url, request(), {
      chunks: KILL_AFTER_CHUNKS,
      action: () => void server.proc.kill("SIGKILL"),
    });
    await server.proc.exited;
    killed = { stream, worker };
    walAtKill = existsSync(join(sessions, "wal.log")) ? readFileSync(join(sessions, "wal.log"), "utf8") : undefined;
    const gone = await waitGone(worker, 3000);
    if (!gone) process.kill(worker, "SIGKILL");
    expect(gone).toBe(true);
    // What the client got is a clean, non-empty prefix of the reference, cut short.
    expect(stream.status).toBe(200);
    expect(stream.content.length).toBeGreaterThan(0);
    expect(reference!.startsWith(stream.content)).toBe(true);
    expect(stream.content.length).toBeLessThan(reference!.length);
    expect(stream.sse.events.filter((e) => e.choices?.[0]?.finish_reason)).toHaveLength(0);
  });

  test("a restart on the same --sessions dir starts and gives the reference reply", async () => {
    expect(killed).toBeDefined();
    restarted = await startServer();
    const r = await postChat(restarted.url, request());
    expect(r.status).toBe(200);
    expect(r.json.choices[0].message.content).toBe(reference);
    expect(r.json.choices[0].finish_reason).toBe("length");
  });

  test("nothing acknowledged was lost: the killed request's Generated text starts with everything the client got", () => {
    expect(killed).toBeDefined();
    if (walAtKill === undefined) throw new Error(`no ${join(sessions, "wal.log")} after the kill`);
    const wal = parseWal(walAtKill);
    // The kill may tear the last line; nothing before it may be bad.
    const badBeforeTail = wal.bad.filter((b) => b.line < walAtKill!.split("\n").filter((l) => l !== "").length - 1);
    expect(badBeforeTail).toEqual([]);
    const bySession = new Map<string, typeof wal.records>();
    for (const r of wal.records) bySession.set(r.session, [...(bySession.get(r.session) ?? []), r]);
    const open = [...bySession].filter(
      ([, rs]) =>
        rs.some((r) => r.kind === "Generated") &&
        rs.every((r) => r.kind !== "Generated" || r.body.finish === FINISH.open),
    );
    const created = sessionsInOrder(wal.records);
    if (open.length !== 1) {
      throw new Error(
        `want exactly one session with Generated events all open (finish 0); found ${open.length} among ${[...bySession.keys()].length} sessions:\n${walAtKill.slice(0, 3000)}`,
      );
    }
    const [session, records] = open[0]!;
    expect(created.indexOf(session)).toBe(1); // the second request: the reference came first
    // The reference request finished at max_tokens and its session says so.
    const referenceGenerated = bySession.get(created[0]!)!.filter((r) => r.kind === "Generated");
    expect(referenceGenerated.some((r) => r.body.finish === FINISH.maxTokens)).toBe(true);
    expect(referenceGenerated.map((r) => r.body.text).join("")).toBe(reference!);
    const generated = records
      .filter((r) => r.kind === "Generated")
      .map((r) => r.body.text as string)
      .join("");
    const got = killed!.stream.content;
    if (!generated.startsWith(got)) {
      throw new Error(
        `the WAL holds ${generated.length} chars of the killed reply, the client got ${got.length}:\nwal:    ${JSON.stringify(generated.slice(0, 300))}\nclient: ${JSON.stringify(got.slice(0, 300))}`,
      );
    }
    expect(reference!.startsWith(generated)).toBe(true);
  });

  test("the restart appends an EpochBump with a higher epoch before its first session", () => {
    expect(restarted).toBeDefined();
    if (walAtKill === undefined) throw new Error("no wal.log after the kill");
    const before = parseWal(walAtKill);
    const now: WalRead = parseWal(readFileSync(join(sessions, "wal.log"), "utf8"));
    const maxEpochBefore = Math.max(...before.records.map((r) => r.epoch));
    // Records the restarted server wrote: those not already in the file at the kill.
    const key = (r: { session: string; event_id: number; epoch: number; kind: string }) =>
      `${r.session}/${r.event_id}/${r.epoch}/${r.kind}`;
    const old = new Set(before.records.map(key));
    const fresh = now.records.filter((r) => !old.has(key(r)));
    const bump = fresh.findIndex((r) => r.kind === "EpochBump");
    if (bump < 0) throw new Error(`no EpochBump after the restart; new records: ${JSON.stringify(fresh.slice(0, 10))}`);
    expect(fresh[bump]!.epoch).toBeGreaterThan(maxEpochBefore);
    const firstCreated = fresh.findIndex((r) => r.kind === "Created");
    expect(firstCreated).toBeGreaterThan(bump);
    // Everything the restarted server wrote carries the new epoch.
    for (const r of fresh.slice(bump)) expect(r.epoch).toBeGreaterThanOrEqual(fresh[bump]!.epoch);
    // The reply after the restart is in its own session, finished at max_tokens.
    const after = fresh.slice(bump).filter((r) => r.kind === "Generated");
    expect(after.some((r) => r.body.finish === FINISH.maxTokens)).toBe(true);
    // No bad line but (at most) the torn tail the kill left, untouched.
    const tornAtKill = new Set(before.bad.map((b) => b.text));
    expect(now.bad.filter((b) => !tornAtKill.has(b.text))).toEqual([]);
  });

  test("a second server on the same --sessions dir exits 1 saying the directory is in use", async () => {
    expect(restarted).toBeDefined();
    expect(restarted!.proc.exitCode).toBeNull(); // the one holding the directory still runs
    const second = await ServerProcess.spawn(SERVER_ARGS(sessions));
    servers.push(second);
    const state = await second.waitHealthy(30_000);
    if (state !== "exited") {
      await second.killHard();
      throw new Error(`a second server on a --sessions dir in use did not exit (${state}); stderr:\n${second.stderr}`);
    }
    expect(await second.proc.exited).toBe(1);
    await Bun.sleep(50); // the last of stderr
    expect(second.stderr).toMatch(/in use|locked/i);
    expect(second.stderr).toContain(sessions);
    // The running server is unharmed.
    const r = await postChat(restarted!.url, { ...request(), max_tokens: 5 });
    expect(r.status).toBe(200);
  });
});
