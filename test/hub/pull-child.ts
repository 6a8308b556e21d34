// A pull in its own process, for the tests of what two processes share (the
// lock, a partial file left by a killed pull). The reference is argv[2]; the
// Hub and cache come from the environment as in production; SF_TEST_TUNING
// holds download tuning as JSON. Prints the result as one JSON line.
import { pull } from "../../src/hub/pull.ts";
import { hubSettings } from "../../src/hub/settings.ts";

const tuning = JSON.parse(process.env.SF_TEST_TUNING ?? "{}");
try {
  let waited = false;
  const pulled = await pull(process.argv[2]!, {
    settings: hubSettings(process.env),
    tuning,
    lockPollMs: 50,
    // The test learns that this process waits on another's lock from one stderr line.
    progress: (e) => {
      if (e.kind === "file" && e.state === "waiting" && !waited) {
        waited = true;
        console.error("waiting");
      }
    },
  });
  console.log(JSON.stringify({ ok: true, path: pulled.model[0]!.local, fetched: pulled.fetched, waited }));
} catch (err) {
  console.log(JSON.stringify({ ok: false, kind: (err as { kind?: string }).kind, message: (err as Error).message }));
  process.exitCode = 1;
}
