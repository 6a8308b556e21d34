// The prompt thread: one Bun Worker thread per served model that renders chat
// templates and tokenizes request text, so neither ever holds the daemon's
// event loop (/health, every other stream). It loads its own vocabulary-only
// copy of the model and its own ChatTemplate objects
// (./prompt-thread-entry.ts); requests go in as structured clones and token
// ids come back as transferred Int32Arrays. The daemon keeps its own
// vocabulary for what is cheap and per token (streamed tokens to text).
//
// Requests are answered in order, one at a time: a slow render delays the
// prompts of this model only. A failed render is an answer (a template error
// comes back as a TemplateError); a thread that dies anyway fails what it had
// in hand and is started again by the next request.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { TemplateError, type RenderInput } from "../codec/index.ts";

/**
 * A request asked the prompt thread for work after its model began to close
 * (an unload or a stop): the model went away under the request, which is not
 * the request's fault nor a failure of the server (src/http/errors.ts makes
 * it a 503 `model_unloading`).
 */
export class ModelClosedError extends Error {
  override name = "ModelClosedError";
}

export interface PromptThreadOptions {
  /** The GGUF file (its vocabulary is loaded, never its weights). */
  model: string;
  chatTemplate?: string;
  /** tokenizer.chat_template.tool_use, for requests with tools. */
  toolTemplate?: string;
  /** The BOS and EOS token ids: the thread renders their text (templates' bos_token, eos_token) from its vocabulary. */
  bos?: number;
  eos?: number;
  /** What strftime_now reports in templates. */
  loadedAt: Date;
}

export interface RenderRequest {
  /** Render with the tool-use template (when the GGUF has one). */
  tools: boolean;
  input: RenderInput;
  addBos: boolean;
  bosToken?: number;
  /** The model's reasoning markers, for endsInReasoning (default `<think>`). */
  reasoning?: { open: string; close: string };
}

export interface RenderedTokens {
  tokens: Int32Array<ArrayBuffer>;
  /** The prompt leaves a reasoning block open. */
  endsInReasoning: boolean;
}

export interface TokenizeOptions {
  addSpecial: boolean;
  /** Control-token text becomes its token (as llama_tokenize's parse_special). */
  parseSpecial: boolean;
}

/** What the daemon asks the thread. */
export type ThreadRequest =
  | ({ type: "init" } & PromptThreadOptions)
  | ({ type: "render"; id: number } & RenderRequest)
  | ({ type: "tokenize"; id: number; text: string } & TokenizeOptions)
  | { type: "close" };

/** What the thread answers. */
export type ThreadReply =
  | { type: "ready" }
  | { type: "failed"; message: string }
  | { type: "done"; id: number; tokens: Int32Array<ArrayBuffer>; endsInReasoning: boolean }
  | { type: "error"; id: number; message: string; templateKind?: TemplateError["kind"] };

interface Pending {
  resolve(reply: Extract<ThreadReply, { type: "done" }>): void;
  reject(err: Error): void;
}

/**
 * From source the entry is the file beside this one; in the compiled binary
 * build.ts bundles it as a second entrypoint, which Bun serves at this path
 * under the bundle's root (src/).
 */
function entryUrl(): string {
  const beside = new URL("./prompt-thread-entry.ts", import.meta.url);
  return beside.protocol === "file:" && existsSync(fileURLToPath(beside))
    ? beside.href
    : "./daemon/prompt-thread-entry.ts";
}

// Threads start one at a time: each compiles the libllama shim with TinyCC,
// which is not known to be safe to run twice at once in one process.
let starting: Promise<unknown> = Promise.resolve();

export class PromptThread {
  private running?: Promise<Worker>;
  /** The thread that answers, once it is ready. */
  private current?: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private closed = false;

  private constructor(private readonly opts: PromptThreadOptions) {}

  /** Starts the thread; resolves once it has loaded the vocabulary and parsed the templates. */
  static async start(opts: PromptThreadOptions): Promise<PromptThread> {
    const thread = new PromptThread(opts);
    await thread.worker();
    return thread;
  }

  /** Requests asked and not yet answered: prompts still being rendered or tokenized. */
  get inHand(): number {
    return this.pending.size;
  }

  /** Renders a chat and tokenizes it; a template's refusal rejects with a TemplateError. */
  async render(req: RenderRequest): Promise<RenderedTokens> {
    const reply = await this.ask((id) => ({ type: "render", id, ...req }));
    return { tokens: reply.tokens, endsInReasoning: reply.endsInReasoning };
  }

  async tokenize(text: string, opts: TokenizeOptions): Promise<Int32Array<ArrayBuffer>> {
    return (await this.ask((id) => ({ type: "tokenize", id, text, ...opts }))).tokens;
  }

  /** Stops the thread: at once when it has work in hand, else after it has freed its vocabulary. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const running = this.running;
    this.running = undefined;
    this.current = undefined;
    const busy = this.pending.size > 0;
    this.failPending(new ModelClosedError("the model is closing"));
    const worker = await running?.catch(() => undefined);
    if (!worker) return;
    const gone = new Promise<void>((resolve) => worker.addEventListener("close", () => resolve(), { once: true }));
    if (busy) worker.terminate();
    else worker.postMessage({ type: "close" } satisfies ThreadRequest);
    const grace = setTimeout(() => worker.terminate(), 2000);
    await gone;
    clearTimeout(grace);
  }

  private async ask(request: (id: number) => ThreadRequest): Promise<Extract<ThreadReply, { type: "done" }>> {
    let worker: Worker | undefined;
    // A thread that died while this request waited for it is replaced.
    while (worker === undefined || worker !== this.current) {
      if (this.closed) throw new ModelClosedError("the model is closed");
      worker = await this.worker();
    }
    const id = this.nextId++;
    const answer = new Promise<Extract<ThreadReply, { type: "done" }>>((resolve, reject) =>
      this.pending.set(id, { resolve, reject }),
    );
    worker.postMessage(request(id));
    return answer;
  }

  private worker(): Promise<Worker> {
    if (this.running) return this.running;
    const started = starting.then(() => this.spawn());
    starting = started.catch(() => {});
    this.running = started;
    started.then(
      (worker) => void (this.current = worker),
      () => {
        if (this.running === started) this.running = undefined;
      },
    );
    return started;
  }

  private spawn(): Promise<Worker> {
    return new Promise((resolve, reject) => {
      const worker = new Worker(entryUrl());
      // The daemon's life is its listener's; a thread never keeps it alive.
      worker.unref();
      let ready = false;
      worker.addEventListener("message", (event: MessageEvent<ThreadReply>) => {
        const reply = event.data;
        if (reply.type === "ready") {
          ready = true;
          resolve(worker);
        } else if (reply.type === "failed") {
          reject(new Error(reply.message));
          worker.terminate();
        } else this.answer(reply);
      });
      worker.addEventListener("error", (event) => {
        const err = new Error(`the prompt thread failed: ${(event as ErrorEvent).message}`);
        if (!ready) reject(err);
        this.lost(worker, err);
      });
      worker.addEventListener("close", () => {
        const err = new Error("the prompt thread stopped");
        if (!ready) reject(err);
        this.lost(worker, err);
      });
      worker.postMessage({ type: "init", ...this.opts } satisfies ThreadRequest);
    });
  }

  private answer(reply: Extract<ThreadReply, { type: "done" | "error" }>): void {
    const pending = this.pending.get(reply.id);
    if (!pending) return;
    this.pending.delete(reply.id);
    if (reply.type === "done") pending.resolve(reply);
    else
      pending.reject(
        reply.templateKind ? new TemplateError(reply.message, reply.templateKind) : new Error(reply.message),
      );
  }

  /** The thread died under us: what it had in hand fails, and the next request starts another. */
  private lost(worker: Worker, err: Error): void {
    if (this.current !== worker) return;
    this.current = undefined;
    this.running = undefined;
    this.failPending(err);
  }

  private failPending(err: Error): void {
    for (const pending of this.pending.values()) pending.reject(err);
    this.pending.clear();
  }
}
