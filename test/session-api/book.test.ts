// The session book (src/session-api/book.ts): sessions by id over one log, a
// fork's history, views dropped past MAX_VIEWS and loaded again from the log,
// and views of sessions another writer (an HTTP generation) appends to.
import { expect, test } from "bun:test";
import { MAX_VIEWS, SessionBook } from "../../src/session-api/book.ts";
import { FINISH } from "../../src/session-log/store.ts";
import { fillableDisk, useTempStores } from "../support/temp-stores.ts";

const open = useTempStores("sf-book-");
const PARAMS = { temperature: 0, top_p: 1, min_p: 0, top_k: 0, seed: 0 };
const msg = (text: string) => ({ Message: { role: 1, text, span: [1, 2] } });

test("a fork's view holds its parent's events before the fork point, then its own", async () => {
  const store = await open();
  const book = new SessionBook(store);
  const parent = book.create({ Created: { parent: null, params: { ...PARAMS } } }, 0, PARAMS);
  await book.append(parent, msg("a"));
  await book.append(parent, msg("b"));
  const fork = book.create(
    { Forked: { parent: parent.header.id, fork_at: 2, params: { ...PARAMS } } },
    2,
    PARAMS,
    parent.events.slice(0, 2),
  );
  await book.append(fork, msg("c"));
  await store.flush();
  // A second book reads both from the log, as after a restart.
  const fresh = new SessionBook(store);
  const view = await fresh.view(fork.header.id);
  expect(view.events.map((e) => [e.session, e.event_id])).toEqual([
    [parent.header.id, 0],
    [parent.header.id, 1],
    [fork.header.id, 2],
    [fork.header.id, 3],
  ]);
  expect(fresh.header(fork.header.id)).toMatchObject({
    parent: parent.header.id,
    forkAt: 2,
    events: 4,
    source: "session",
  });
  book.close();
  fresh.close();
});

test("past MAX_VIEWS the least recently used views are dropped and reload from the log; views in use stay", async () => {
  const store = await open();
  const busy = new Set<number>();
  const book = new SessionBook(store, (s) => busy.has(s));
  const first = book.create({ Created: { parent: null, params: { ...PARAMS } } }, 0, PARAMS);
  const second = book.create({ Created: { parent: null, params: { ...PARAMS } } }, 0, PARAMS);
  busy.add(second.header.id);
  await book.append(first, msg("kept in the log"));
  for (let i = 0; i < MAX_VIEWS; i++) book.create({ Created: { parent: null, params: { ...PARAMS } } }, 0, PARAMS);
  await store.flush();
  // The first was dropped (and released in the store); the busy second was not.
  expect(store.isLive(first.header.id)).toBe(false);
  expect(store.isLive(second.header.id)).toBe(true);
  expect(await book.view(second.header.id)).toBe(second);
  const again = await book.view(first.header.id);
  expect(again).not.toBe(first);
  expect(again.events.map((e) => e.event_id)).toEqual([0, 1]);
  const next = await book.append(again, msg("after the reload"));
  expect(next.event_id).toBe(2);
  book.close();
});

/**
 * A book over a fresh store holding one session an HTTP request writes (created and given a prompt, still open), and
 * the book's view of it.
 */
async function httpSessionInBook() {
  const store = await open();
  const book = new SessionBook(store);
  const http = store.create({ model: "m", sampling: PARAMS });
  store.append(http, { Appended: { text: "p", span: [5] } });
  await store.flush();
  return { store, book, http, view: await book.view(http) };
}

test("a view of a session another writer appends to follows its durable records; it is busy while that writer holds it", async () => {
  const { store, book, http, view } = await httpSessionInBook();
  expect(book.header(http)?.source).toBe("http");
  expect(() => book.checkWritable(view)).toThrow(/SessionBusy/);
  store.append(http, { Generated: { span: [6], text: "x", finish: FINISH.open } });
  store.append(http, { Generated: { span: [], text: "", finish: FINISH.endOfTurn } });
  store.release(http);
  await store.flush();
  expect(view.events.map((e) => e.event_id)).toEqual([0, 1, 2, 3]);
  expect(() => book.checkWritable(view)).not.toThrow();
  expect((await book.append(view, msg("go on"))).event_id).toBe(4);
  book.close();
});

test("records a failed write lost never reach a view: it is dropped, read again from the log, and the ids go on without a gap", async () => {
  const disk = fillableDisk();
  const store = await open(disk.opts);
  const book = new SessionBook(store);
  const view = book.create({ Created: { parent: null, params: { ...PARAMS } } }, 0, PARAMS);
  await book.append(view, msg("a"));
  await store.flush();
  disk.full = true;
  await book.append(view, msg("lost"));
  await expect(store.flush()).rejects.toThrow(/ENOSPC/);
  disk.full = false;
  // The request that held the old view is refused; a new one reads the log again.
  await expect(book.append(view, msg("on the old view"))).rejects.toThrow(/read it again/);
  const again = await book.view(view.header.id);
  expect(again.events.map((e) => e.event_id)).toEqual([0, 1]);
  expect((await book.append(again, msg("next"))).event_id).toBe(2);
  await store.flush();
  expect(store.read(view.header.id).map((e) => e.event_id)).toEqual([0, 1, 2]);
  book.close();
});

test("an HTTP session's end record still buffered when an append comes: the append gets the next id, never a duplicate", async () => {
  const { store, book, http, view } = await httpSessionInBook();
  // The journal ends the generation: its end record is buffered and the session released at once.
  store.append(http, { Generated: { span: [], text: "", finish: FINISH.endOfTurn } });
  store.release(http);
  const appended = await book.append(view, msg("after"));
  expect(appended.event_id).toBe(3);
  await store.flush();
  expect(store.read(http).map((e) => e.event_id)).toEqual([0, 1, 2, 3]);
  expect(view.events.map((e) => e.event_id)).toEqual([0, 1, 2, 3]);
  book.close();
});
