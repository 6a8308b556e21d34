// The one loopback check (src/runtime/loopback.ts): IPv4 127.0.0.0/8, ::1, IPv4-mapped ::ffff:127.x, localhost.
import { expect, test } from "bun:test";
import { isLoopbackAddress, isLoopbackName } from "../../src/runtime/loopback.ts";

test("loopback names and addresses, IPv6 included", () => {
  for (const yes of [
    "127.0.0.1",
    "127.9.8.7",
    "::1",
    "[::1]",
    "::ffff:127.0.0.1",
    "[::FFFF:127.1.2.3]",
    "localhost",
    "LocalHost",
  ])
    expect(isLoopbackName(yes)).toBe(true);
  for (const no of ["10.0.0.1", "::2", "::ffff:10.0.0.1", "0.0.0.0", "::", "localhost.example.com", "128.0.0.1", ""])
    expect(isLoopbackName(no)).toBe(false);
  expect(isLoopbackAddress("localhost")).toBe(false);
});
