// The request-head deadline of src/http/listener.ts: Bun's node:http does not
// enforce headersTimeout, so a client trickling header bytes (or sending
// nothing) would hold a socket for ever. The deadline is shortened here; the
// test waits for the close itself, not for a time.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect } from "node:net";
import { listen, type Listener } from "../../src/http/listener.ts";
import { RequestError } from "../../src/daemon/request-error.ts";

let listener: Listener;
let release: () => void = () => {};
const held = new Promise<void>((resolve) => (release = resolve));

beforeAll(async () => {
  listener = await listen(
    {
      fetch: async (request) => {
        // A reply held open longer than the deadline: the socket must stay.
        if (new URL(request.url).pathname === "/slow") await held;
        return new Response("ok");
      },
      refuse: () => new RequestError(404, "no"),
      errorBody: (_path, err) => ({ error: err.message }),
    },
    "127.0.0.1",
    0,
    { headDeadlineMs: 300 },
  );
});
afterAll(async () => {
  release();
  await listener.close();
});

/** Opens a socket, runs `drive` on it, and resolves with what came back once the server closed it. */
function session(drive: (write: (s: string) => void) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(listener.port, "127.0.0.1");
    let got = "";
    socket.on("data", (d) => (got += d.toString()));
    socket.on("close", () => resolve(got));
    // The server closing a socket the client is still writing to reads as a reset here: a close too.
    socket.on("error", (err: NodeJS.ErrnoException) =>
      err.code === "ECONNRESET" || err.code === "EPIPE" ? undefined : reject(err),
    );
    socket.on("connect", () => drive((s) => socket.writable && socket.write(s)));
  });
}

test("a head trickled byte by byte is cut off, with no reply", async () => {
  let timer: ReturnType<typeof setInterval> | undefined;
  const got = await session((write) => {
    write("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    timer = setInterval(() => write("X"), 50);
  });
  clearInterval(timer);
  expect(got).toBe("");
}, 30_000);

test("a connection that sends nothing is closed", async () => {
  expect(await session(() => {})).toBe("");
}, 30_000);

test("a reply slower than the deadline is not cut; the idle keep-alive after it is", async () => {
  const got = await session((write) => {
    write("GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    // Released only after the deadline has passed several times over.
    setTimeout(release, 1200);
  });
  expect(got).toStartWith("HTTP/1.1 200");
  expect(got).toEndWith("ok");
}, 30_000);
