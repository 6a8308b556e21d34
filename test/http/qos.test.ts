// QoS over HTTP (docs/api/openai.md#qos-classes): the x-superfluid-qos header (names,
// aliases, numbers; an unknown value is a 400), --http-default-qos,
// --no-http-qos-header, x-superfluid-batch-invariant (403 admin_required unless
// --http-allow-batch-invariant), and the scheduling fields of /slots. The class
// a request runs in is read off /slots' per-class lane counts while it runs.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkBatchInvariant, DEFAULT_QOS_POLICY, requestQos, wantsBatchInvariant } from "../../src/http/qos.ts";
import { RequestError as ApiError } from "../../src/daemon/request-error.ts";
import { envelope, post, slots, useServer, user, waitIdle, type TestServer } from "./support.ts";

const s = useServer({
  maxBatch: 2,
  maxContext: 4096,
  extraArgs: ["--class-lanes", "background=1", "--starvation-ticks", "5", "--prefill-budget", "0"],
});
const open = useServer({
  maxBatch: 1,
  maxContext: 4096,
  extraArgs: ["--http-default-qos", "interactive", "--no-http-qos-header", "--http-allow-batch-invariant"],
});

const chat = (srv: TestServer, extra: Record<string, unknown> = {}) => ({
  model: srv.model,
  messages: user("hi"),
  max_tokens: 2,
  ...extra,
});
const headers = (h: Record<string, string>) => ({ "content-type": "application/json", ...h });

/** Starts a long streamed chat, returns the /slots entry while it runs, then cancels it. */
async function classWhileRunning(
  srv: TestServer,
  h: Record<string, string>,
  route = "/v1/chat/completions",
): Promise<Record<string, number>> {
  const controller = new AbortController();
  const body =
    route === "/v1/chat/completions"
      ? chat(srv, { stream: true, ignore_eos: true, max_tokens: 100000 })
      : { model: srv.model, prompt: "go", stream: true, ignore_eos: true, max_tokens: 100000 };
  const res = await post(srv, route, body, { signal: controller.signal, headers: headers(h) });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  await reader.read();
  await reader.read();
  const entry = await slots(srv);
  controller.abort();
  await reader.cancel().catch(() => {});
  expect((await waitIdle(srv)).idle).toBe(true);
  return entry.lanes.per_class;
}

describe("the class of a request (pure)", () => {
  const h = (v?: string) =>
    new Request("http://localhost/", { headers: v === undefined ? {} : { "x-superfluid-qos": v } });
  const invariant = (v: string) => new Request("http://localhost/", { headers: { "x-superfluid-batch-invariant": v } });
  test("names, aliases and numbers, case-insensitive; none = the default", () => {
    expect(requestQos(DEFAULT_QOS_POLICY, h())).toBe(2);
    expect(requestQos(DEFAULT_QOS_POLICY, h("interactive"))).toBe(0);
    expect(requestQos(DEFAULT_QOS_POLICY, h("Inline-Completion"))).toBe(1);
    expect(requestQos(DEFAULT_QOS_POLICY, h("foreground-agent"))).toBe(2);
    expect(requestQos(DEFAULT_QOS_POLICY, h(" 3 "))).toBe(3);
    expect(requestQos({ ...DEFAULT_QOS_POLICY, defaultQos: 3 }, h())).toBe(3);
  });

  test("an unknown value is a 400 naming the header and the accepted values; ignored when the header is off", () => {
    let err: unknown;
    try {
      requestQos(DEFAULT_QOS_POLICY, h("urgent"));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(400);
    expect((err as ApiError).message).toContain("x-superfluid-qos");
    for (const name of ["interactive", "completion", "agent", "background"])
      expect((err as ApiError).message).toContain(name);
    expect(requestQos({ ...DEFAULT_QOS_POLICY, honourHeader: false, defaultQos: 1 }, h("urgent"))).toBe(1);
  });

  test("batch-invariant: true or 1, case-insensitive", () => {
    for (const on of ["true", "TRUE", "1", " True "])
      expect(wantsBatchInvariant(new Headers({ "x-superfluid-batch-invariant": on }))).toBe(true);
    for (const off of ["false", "0", "yes", "", "on"])
      expect(wantsBatchInvariant(new Headers({ "x-superfluid-batch-invariant": off }))).toBe(false);
    expect(wantsBatchInvariant(new Headers())).toBe(false);
    expect(() => checkBatchInvariant(DEFAULT_QOS_POLICY, invariant("1"))).toThrow(ApiError);
    expect(() =>
      checkBatchInvariant({ ...DEFAULT_QOS_POLICY, allowBatchInvariant: true }, invariant("1")),
    ).not.toThrow();
  });
});

describe("x-superfluid-qos over HTTP", () => {
  test("an unknown class: 400 on chat and completions, naming the header", async () => {
    for (const [route, body] of [
      ["/v1/chat/completions", chat(s)],
      ["/v1/completions", { model: s.model, prompt: "hi", max_tokens: 2 }],
    ] as const) {
      const res = await post(s, route, body, { headers: headers({ "x-superfluid-qos": "urgent" }) });
      expect(res.status).toBe(400);
      const e = envelope(await res.json());
      expect(e.type).toBe("invalid_request_error");
      expect(e.message).toContain("x-superfluid-qos");
      expect(e.message).toContain("background");
    }
  });

  test("the header sets the class the lane runs in; no header = agent", async () => {
    expect(await classWhileRunning(s, { "x-superfluid-qos": "background-agent" })).toMatchObject({
      background: 1,
      agent: 0,
    });
    expect(await classWhileRunning(s, { "x-superfluid-qos": "0" })).toMatchObject({ interactive: 1, agent: 0 });
    expect(await classWhileRunning(s, { "x-superfluid-qos": "completion" }, "/v1/completions")).toMatchObject({
      completion: 1,
      agent: 0,
    });
    expect(await classWhileRunning(s, {})).toMatchObject({ agent: 1, interactive: 0 });
  });

  test("--http-default-qos sets the class of requests that name none; --no-http-qos-header ignores the header, even a bad one", async () => {
    expect(await classWhileRunning(open, {})).toMatchObject({ interactive: 1, agent: 0 });
    expect(await classWhileRunning(open, { "x-superfluid-qos": "background" })).toMatchObject({
      interactive: 1,
      background: 0,
    });
    expect(
      (await post(open, "/v1/chat/completions", chat(open), { headers: headers({ "x-superfluid-qos": "urgent" }) }))
        .status,
    ).toBe(200);
  });

  test("a bad --http-default-qos or --class-lanes is a usage error: exit 2", async () => {
    for (const args of [
      ["--http-default-qos", "urgent"],
      ["--class-lanes", "agent=99"],
    ]) {
      const home = mkdtempSync(join(tmpdir(), "superfluid-qos-cli-"));
      const proc = Bun.spawn([process.execPath, "src/main.ts", "serve", "--port", "0", ...args], {
        env: { ...process.env, SUPERFLUID_HOME: home },
        stdout: "ignore",
        stderr: "pipe",
      });
      const killer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
      const code = await proc.exited;
      clearTimeout(killer);
      rmSync(home, { recursive: true, force: true });
      expect(code).toBe(2);
      expect(await new Response(proc.stderr).text()).toContain(args[0]!);
    }
  });
});

describe("x-superfluid-batch-invariant", () => {
  test("refused with 403 admin_required unless allowed; other values are off", async () => {
    for (const v of ["true", "1", "TRUE"]) {
      for (const [route, body] of [
        ["/v1/chat/completions", chat(s)],
        ["/v1/completions", { model: s.model, prompt: "hi", max_tokens: 2 }],
      ] as const) {
        const res = await post(s, route, body, { headers: headers({ "x-superfluid-batch-invariant": v }) });
        expect(res.status).toBe(403);
        const e = envelope(await res.json());
        expect(e.code).toBe("admin_required");
        expect(e.message).toContain("--http-allow-batch-invariant");
      }
    }
    for (const v of ["false", "0", "no"]) {
      expect(
        (await post(s, "/v1/chat/completions", chat(s), { headers: headers({ "x-superfluid-batch-invariant": v }) }))
          .status,
      ).toBe(200);
    }
  });

  test("accepted under --http-allow-batch-invariant", async () => {
    const r = await post(open, "/v1/chat/completions", chat(open), {
      headers: headers({ "x-superfluid-batch-invariant": "true" }),
    });
    expect(r.status).toBe(200);
    expect(((await r.json()) as any).choices[0].message.role).toBe("assistant");
  });
});

describe("/slots", () => {
  test("lanes and queue per class, caps, the tick plan and the scheduler's totals", async () => {
    const e = await slots(s);
    // Existing fields stay.
    expect(e.lanes).toMatchObject({ total: 2, active: 0, queued: 0 });
    expect(typeof e.totals.decoded_tokens).toBe("number");
    const classes = { interactive: 0, completion: 0, agent: 0, background: 0 };
    expect(e.lanes.per_class).toEqual(classes);
    expect(e.lanes.caps).toEqual({ interactive: 2, completion: 2, agent: 2, background: 1 });
    expect(e.queue).toEqual({ depth: 0, per_class: classes, paused: 0 });
    expect(e.tick_plan.prefill_budget_mode).toBe("adaptive");
    expect(e.tick_plan.starvation_ticks).toBe(5);
    expect(e.tick_plan.prefill_budget).toBeGreaterThan(0);
    expect(e.tick_plan).toHaveProperty("ms_per_prompt_token");
    for (const k of ["preemptions", "resumes", "starvation_grants", "expired"])
      expect(typeof e.totals[k]).toBe("number");
    expect((await slots(open)).tick_plan.prefill_budget_mode).toBe("fixed");
  });

  test("queue.per_class counts a request waiting for a capped class", async () => {
    // background=1: a second background request waits although a lane is free.
    const controllers = [new AbortController(), new AbortController()];
    const body = chat(s, { stream: true, ignore_eos: true, max_tokens: 100000 });
    const first = await post(s, "/v1/chat/completions", body, {
      signal: controllers[0]!.signal,
      headers: headers({ "x-superfluid-qos": "background" }),
    });
    const reader = first.body!.getReader();
    await reader.read();
    const second = post(s, "/v1/chat/completions", body, {
      signal: controllers[1]!.signal,
      headers: headers({ "x-superfluid-qos": "background" }),
    }).catch(() => undefined);
    let entry: any;
    for (let i = 0; i < 100; i++) {
      entry = await slots(s);
      if (entry.queue.per_class.background === 1) break;
      await Bun.sleep(10);
    }
    controllers.forEach((c) => c.abort());
    await reader.cancel().catch(() => {});
    await second;
    expect(entry.queue.per_class.background).toBe(1);
    expect(entry.lanes.per_class.background).toBe(1);
    expect(entry.lanes.active).toBe(1);
    expect((await waitIdle(s)).idle).toBe(true);
  });
});
