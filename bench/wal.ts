// Session log benchmark: the commit pattern the server produces while decoding, on
// three back ends, plus the time to open (replay) a large log.
//
// Workload per "tick": 8 concurrent sessions each append one Generated record of one
// token, then one group commit (docs/design.md#group-commit: every record is synced before its
// event reaches the client). In the server a tick comes every 10-15 ms; here they run
// back to back.
//   log       src/sessions SessionStore: append-only wal.log, write + fdatasync/fsync per commit
//   sqlite    bun:sqlite, journal_mode=WAL, synchronous=FULL, one transaction of 8 INSERTs per commit
//   log-nosync  the same log without a sync: the floor (not durable)
// Rounds interleave the systems (order rotated each round) in fresh directories;
// per system the medians over rounds of commits/s and of each round's p50/p99 commit
// latency are reported, with the time the event loop is blocked per commit.
//
//   bun bench/wal.ts [--ticks 2000] [--rounds 5] [--sessions 8] [--replay 100000] [--dir DIR] [--json out.json]
//
// --dir must be on the disk you care about (default: the OS temp folder); a tmpfs
// makes every sync free and the comparison meaningless.
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FINISH, type EventBody } from "../src/session-log/events.ts";
import { SessionStore } from "../src/session-log/store.ts";

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}
const ticks = Number(flag("ticks", "2000"));
const rounds = Number(flag("rounds", "5"));
const sessions = Number(flag("sessions", "8"));
const replayRecords = Number(flag("replay", "100000"));
const baseDir = flag("dir", tmpdir());
const jsonOut = flag("json", "");

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** A one-token Generated record like the decode loop writes (token id, its text). */
const tokenBody = (tick: number, lane: number): EventBody => ({
  Generated: { span: [1000 + ((tick * 31 + lane * 7) % 30000)], text: ` w${(tick + lane) % 997}`, finish: FINISH.open },
});

interface RoundResult {
  commitsPerSec: number;
  p50us: number;
  p99us: number;
  /** Median time per commit spent in synchronous code (the event loop blocked). */
  blockedP50us: number;
}

function summarize(latUs: number[], blockedUs: number[], wallMs: number): RoundResult {
  return {
    commitsPerSec: (latUs.length * 1000) / wallMs,
    p50us: pct(latUs, 50),
    p99us: pct(latUs, 99),
    blockedP50us: pct(blockedUs, 50),
  };
}

async function runLog(dir: string, fsync: boolean): Promise<RoundResult> {
  const store = await SessionStore.open(dir, { fsync });
  const ids = Array.from({ length: sessions }, (_, i) => store.create({ model: "bench", lane: i }));
  await store.flush();
  const lat: number[] = [];
  const blocked: number[] = [];
  const t0 = performance.now();
  for (let t = 0; t < ticks; t++) {
    const a = performance.now();
    for (let l = 0; l < sessions; l++) store.append(ids[l]!, tokenBody(t, l));
    const p = store.flush();
    const b = performance.now();
    await p;
    const c = performance.now();
    lat.push((c - a) * 1000);
    blocked.push((b - a) * 1000);
  }
  const wall = performance.now() - t0;
  await store.close();
  return summarize(lat, blocked, wall);
}

function runSqlite(dir: string): RoundResult {
  const db = new Database(join(dir, "sessions.db"), { create: true });
  db.run("PRAGMA journal_mode = WAL");
  db.run("PRAGMA synchronous = FULL");
  db.run(
    "CREATE TABLE events (session INTEGER NOT NULL, event_id INTEGER NOT NULL, epoch INTEGER NOT NULL, ts_unix_ms INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session, event_id))",
  );
  const insert = db.prepare("INSERT INTO events VALUES (?, ?, ?, ?, ?)");
  const next = new Array<number>(sessions).fill(1);
  for (let l = 0; l < sessions; l++)
    insert.run(
      l + 1,
      0,
      1,
      Date.now(),
      JSON.stringify({ Created: { parent: null, params: { model: "bench", lane: l } } }),
    );
  const commit = db.transaction((t: number) => {
    const now = Date.now();
    for (let l = 0; l < sessions; l++) insert.run(l + 1, next[l]!++, 1, now, JSON.stringify(tokenBody(t, l)));
  });
  const lat: number[] = [];
  const t0 = performance.now();
  for (let t = 0; t < ticks; t++) {
    const a = performance.now();
    commit(t);
    lat.push((performance.now() - a) * 1000);
  }
  const wall = performance.now() - t0;
  insert.finalize();
  db.close();
  return summarize(lat, lat, wall); // synchronous: the loop is blocked for the whole commit
}

const systems = {
  log: (d: string) => runLog(d, true),
  sqlite: (d: string) => Promise.resolve(runSqlite(d)),
  "log-nosync": (d: string) => runLog(d, false),
} as const;
type SystemName = keyof typeof systems;
const names = Object.keys(systems) as SystemName[];

let fsType = "";
try {
  const out = Bun.spawnSync(["df", "-T", baseDir]).stdout.toString().trim().split("\n").pop()!.split(/\s+/);
  fsType = `${out[1]} (${out[0]})`;
} catch {}
console.error(
  `# ${ticks} ticks x ${sessions} sessions, ${rounds} rounds, dir ${baseDir} ${fsType}; ${process.platform}/${process.arch}, bun ${Bun.version}`,
);

const results: Record<SystemName, RoundResult[]> = { log: [], sqlite: [], "log-nosync": [] };
// One unmeasured warm-up pass of each.
for (const name of names) {
  const d = mkdtempSync(join(baseDir, "sf-walbench-"));
  try {
    await systems[name](d);
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
}
for (let r = 0; r < rounds; r++) {
  for (let k = 0; k < names.length; k++) {
    const name = names[(r + k) % names.length]!;
    const d = mkdtempSync(join(baseDir, "sf-walbench-"));
    try {
      const res = await systems[name](d);
      results[name].push(res);
      console.error(
        `round ${r + 1} ${name.padEnd(10)} ${res.commitsPerSec.toFixed(0).padStart(7)} commits/s  p50 ${res.p50us.toFixed(0).padStart(6)} us  p99 ${res.p99us.toFixed(0).padStart(6)} us`,
      );
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  }
}

// Replay: open a log of replayRecords records (8 sessions of one-token Generated records).
const replayDir = mkdtempSync(join(baseDir, "sf-walbench-replay-"));
let replay: { records: number; bytes: number; openMs: number[] } = { records: 0, bytes: 0, openMs: [] };
try {
  {
    const store = await SessionStore.open(replayDir, { fsync: false });
    const ids = Array.from({ length: sessions }, (_, i) => store.create({ model: "bench", lane: i }));
    for (let t = 0; store.stats.appended < replayRecords; t++) {
      for (let l = 0; l < sessions && store.stats.appended < replayRecords; l++) store.append(ids[l]!, tokenBody(t, l));
      if (t % 1000 === 0) await store.flush();
    }
    await store.close();
  }
  const bytes = statSync(join(replayDir, "wal.log")).size;
  const openMs: number[] = [];
  let records = 0;
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    const store = await SessionStore.open(replayDir); // replay + verify + the EpochBump's write and sync
    openMs.push(performance.now() - t0);
    records = store.recovered.records;
    await store.close();
  }
  replay = { records, bytes, openMs };
} finally {
  rmSync(replayDir, { recursive: true, force: true });
}

const label: Record<SystemName, string> = {
  log: "(a) log, fdatasync per commit",
  sqlite: "(b) bun:sqlite WAL, synchronous=FULL",
  "log-nosync": "(c) log, no sync (floor)",
};
const summary = names.map((n) => ({
  system: n,
  commitsPerSec: median(results[n].map((x) => x.commitsPerSec)),
  p50us: median(results[n].map((x) => x.p50us)),
  p99us: median(results[n].map((x) => x.p99us)),
  blockedP50us: median(results[n].map((x) => x.blockedP50us)),
}));
console.log(`| system | commits/s | p50 commit (µs) | p99 commit (µs) | event loop blocked per commit, p50 (µs) |`);
console.log(`|---|---:|---:|---:|---:|`);
for (const s of summary)
  console.log(
    `| ${label[s.system]} | ${s.commitsPerSec.toFixed(0)} | ${s.p50us.toFixed(0)} | ${s.p99us.toFixed(0)} | ${s.blockedP50us.toFixed(1)} |`,
  );
console.log("");
console.log(
  `Open (replay and verify) of a ${replay.records}-record log (${(replay.bytes / 1e6).toFixed(1)} MB): median ${median(replay.openMs).toFixed(0)} ms (min ${Math.min(...replay.openMs).toFixed(0)}, max ${Math.max(...replay.openMs).toFixed(0)}) over ${replay.openMs.length} opens`,
);
if (jsonOut)
  writeFileSync(
    jsonOut,
    JSON.stringify({ ticks, rounds, sessions, dir: baseDir, fsType, results, summary, replay }, null, 2),
  );
