// SessionStore.onDurable: what the session API's subscriptions and session
// index hear. A record is heard only once a flush has made it durable, in log
// order, exactly once; records a failed write dropped are never heard.
import { expect, test } from "bun:test";
import { FINISH, type SessionEvent } from "../../src/session-log/store.ts";
import { fillableDisk, useTempStores } from "../support/temp-stores.ts";

const open = useTempStores("sf-durable-");
const gen = (text: string) => ({ Generated: { span: [1], text, finish: FINISH.open } });
const ids = (events: SessionEvent[]) => events.map((e) => `${e.session}:${e.event_id}`);

test("records are heard after their flush, in order, once", async () => {
  const store = await open();
  const heard: SessionEvent[] = [];
  store.onDurable((e) => heard.push(e));
  const s = store.create({});
  store.append(s, gen("a"));
  expect(heard).toEqual([]); // buffered, not durable
  const first = store.flush();
  store.append(s, gen("b")); // after the flush was asked for: goes with the next one
  await first;
  expect(ids(heard)).toEqual([`${s}:0`, `${s}:1`]);
  await store.flush();
  expect(ids(heard)).toEqual([`${s}:0`, `${s}:1`, `${s}:2`]);
  await store.flush();
  expect(heard.length).toBe(3);
});

test("forks start at their first own event id, store-wide records are heard too", async () => {
  const store = await open();
  const heard: SessionEvent[] = [];
  store.onDurable((e) => heard.push(e));
  const parent = store.create({});
  store.append(parent, gen("a"));
  const fork = store.createWith({ Forked: { parent, fork_at: 2, params: {} } }, 2);
  expect(fork.event_id).toBe(2);
  expect(store.append(fork.session, gen("b"))).toBe(3);
  store.appendGlobal({ SessionMeta: { session: parent, version: 1, title: "t", archived: false } });
  await store.flush();
  expect(ids(heard)).toEqual([`${parent}:0`, `${parent}:1`, `${fork.session}:2`, `${fork.session}:3`, "0:0"]);
  expect(store.read(fork.session).map((e) => e.event_id)).toEqual([2, 3]);
});

test("records a failed write dropped are never heard; later ones are", async () => {
  const disk = fillableDisk();
  const store = await open(disk.opts);
  const heard: SessionEvent[] = [];
  store.onDurable((e) => heard.push(e));
  disk.full = true;
  store.create({});
  await expect(store.flush()).rejects.toThrow(/ENOSPC/);
  expect(heard).toEqual([]);
  disk.full = false;
  const s = store.create({});
  await store.flush();
  expect(ids(heard)).toEqual([`${s}:0`]);
});
