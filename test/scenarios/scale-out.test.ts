// Three replicas on loopback behind HAProxy from Debian's package
// (docs/guides/scale-out.md): 6 agent sessions of 20 turns over a ~2k-token
// system prompt they share, routed by the session-key hash and by round
// robin (the cache share of each), leastconn against round robin while one
// replica is busy (where the interactive turns land, their first-token
// times), and one replica killed mid-run (every turn still answered after
// the router's retry, its sessions served cold elsewhere, its log recovered
// when it comes back). Prints the table bench/README.md#scale-out holds.
// Events, not clocks: HAProxy's own view of each server (its stats socket)
// says when a replica is down or back; times are reported, never asserted.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPLICA_HEADER } from "../../src/http/replica.ts";
import { cacheShare, quantile, runSessions, type Turn } from "../support/agent-sessions.ts";
import type { FixtureKind } from "../../src/fixtures/index.ts";
import { freePorts, prose } from "./support.ts";
import {
  HAPROXY,
  haproxyConfig,
  killReplica,
  type Frontend,
  type Replica,
  type Router,
  startReplica,
  startRouter,
  stopReplica,
} from "../support/replica-fleet.ts";

// The fixture served: tiny-random in the suite; SCALE_OUT_FIXTURE=large-vocab for bench/README.md's table,
// where a prefill costs enough for the first-token times to show what the cache saves.
const FIXTURE = (process.env.SCALE_OUT_FIXTURE ?? "tiny-random") as FixtureKind;
// SCALE_OUT_ROUNDS=3 for the bench: rounds of both modes, alternating which goes first, pooled.
const ROUNDS = Number(process.env.SCALE_OUT_ROUNDS ?? 1);
const SESSIONS = 6;
const TURNS = 20;
const SYSTEM_WORDS = 1800;
const USER_WORDS = 40;
const REPLY_TOKENS = 8;
// Every replica: lanes for the 6 sessions' turns and a busy load, windows for a whole session.
const LANES = 6;
const REPLICA_FLAGS = ["--max-batch", String(LANES), "--max-context", "4096"];

const work = mkdtempSync(join(tmpdir(), "sf-scale-out-"));
const replicas: Replica[] = [];
let router: Router | undefined;
let frontends: Record<"affinity" | "rr" | "lc", Frontend>;
let model = "";
const table: string[] = [];

const url = (f: Frontend) => `http://127.0.0.1:${f.port}`;

beforeAll(async () => {
  if (!HAPROXY) return;
  const ports = await freePorts(6);
  for (let i = 0; i < 3; i++)
    replicas.push(await startReplica(`r${i}`, ports[i]!, join(work, `r${i}`), FIXTURE, REPLICA_FLAGS));
  frontends = {
    affinity: { name: "affinity", port: ports[3]!, balance: "hdr(x-superfluid-session-key)" },
    rr: { name: "rr", port: ports[4]!, balance: "roundrobin" },
    lc: { name: "lc", port: ports[5]!, balance: "leastconn" },
  };
  router = await startRouter(work, haproxyConfig(work, Object.values(frontends), replicas), ["affinity", "rr", "lc"]);
  for (const r of replicas) await router.waitFor(r.id, "UP");
  model = ((await (await fetch(`${replicas[0]!.url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
});

afterAll(async () => {
  await router?.stop();
  await Promise.all(replicas.map((r) => stopReplica(r)));
  rmSync(work, { recursive: true, force: true });
  if (table.length > 0) console.log(`\nscale-out (3 replicas, HAProxy):\n${table.join("\n")}\n`);
});

const ms = (v: number) => `${Math.round(v)} ms`;
const firstTokens = (turns: Turn[]) => turns.flatMap((t) => (t.ttftMs === undefined ? [] : [t.ttftMs]));

describe.skipIf(!HAPROXY)("scale-out behind HAProxy", () => {
  test("affinity by session key keeps each session on one replica and more of its prompt cached than round robin", async () => {
    const plan = { model, sessions: SESSIONS, turns: TURNS, systemWords: SYSTEM_WORDS, userWords: USER_WORDS };
    const common = { ...plan, maxTokens: REPLY_TOKENS, stream: true };
    // A warm-up through every replica first (its KV pool touched, its code paths run), then the two modes in
    // alternating order round after round, so neither is always the one that runs first.
    await runSessions({ ...common, turns: 2, url: url(frontends.rr), run: "warm-up" });
    const affinity: Turn[] = [];
    const rr: Turn[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const modes = [
        async () =>
          affinity.push(...(await runSessions({ ...common, url: url(frontends.affinity), run: `hash${round}` }))),
        async () => rr.push(...(await runSessions({ ...common, url: url(frontends.rr), run: `rr${round}` }))),
      ];
      for (const mode of round % 2 === 0 ? modes : modes.reverse()) await mode();
    }
    for (const turns of [affinity, rr]) {
      expect(turns).toHaveLength(ROUNDS * SESSIONS * TURNS);
      expect(turns.filter((t) => t.status !== 200)).toEqual([]);
    }
    // Each session stays on the replica its key hashes to; round robin moves sessions between replicas.
    const placements = (turns: Turn[]) => new Set(turns.map((t) => `${t.key}@${t.replica}`));
    expect(placements(affinity).size).toBe(ROUNDS * SESSIONS);
    expect(placements(rr).size).toBeGreaterThan(ROUNDS * SESSIONS);
    const [a, b] = [cacheShare(affinity), cacheShare(rr)];
    expect(a).toBeGreaterThan(b);
    const prompts = affinity.map((t) => t.prompt);
    const spread = (turns: Turn[]) =>
      replicas.map((r) => new Set(turns.filter((t) => t.replica === r.id).map((t) => t.key)).size).join("/");
    const row = (name: string, turns: Turn[], share: number) => {
      const ft = firstTokens(turns);
      return `| ${name} | ${spread(turns)} | ${(share * 100).toFixed(1)}% | ${ms(quantile(ft, 0.5))} | ${ms(quantile(ft, 0.95))} |`;
    };
    table.push(
      `${FIXTURE}; ${ROUNDS} round(s) of ${SESSIONS} sessions x ${TURNS} turns per mode, prompts ${Math.min(...prompts)}-${Math.max(...prompts)} tokens, ${REPLY_TOKENS}-token replies`,
      "",
      "| routing | sessions on r0/r1/r2 (all rounds) | prompt tokens from cache | first token p50 | p95 |",
      "|---|---|---|---|---|",
      row("session-key hash (consistent)", affinity, a),
      row("round robin", rr, b),
    );
  });

  test("one replica with every lane busy: leastconn sends the next turns elsewhere, round robin queues some there", async () => {
    const busyReplica = replicas[0]!;
    const interactive = 12;
    const rows: string[] = [];
    for (const f of [frontends.lc, frontends.rr]) {
      // A long generation on each of r0's lanes, pinned through the router so they count in HAProxy's
      // connections: a turn round robin sends there waits for a lane (same QoS class: nothing is preempted).
      const busy = new AbortController();
      let started = 0;
      let allStarted!: () => void;
      const running = new Promise<void>((r) => (allStarted = r));
      const streams = Array.from({ length: LANES }, async (_, i) => {
        const res = await fetch(`${url(f)}/v1/chat/completions`, {
          method: "POST",
          signal: busy.signal,
          headers: { "content-type": "application/json", "x-pin": "1" },
          body: JSON.stringify({
            model,
            messages: [{ role: "user", content: prose(90 + i, 200) }],
            max_tokens: 3000,
            ignore_eos: true,
            stream: true,
          }),
        });
        expect(res.headers.get(REPLICA_HEADER)).toBe(busyReplica.id);
        let counted = false;
        try {
          for await (const chunk of res.body!.pipeThrough(new TextDecoderStream())) {
            if (!counted && chunk.includes('"content"')) {
              counted = true;
              if (++started === LANES) allStarted();
            }
          }
        } catch {
          // aborted once the interactive turns are done
        }
      });
      await running;
      const turns = await runSessions({
        url: url(f),
        model,
        run: `busy-${f.name}`,
        sessions: 3,
        turns: interactive / 3,
        systemWords: 400,
        userWords: USER_WORDS,
        maxTokens: REPLY_TOKENS,
        stream: true,
      });
      busy.abort();
      await Promise.all(streams);
      expect(turns.filter((t) => t.status !== 200)).toEqual([]);
      const onBusy = turns.filter((t) => t.replica === busyReplica.id).length;
      if (f.balance === "leastconn") expect(onBusy).toBe(0);
      else expect(onBusy).toBeGreaterThan(0);
      const ft = firstTokens(turns);
      rows.push(
        `| ${f.balance} | ${onBusy} of ${turns.length} | ${ms(quantile(ft, 0.5))} | ${ms(quantile(ft, 0.95))} | ${ms(Math.max(...ft))} |`,
      );
    }
    table.push(
      "",
      `| r0 running ${LANES} long generations (all its lanes) | turns sent to r0 | first token p50 | p95 | max |`,
      "|---|---|---|---|---|",
      ...rows,
    );
  });

  test("a replica killed mid-run: no turn fails, its sessions go on cold elsewhere, its log comes back", async () => {
    // The replica session 0's key hashes to is the one killed, once every session has had 4 turns.
    let victim: Replica | undefined;
    let servedBeforeKill = 0;
    let killed = false;
    const turns = await runSessions({
      url: url(frontends.affinity),
      model,
      run: "kill",
      sessions: SESSIONS,
      turns: 10,
      systemWords: SYSTEM_WORDS,
      userWords: USER_WORDS,
      maxTokens: REPLY_TOKENS,
      stream: false,
      onTurn: async (_turn, done) => {
        if (killed || done.length < SESSIONS * 4) return;
        killed = true;
        const id = done.find((d) => d.session === 0)!.replica;
        victim = replicas.find((r) => r.id === id)!;
        servedBeforeKill = done.filter((d) => d.replica === id).length;
        await killReplica(victim);
      },
    });
    expect(victim).toBeDefined();
    expect(turns.filter((t) => t.status !== 200)).toEqual([]);
    expect(turns).toHaveLength(SESSIONS * 10);
    // Each session that lived on the victim moved to one other replica, where its first turn found no history cached.
    const moved = [...new Set(turns.filter((t) => t.replica === victim!.id).map((t) => t.session))];
    expect(moved).toContain(0);
    const coldPrompts: string[] = [];
    for (const s of moved) {
      const mine = turns.filter((t) => t.session === s).sort((x, y) => x.turn - y.turn);
      const at = mine.findIndex((t) => t.replica !== victim!.id);
      expect(at).toBeGreaterThan(0);
      const [before, first] = [mine[at - 1]!, mine[at]!];
      // Cold for its history: at most the shared system prompt was cached there.
      expect(first.cached).toBeLessThan(before.prompt);
      for (const later of mine.slice(at)) expect(later.replica).not.toBe(victim!.id);
      coldPrompts.push(`${first.cached}/${first.prompt}`);
    }
    // Back on the same port and sessions folder: the log it had is replayed, and the router sends its keys back.
    await router!.waitFor(victim!.id, "DOWN");
    const index = replicas.indexOf(victim!);
    const back = await startReplica(victim!.id, victim!.port, victim!.sessions, FIXTURE, REPLICA_FLAGS);
    replicas[index] = back;
    expect(back.recovered.records).toBeGreaterThan(0);
    expect(back.recovered.sessions).toBeGreaterThanOrEqual(servedBeforeKill);
    await router!.waitFor(back.id, "UP");
    const again = await fetch(`${url(frontends.affinity)}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-superfluid-session-key": "kill-agent-0" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: "back" }], max_tokens: 2 }),
    });
    expect(again.status).toBe(200);
    expect(again.headers.get(REPLICA_HEADER)).toBe(victim!.id);
    await again.json();
    table.push(
      "",
      `killed ${victim!.id} (SIGKILL) after ${servedBeforeKill} turns it served; ${turns.length} of ${turns.length} turns answered 200; ` +
        `${moved.length} sessions moved, first turn elsewhere cached/prompt ${coldPrompts.join(", ")}; ` +
        `restarted: ${back.recovered.sessions} sessions, ${back.recovered.records} records replayed`,
    );
  });
});
