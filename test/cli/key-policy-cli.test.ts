// `superfluid serve --key-policy FILE` with a bad file (docs/api/key-policy.md):
// the server does not start; it exits 2 with the reason on stderr, naming
// the entry and never quoting a secret. A handful of representative
// refusals through the real command; test/http/auth/key-policy.test.ts covers
// every refusal of the parser itself.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../..");
const dir = mkdtempSync(join(tmpdir(), "superfluid-key-policy-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const GLOBAL = "sk-cli-global-AAA";
const SECRET = "sk-cli-secret-BBB";
const OTHER = "sk-cli-other-CCC";
const ALL_SECRETS = [GLOBAL, SECRET, OTHER];

let n = 0;
/**
 * Runs `serve --key-policy <file with text>` (plus args); the process is killed if it has not exited by the hang guard.
 */
async function serve(
  text: string | undefined,
  args: string[] = [],
): Promise<{ code: number | null; stderr: string; file: string }> {
  const file = join(dir, `policy-${++n}.json`);
  if (text !== undefined) writeFileSync(file, text);
  const proc = Bun.spawn(
    [
      process.execPath,
      join(ROOT, "src/main.ts"),
      "serve",
      "--key-policy",
      file,
      "--sessions",
      join(dir, "sessions"),
      "--port",
      "0",
      ...args,
    ],
    {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, SUPERFLUID_QUIET: "1", CLI_TEST_EMPTY: "" },
    },
  );
  // A server that started anyway would never exit: that is a failure, not a hang.
  const guard = setTimeout(() => proc.kill("SIGKILL"), 60_000);
  const [stderr] = await Promise.all([new Response(proc.stderr).text(), new Response(proc.stdout).text()]);
  await proc.exited;
  clearTimeout(guard);
  return { code: proc.exitCode, stderr, file };
}

const doc = (keys: unknown[]) => JSON.stringify({ keys });

describe("a bad --key-policy file stops the server with exit 2 and the reason", () => {
  const cases: { name: string; text?: string; args?: string[]; reason: RegExp }[] = [
    { name: "no such file", reason: /cannot read the file \(no such file\)/ },
    {
      name: "not JSON (the text it stops at may be a secret)",
      text: `{"keys": [{"name": "a", "key": ${SECRET}}]}`,
      reason: /not valid JSON/,
    },
    { name: "an empty list", text: doc([]), reason: /"keys" is empty/ },
    {
      name: "an unknown field",
      text: doc([{ name: "a", key: SECRET, rate_limit: 5 }]),
      reason: /keys\[0\] \("a"\): unknown field "rate_limit"/,
    },
    {
      name: "duplicate secrets",
      text: doc([
        { name: "a", key: SECRET },
        { name: "b", key: SECRET },
      ]),
      reason: /keys\[1\] \("b"\): its secret is the same as keys\[0\] \("a"\)'s/,
    },
    {
      name: "a name equal to a secret",
      text: doc([
        { name: "a", key: SECRET },
        { name: OTHER, key: OTHER },
      ]),
      reason: /keys\[1\]: its name equals its own secret/,
    },
    {
      name: "a secret equal to --api-key",
      text: doc([{ name: "a", key: GLOBAL }]),
      args: ["--api-key", GLOBAL],
      reason: /keys\[0\] \("a"\): its secret equals an --api-key value/,
    },
    {
      name: "key_env naming an unset variable",
      text: doc([{ name: "a", key_env: "CLI_TEST_NOT_SET_ANYWHERE" }]),
      reason: /"key_env" names "CLI_TEST_NOT_SET_ANYWHERE", which is not set/,
    },
    {
      name: "key_env naming an empty variable",
      text: doc([{ name: "a", key_env: "CLI_TEST_EMPTY" }]),
      reason: /which is empty/,
    },
    {
      name: "max_class worse than class",
      text: doc([{ name: "a", key: SECRET, class: "interactive", max_class: "background" }]),
      reason: /"max_class" background is worse than "class" interactive/,
    },
    {
      name: "a limit that is not a whole number",
      text: doc([{ name: "a", key: SECRET, max_concurrent: -1 }]),
      reason: /"max_concurrent" must be a whole number >= 0/,
    },
  ];

  for (const c of cases) {
    test(c.name, async () => {
      const r = await serve(c.text, c.args);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(c.reason);
      // The reason names the flag and the file, and says nothing of serving.
      expect(r.stderr).toContain("--key-policy");
      expect(r.stderr).toContain(r.file);
      expect(r.stderr).not.toContain("serving");
      for (const s of ALL_SECRETS) expect(r.stderr).not.toContain(s);
    });
  }
});
