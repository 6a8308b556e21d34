// A failed start undoes what it opened, last first, each undoing told why;
// a start that succeeds undoes nothing.
import { describe, expect, test } from "bun:test";
import { Unwind } from "../../src/runtime/unwind.ts";

describe("Unwind", () => {
  test("a failure undoes every deferred step, newest first, with the error, and is thrown on", async () => {
    const unwind = new Unwind();
    const undone: string[] = [];
    const failure = new Error("cannot listen");
    const start = unwind.guard(async () => {
      unwind.defer((err) => undone.push(`registry: ${err.message}`));
      unwind.defer(async (err) => {
        await Bun.sleep(1);
        undone.push(`files: ${err.message}`);
      });
      throw failure;
    });
    await expect(start).rejects.toBe(failure);
    expect(undone).toEqual(["files: cannot listen", "registry: cannot listen"]);
  });

  test("a start that succeeds undoes nothing", async () => {
    const unwind = new Unwind();
    let undone = false;
    expect(
      await unwind.guard(async () => {
        unwind.defer(() => {
          undone = true;
        });
        return 7;
      }),
    ).toBe(7);
    expect(undone).toBe(false);
  });
});
