// The --key-policy file (docs/api/key-policy.md): defaults, the spec's example
// file, and every refusal, each of which must name the entry and never quote
// a secret. Pure parsing; no server.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KeyPolicyError, parseKeyPolicy, readKeyPolicy } from "../../../src/http/auth/key-policy.ts";

const API_KEY = "sk-global-ZZZ999";
const ENV = { CHAT_UI_KEY: "sk-chat-AAA111", OPS_KEY: "sk-ops-BBB222", EMPTY_KEY: "", SPACED_KEY: "sk-spaced\n" };
/** Every secret a test below puts in a file or the environment: no refusal may contain one. */
const SECRETS = [API_KEY, "sk-chat-AAA111", "sk-ops-BBB222", "sk-batch-CCC333", "sk-other-DDD444", "sk-spaced"];
const opts = { env: ENV, apiKeys: [API_KEY] };

const parse = (doc: unknown) => parseKeyPolicy(typeof doc === "string" ? doc : JSON.stringify(doc), opts);
const one = (entry: Record<string, unknown>) => parse({ keys: [entry] });

/** The refusal `fn` throws; fails when it throws nothing or something else, or quotes a secret. */
function refusal(fn: () => unknown): string {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(KeyPolicyError);
  const message = (caught as KeyPolicyError).message;
  for (const s of SECRETS) expect(message).not.toContain(s);
  return message;
}

describe("valid files", () => {
  test("the spec's example, with key_env values from env", () => {
    const keys = parse({
      keys: [
        { name: "chat-ui", key_env: "CHAT_UI_KEY", class: "interactive", max_concurrent: 16 },
        { name: "batch", key: "sk-batch-CCC333", class: "background", rate_limit_rpm: 60, max_concurrent: 2 },
        { name: "ops", key_env: "OPS_KEY", class: "agent", admin: true },
      ],
    });
    expect(keys).toEqual([
      {
        name: "chat-ui",
        secret: "sk-chat-AAA111",
        qosClass: 0,
        maxClass: 0,
        batchInvariant: false,
        rateLimitRpm: 0,
        maxConcurrent: 16,
        admin: false,
      },
      {
        name: "batch",
        secret: "sk-batch-CCC333",
        qosClass: 3,
        maxClass: 3,
        batchInvariant: false,
        rateLimitRpm: 60,
        maxConcurrent: 2,
        admin: false,
      },
      {
        name: "ops",
        secret: "sk-ops-BBB222",
        qosClass: 2,
        maxClass: 2,
        batchInvariant: false,
        rateLimitRpm: 0,
        maxConcurrent: 0,
        admin: true,
      },
    ]);
  });

  test("defaults: agent, max_class = class, no limits, not admin, no batch-invariant", () => {
    expect(one({ name: "a", key: "sk-batch-CCC333" })).toEqual([
      {
        name: "a",
        secret: "sk-batch-CCC333",
        qosClass: 2,
        maxClass: 2,
        batchInvariant: false,
        rateLimitRpm: 0,
        maxConcurrent: 0,
        admin: false,
      },
    ]);
    // max_class defaults to the entry's own class, not to agent.
    expect(one({ name: "a", key: "sk-batch-CCC333", class: "background" })[0]!.maxClass).toBe(3);
  });

  test("every field set", () => {
    const [k] = one({
      name: "A.b_c-9",
      key: "sk-batch-CCC333",
      class: "background",
      max_class: "interactive",
      batch_invariant: true,
      rate_limit_rpm: 120,
      max_concurrent: 4,
      admin: true,
    });
    expect(k).toEqual({
      name: "A.b_c-9",
      secret: "sk-batch-CCC333",
      qosClass: 3,
      maxClass: 0,
      batchInvariant: true,
      rateLimitRpm: 120,
      maxConcurrent: 4,
      admin: true,
    });
  });

  test("classes as parseQos reads them: names, aliases, case, numbers as JSON numbers or strings", () => {
    const cls = (v: unknown) => one({ name: "a", key: "sk-batch-CCC333", class: v, max_class: 0 })[0]!.qosClass;
    expect(cls("interactive")).toBe(0);
    expect(cls("Interactive-Chat")).toBe(0);
    expect(cls("inline-completion")).toBe(1);
    expect(cls("completion")).toBe(1);
    expect(cls("foreground")).toBe(2);
    expect(cls("foreground-agent")).toBe(2);
    expect(cls("background-agent")).toBe(3);
    expect(cls(" BACKGROUND ")).toBe(3);
    for (const n of [0, 1, 2, 3] as const) {
      expect(cls(n)).toBe(n);
      expect(cls(String(n))).toBe(n);
    }
  });

  test("max_class better than class is allowed; equal too", () => {
    expect(one({ name: "a", key: "sk-batch-CCC333", class: 3, max_class: 1 })[0]).toMatchObject({
      qosClass: 3,
      maxClass: 1,
    });
    expect(one({ name: "a", key: "sk-batch-CCC333", class: 1, max_class: "completion" })[0]).toMatchObject({
      qosClass: 1,
      maxClass: 1,
    });
  });

  test("zero limits and explicit false are accepted; whole-number floats like 60.0 read as 60", () => {
    const [k] = parse(
      `{"keys":[{"name":"a","key":"sk-batch-CCC333","rate_limit_rpm":60.0,"max_concurrent":0,"admin":false,"batch_invariant":false}]}`,
    );
    expect(k).toMatchObject({ rateLimitRpm: 60, maxConcurrent: 0, admin: false, batchInvariant: false });
  });

  test("a byte-order mark before the JSON is ignored", () => {
    expect(parse(`\uFEFF{"keys":[{"name":"a","key":"sk-batch-CCC333"}]}`)).toHaveLength(1);
  });

  test("no --api-key: the same file parses", () => {
    expect(
      parseKeyPolicy(JSON.stringify({ keys: [{ name: "a", key: "sk-batch-CCC333" }] }), { env: {}, apiKeys: [] }),
    ).toHaveLength(1);
  });
});

describe("refusals of the file's shape", () => {
  test("not JSON, and the parser's complaint does not quote the file", () => {
    expect(refusal(() => parse(`{"keys":[{"name":"a","key": sk-batch-CCC333}]}`))).toContain("not valid JSON");
    expect(refusal(() => parse(`{"keys":[{"name":"a","key":"sk-batch-CCC333`))).toContain("not valid JSON");
    expect(refusal(() => parse(""))).toContain("not valid JSON");
  });

  test("top level not an object", () => {
    expect(refusal(() => parse([{ name: "a", key: "sk-batch-CCC333" }]))).toContain("top level must be an object");
    expect(refusal(() => parse("null"))).toContain("got null");
    expect(refusal(() => parse('"sk-batch-CCC333"'))).toContain("got a string");
  });

  test("a top-level field other than keys", () => {
    expect(refusal(() => parse({ keys: [{ name: "a", key: "sk-batch-CCC333" }], version: 1 }))).toContain(
      `unknown top-level field "version"`,
    );
    // A field named like a secret is not quoted.
    const msg = refusal(() => parse({ keys: [{ name: "a", key: "sk-batch-CCC333" }], "sk-batch-CCC333": 1 }));
    expect(msg).toContain("unknown top-level field");
  });

  test("keys missing, not an array, empty", () => {
    expect(refusal(() => parse({}))).toContain(`"keys" is missing`);
    expect(refusal(() => parse({ keys: { name: "a" } }))).toContain(`"keys" must be an array`);
    expect(refusal(() => parse({ keys: "sk-batch-CCC333" }))).toContain("got a string");
    expect(refusal(() => parse({ keys: [] }))).toContain(`"keys" is empty`);
  });

  test("an entry that is not an object", () => {
    expect(refusal(() => parse({ keys: [{ name: "a", key: "sk-batch-CCC333" }, "sk-other-DDD444"] }))).toContain(
      "keys[1] must be an object, got a string",
    );
    expect(refusal(() => parse({ keys: [null] }))).toContain("keys[0] must be an object, got null");
    expect(refusal(() => parse({ keys: [[]] }))).toContain("got an array");
  });
});

describe("refusals of one entry", () => {
  test("an unknown field, named with the entry's index and name", () => {
    const msg = refusal(() =>
      parse({
        keys: [
          { name: "a", key: "sk-batch-CCC333" },
          { name: "b", key: "sk-other-DDD444", max_rpm: 3 },
        ],
      }),
    );
    expect(msg).toContain(`keys[1] ("b")`);
    expect(msg).toContain(`unknown field "max_rpm"`);
    // A typo of a known field is refused, not ignored.
    expect(refusal(() => one({ name: "a", key: "sk-batch-CCC333", Admin: true }))).toContain(`unknown field "Admin"`);
    // A field named like a secret is not quoted.
    expect(refusal(() => one({ name: "a", key: "sk-batch-CCC333", "sk-batch-CCC333": true }))).toContain(
      "unknown field (a value equal to a secret, not shown)",
    );
  });

  test("name missing, not a string, bad characters", () => {
    expect(refusal(() => one({ key: "sk-batch-CCC333" }))).toContain(`keys[0]: "name" is missing`);
    expect(refusal(() => one({ name: 7, key: "sk-batch-CCC333" }))).toContain(`"name" must be a string, got a number`);
    expect(refusal(() => one({ name: "", key: "sk-batch-CCC333" }))).toContain("may use only letters, digits");
    for (const bad of ["chat ui", "a/b", "ключ", "a:b", "a\n"]) {
      expect(refusal(() => one({ name: bad, key: "sk-batch-CCC333" }))).toContain("may use only letters, digits");
    }
  });

  test("the name api-key is reserved for the global --api-key", () => {
    expect(refusal(() => one({ name: "api-key", key: "sk-batch-CCC333" }))).toContain("reserved");
  });

  test("a duplicate name", () => {
    const msg = refusal(() =>
      parse({
        keys: [
          { name: "a", key: "sk-batch-CCC333" },
          { name: "b", key: "sk-chat-AAA111x" },
          { name: "a", key: "sk-other-DDD444" },
        ],
      }),
    );
    expect(msg).toContain(`keys[2] ("a")`);
    expect(msg).toContain("already used by keys[0]");
  });

  test("neither or both of key / key_env", () => {
    expect(refusal(() => one({ name: "a" }))).toContain(`keys[0] ("a"): needs a secret`);
    expect(refusal(() => one({ name: "a", key: "sk-batch-CCC333", key_env: "OPS_KEY" }))).toContain(
      `has both "key" and "key_env"`,
    );
  });

  test("key empty or not a string", () => {
    expect(refusal(() => one({ name: "a", key: "" }))).toContain(`"key" is empty`);
    expect(refusal(() => one({ name: "a", key: 12345 }))).toContain(`"key" must be a string, got a number`);
  });

  test("key_env naming an unset or empty variable, or not a name", () => {
    expect(refusal(() => one({ name: "a", key_env: "NOPE_KEY" }))).toContain(`"NOPE_KEY", which is not set`);
    expect(refusal(() => one({ name: "a", key_env: "EMPTY_KEY" }))).toContain(`"EMPTY_KEY", which is empty`);
    expect(refusal(() => one({ name: "a", key_env: "" }))).toContain(`"key_env" must name an environment variable`);
    expect(refusal(() => one({ name: "a", key_env: 3 }))).toContain("got a number");
  });

  test("a secret with whitespace at either end (HTTP would drop it)", () => {
    expect(refusal(() => one({ name: "a", key_env: "SPACED_KEY" }))).toContain("begins or ends with whitespace");
    expect(refusal(() => one({ name: "a", key: " sk-batch-CCC333" }))).toContain("begins or ends with whitespace");
  });

  test("a secret with a space inside or a character outside printable ASCII (a client would send other bytes)", () => {
    for (const key of ["sk-caéfé", "sk-in side", "sk-tab\tbed", "sk-☃"]) {
      expect(refusal(() => one({ name: "a", key }))).toContain("printable ASCII");
    }
  });

  test("class / max_class not a QoS class", () => {
    for (const bad of ["urgent", "4", 4, -1, 1.5, true, null, [], {}]) {
      const msg = refusal(() => one({ name: "a", key: "sk-batch-CCC333", class: bad }));
      expect(msg).toContain(`keys[0] ("a"): "class"`);
      expect(msg).toContain("is not a QoS class; accepted: interactive (0)");
    }
    expect(refusal(() => one({ name: "a", key: "sk-batch-CCC333", max_class: "high" }))).toContain(
      `"max_class" "high" is not a QoS class`,
    );
    // A class value that is a secret (pasted into the wrong field) is not quoted.
    expect(refusal(() => one({ name: "a", key: "sk-batch-CCC333", class: "sk-batch-CCC333" }))).toContain("not shown");
  });

  test("max_class worse than class", () => {
    const msg = refusal(() =>
      one({ name: "a", key: "sk-batch-CCC333", class: "interactive", max_class: "background" }),
    );
    expect(msg).toContain(`keys[0] ("a"): "max_class" background is worse than "class" interactive`);
    expect(msg).toContain("could not even ask for its own class");
    expect(refusal(() => one({ name: "a", key: "sk-batch-CCC333", max_class: 3 }))).toContain("worse than"); // class defaults to agent
  });

  test("rate_limit_rpm / max_concurrent not whole numbers >= 0", () => {
    for (const field of ["rate_limit_rpm", "max_concurrent"]) {
      for (const bad of [-1, 1.5, "60", true, null, 1e300]) {
        const msg = refusal(() => one({ name: "a", key: "sk-batch-CCC333", [field]: bad }));
        expect(msg).toContain(`keys[0] ("a"): "${field}" must be a whole number >= 0`);
      }
    }
  });

  test("admin / batch_invariant not booleans", () => {
    for (const field of ["admin", "batch_invariant"]) {
      for (const bad of ["true", 1, 0, null]) {
        const msg = refusal(() => one({ name: "a", key: "sk-batch-CCC333", [field]: bad }));
        expect(msg).toContain(`keys[0] ("a"): "${field}" must be true or false`);
      }
    }
  });
});

describe("refusals across entries and --api-key", () => {
  test("duplicate secrets, inline or through the environment", () => {
    const msg = refusal(() =>
      parse({
        keys: [
          { name: "a", key: "sk-batch-CCC333" },
          { name: "b", key: "sk-batch-CCC333" },
        ],
      }),
    );
    expect(msg).toContain(`keys[1] ("b"): its secret is the same as keys[0] ("a")'s`);
    const viaEnv = refusal(() =>
      parse({
        keys: [
          { name: "a", key_env: "OPS_KEY" },
          { name: "b", key: "sk-ops-BBB222" },
        ],
      }),
    );
    expect(viaEnv).toContain(`keys[1] ("b"): its secret is the same as keys[0] ("a")'s`);
  });

  test("a secret equal to an --api-key", () => {
    const msg = refusal(() => one({ name: "a", key: API_KEY }));
    expect(msg).toContain(`keys[0] ("a"): its secret equals an --api-key value`);
    const second = refusal(() =>
      parseKeyPolicy(JSON.stringify({ keys: [{ name: "a", key: "sk-other-DDD444" }] }), {
        env: {},
        apiKeys: [API_KEY, "sk-other-DDD444"],
      }),
    );
    expect(second).toContain("equals an --api-key value");
  });

  test("a name equal to its own secret, another entry's, or an --api-key; the name is then left out", () => {
    const own = refusal(() => parse({ keys: [{ name: "sk-other-DDD444", key: "sk-other-DDD444" }] }));
    expect(own).toContain("keys[0]: its name equals its own secret");
    const other = refusal(() =>
      parse({
        keys: [
          { name: "a", key: "sk-batch-CCC333" },
          { name: "sk-ops-BBB222", key: "sk-other-DDD444" },
          { name: "c", key_env: "OPS_KEY" },
        ],
      }),
    );
    expect(other).toContain(`keys[1]: its name equals the secret of keys[2] ("c")`);
    const api = refusal(() =>
      parseKeyPolicy(JSON.stringify({ keys: [{ name: "tok123", key: "sk-other-DDD444" }] }), {
        env: {},
        apiKeys: ["tok123"],
      }),
    );
    expect(api).toContain("keys[0]: its name equals an --api-key value");
    expect(api).not.toContain("tok123");
  });

  test("an entry whose name is another entry's secret is never named, even in an unrelated refusal", () => {
    const msg = refusal(() =>
      parse({
        keys: [
          { name: "sk-other-DDD444", key: "sk-batch-CCC333", admin: "yes" },
          { name: "b", key: "sk-other-DDD444" },
        ],
      }),
    );
    expect(msg).toContain(`keys[0]: "admin" must be true or false`);
  });
});

describe("readKeyPolicy", () => {
  const dir = mkdtempSync(join(tmpdir(), "sf-key-policy-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("reads and parses a file", () => {
    const path = join(dir, "ok.json");
    writeFileSync(path, JSON.stringify({ keys: [{ name: "ops", key_env: "OPS_KEY", admin: true }] }));
    expect(readKeyPolicy(path, opts)).toEqual([
      {
        name: "ops",
        secret: "sk-ops-BBB222",
        qosClass: 2,
        maxClass: 2,
        batchInvariant: false,
        rateLimitRpm: 0,
        maxConcurrent: 0,
        admin: true,
      },
    ]);
  });

  test("a missing file, a folder, an unreadable file: refusals naming the path", () => {
    const missing = join(dir, "missing.json");
    expect(refusal(() => readKeyPolicy(missing, opts))).toBe(`${missing}: cannot read the file (no such file)`);
    expect(refusal(() => readKeyPolicy(dir, opts))).toContain(`${dir}: cannot read the file`);
    const locked = join(dir, "locked.json");
    writeFileSync(locked, "{}");
    chmodSync(locked, 0o000);
    // root reads any file; the refusal is only checked where the mode holds.
    if (process.getuid?.() !== 0) expect(refusal(() => readKeyPolicy(locked, opts))).toContain("permission denied");
  });

  test("a refusal inside the file names the path too", () => {
    const path = join(dir, "bad.json");
    writeFileSync(path, JSON.stringify({ keys: [{ name: "a", key: "sk-batch-CCC333", klass: "agent" }] }));
    const msg = refusal(() => readKeyPolicy(path, opts));
    expect(msg).toStartWith(`${path}: keys[0] ("a"): unknown field "klass"`);
  });
});
