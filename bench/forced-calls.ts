// Forced tool calls and response_format on random-weight models that carry
// real tokenizers and real chat templates (src/fixtures/real-vocab.ts), the
// way a small quantized model behaves at temperature 0.9: does a forced call
// finish (finish_reason tool_calls, arguments valid against the tool's
// schema) within max_tokens, does the streamed call equal the non-streamed
// one, and does a response_format reply finish within its cap? With parallel
// calls allowed a random model opens call after call until the cap (ending is
// one token among several it may pick), so both settings are measured.
//
// bun bench/forced-calls.ts [--seeds 20] [--shared ../shared] [--only NAME] [--tools free,bounded,add,response_format]
// [--json out.json]
//
// Needs ../shared/models/vocab and ../shared/templates (not part of the repo).
import Ajv from "ajv";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { startServer } from "../src/cli/serve.ts";
import { parseServeOptions, type ServeOptions } from "../src/cli/serve-options.ts";
import { realVocabModel } from "../src/fixtures/real-vocab.ts";
import { writeGgufFile } from "../src/gguf/writer.ts";
import { sseEvents } from "./sse.ts";

process.env.SUPERFLUID_QUIET ??= "1";

const { values: args } = parseArgs({
  options: {
    seeds: { type: "string", default: "20" },
    shared: { type: "string", default: resolve(import.meta.dir, "../../shared") },
    only: { type: "string" },
    json: { type: "string" },
    threads: { type: "string", default: "1" },
    tools: { type: "string", default: "free,bounded,add,response_format" },
  },
});

interface Case {
  name: string;
  vocab: string;
  template: string;
}

const CASES: Case[] = [
  { name: "qwen3", vocab: "ggml-vocab-qwen2.gguf", template: "Qwen-Qwen3-0.6B.jinja" },
  { name: "llama3.1", vocab: "ggml-vocab-llama-bpe.gguf", template: "meta-llama-Llama-3.1-8B-Instruct.jinja" },
  {
    name: "hermes3",
    vocab: "ggml-vocab-llama-bpe.gguf",
    template: "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
  },
];

// Three tools. Two argument schemas for get_weather: a free string, and the
// same bounded. A random-weight model closes a free string only when it
// happens to sample one of the ~290 tokens (of ~150k) that end one, so its
// strings run on whatever the layout; the bounded schema shows what the
// layout itself costs. And `add` over two unbounded integers, sent without a
// description as LangChain and the AI SDK send tools: a number ends only when
// the grammar's digit bound ends it (grammar/README.md).
interface Tool {
  name: string;
  description?: string;
  schema: object;
}
const TOOLS: Record<string, Tool> = {
  free: {
    name: "get_weather",
    description: "Current weather for a city",
    schema: {
      type: "object",
      properties: { city: { type: "string" }, unit: { type: "string", enum: ["c", "f"] } },
      required: ["city"],
      additionalProperties: false,
    },
  },
  bounded: {
    name: "get_weather",
    description: "Current weather for a city",
    schema: {
      type: "object",
      properties: { city: { type: "string", maxLength: 24 }, unit: { type: "string", enum: ["c", "f"] } },
      required: ["city"],
      additionalProperties: false,
    },
  },
  add: {
    name: "add",
    schema: {
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "integer" } },
      required: ["a", "b"],
      additionalProperties: false,
    },
  },
};
const toolsOf = (tool: Tool) => [
  {
    type: "function",
    function: {
      name: tool.name,
      ...(tool.description ? { description: tool.description } : {}),
      parameters: tool.schema,
    },
  },
];
const MESSAGES = [{ role: "user", content: "What is the weather in Oslo?" }];
const REPORT = {
  type: "object",
  properties: {
    city: { type: "string" },
    temperature: { type: "integer" },
    sky: { type: "string", enum: ["clear", "cloudy", "snow"] },
  },
  required: ["city", "temperature", "sky"],
  additionalProperties: false,
};

const validReport = new Ajv({ strict: false }).compile(REPORT);

interface Tally {
  finished: number;
  valid: number;
  streamEqual: number;
  lengths: number[];
  /** The error that refused the request, when it was refused. */
  refused?: string;
}

const tally = (): Tally => ({ finished: 0, valid: 0, streamEqual: 0, lengths: [] });

async function post(url: string, body: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, any>;
  if (res.status !== 200) throw new Error(`${res.status}: ${JSON.stringify(json)}`);
  return json;
}

/** The streamed reply's calls, merged from their deltas, and its finish reason. */
async function streamed(url: string, body: Record<string, unknown>) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const calls: { name: string; arguments: string }[] = [];
  let content = "";
  let finish: string | null = null;
  for await (const event of sseEvents(res.body!)) {
    if (!event.data || event.data === "[DONE]") continue;
    const choice = JSON.parse(event.data).choices?.[0];
    if (!choice) continue;
    content += choice.delta?.content ?? "";
    for (const d of choice.delta?.tool_calls ?? []) {
      calls[d.index] ??= { name: "", arguments: "" };
      if (d.function?.name) calls[d.index]!.name = d.function.name;
      calls[d.index]!.arguments += d.function?.arguments ?? "";
    }
    finish = choice.finish_reason ?? finish;
  }
  return { calls, content, finish };
}

async function forcedCalls(
  url: string,
  model: string,
  tool: Tool,
  choice: unknown,
  parallel: boolean,
  seeds: number,
): Promise<Tally> {
  const t = tally();
  const validCall = new Ajv({ strict: false }).compile(tool.schema);
  for (let seed = 1; seed <= seeds; seed++) {
    const body = {
      model,
      messages: MESSAGES,
      tools: toolsOf(tool),
      tool_choice: choice,
      parallel_tool_calls: parallel,
      temperature: 0.9,
      max_tokens: 200,
      seed,
    };
    let reply: Record<string, any>;
    try {
      reply = await post(url, body);
    } catch (err) {
      t.refused = (err as Error).message;
      break;
    }
    const c = reply.choices[0];
    const calls = (c.message.tool_calls ?? []) as { function: { name: string; arguments: string } }[];
    t.lengths.push(reply.usage.completion_tokens);
    if (c.finish_reason === "tool_calls") t.finished++;
    const ok =
      c.finish_reason === "tool_calls" &&
      calls.length > 0 &&
      calls.every((call) => {
        try {
          return call.function.name === tool.name && validCall(JSON.parse(call.function.arguments));
        } catch {
          return false;
        }
      });
    if (ok) t.valid++;
    const s = await streamed(url, body);
    const same =
      s.finish === c.finish_reason &&
      s.content === (c.message.content ?? "") &&
      JSON.stringify(s.calls) ===
        JSON.stringify(calls.map((call) => ({ name: call.function.name, arguments: call.function.arguments })));
    if (same) t.streamEqual++;
  }
  return t;
}

async function responseFormat(url: string, model: string, seeds: number): Promise<Tally> {
  const t = tally();
  for (let seed = 1; seed <= seeds; seed++) {
    const reply = await post(url, {
      model,
      messages: [{ role: "user", content: "Weather report for Oslo as JSON." }],
      response_format: { type: "json_schema", json_schema: { name: "report", schema: REPORT, strict: true } },
      temperature: 0.9,
      max_tokens: 300,
      seed,
      chat_template_kwargs: { enable_thinking: false },
    });
    const c = reply.choices[0];
    t.lengths.push(reply.usage.completion_tokens);
    if (c.finish_reason === "stop") t.finished++;
    try {
      if (validReport(JSON.parse(c.message.content))) t.valid++;
    } catch {}
  }
  return t;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

async function main() {
  const shared = args.shared!;
  if (!existsSync(join(shared, "models/vocab")) || !existsSync(join(shared, "templates"))) {
    console.error(`needs ${shared}/models/vocab and ${shared}/templates`);
    process.exit(2);
  }
  const seeds = Number(args.seeds);
  const cacheDir = join(tmpdir(), "superfluid-real-vocab");
  mkdirSync(cacheDir, { recursive: true });
  const rows: Record<string, unknown>[] = [];
  for (const c of CASES.filter((x) => !args.only || x.name === args.only)) {
    const path = join(cacheDir, `${c.name}.gguf`);
    if (!existsSync(path)) {
      const template = await Bun.file(join(shared, "templates", c.template)).text();
      await writeGgufFile(
        realVocabModel({ vocabPath: join(shared, "models/vocab", c.vocab), chatTemplate: template }),
        path,
      );
    }
    const sessions = mkdtempSync(join(tmpdir(), "superfluid-bench-"));
    const opts = parseServeOptions([
      path,
      "--port",
      "0",
      "--max-batch",
      "1",
      "--max-context",
      "4096",
      "--threads",
      args.threads!,
      "--sessions",
      sessions,
    ]) as ServeOptions;
    const server = await startServer(opts, () => {});
    try {
      const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string }[] };
      const model = models.data[0]!.id;
      const results: [string, Tally][] = [];
      for (const label of args.tools!.split(",")) {
        if (label === "response_format") {
          results.push(["response_format", await responseFormat(server.url, model, seeds)]);
          continue;
        }
        const tool = TOOLS[label];
        if (!tool) throw new Error(`--tools: no tool "${label}" (${Object.keys(TOOLS).join(", ")})`);
        for (const parallel of [false, true]) {
          const tag = `${label}${parallel ? "/parallel" : ""}`;
          results.push([`required/${tag}`, await forcedCalls(server.url, model, tool, "required", parallel, seeds)]);
          results.push([
            `named/${tag}`,
            await forcedCalls(
              server.url,
              model,
              tool,
              { type: "function", function: { name: tool.name } },
              parallel,
              seeds,
            ),
          ]);
        }
      }
      for (const [kind, t] of results) {
        const row = {
          model: c.name,
          kind,
          seeds,
          finished: t.finished,
          valid: t.valid,
          stream_equal: t.streamEqual,
          median_tokens: median(t.lengths),
          ...(t.refused ? { refused: t.refused.slice(0, 200) } : {}),
        };
        rows.push(row);
        console.log(JSON.stringify(row));
      }
    } finally {
      await server.close();
      rmSync(sessions, { recursive: true, force: true });
    }
  }
  if (args.json) await Bun.write(args.json, JSON.stringify(rows, null, 1));
}

await main();
