// The chat page of the --web listener: plain JavaScript, no framework and no
// build step, so the binary serves these bytes as they are
// (docs/api/web-page.md). It speaks the session API's JSON over WebSockets on
// /web/ws: one connection for short requests, and one of its own per running
// Generate, because a connection runs its requests one at a time and a
// Cancel or a session switch must not wait behind a stream.

(() => {
  const TOKEN_KEY = "superfluid.web-token";
  const STATS_KEY = "superfluid.reply-stats";
  const QOS_DEFAULT = 2; // the server's default class (agent) for a session nobody set
  const QOS_NAMES = ["interactive", "completion", "agent", "background"];
  const FINISH = { 0: "open", 1: "end of turn", 2: "max tokens", 3: "grammar", 4: "cancelled", 5: "error" };
  const CHANNEL = { text: 0, reasoning: 1, tool: 2 };

  const $ = (sel) => document.querySelector(sel);

  /** An element with a class and optional text (text is always set as text, never parsed as HTML). */
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function button(label, cls, onClick, title) {
    const b = el("button", cls, label);
    b.type = "button";
    if (title) b.title = title;
    b.addEventListener("click", onClick);
    return b;
  }

  // --- The token ------------------------------------------------------------
  // The server prints a URL carrying the token in its fragment, which never
  // leaves the browser. It is moved into this tab's sessionStorage and wiped
  // from the address bar, so it is neither bookmarked nor shown; no cookie is
  // involved, so another site's page has nothing to ride on.

  function takeToken() {
    const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
      history.replaceState(null, "", location.pathname + location.search);
    }
    return sessionStorage.getItem(TOKEN_KEY) || "";
  }

  // --- The wire ---------------------------------------------------------------

  class ServerError extends Error {}
  class ConnectError extends Error {}

  /** The variant name and fields of an externally tagged value ("Tree" or {"Created":{...}}). */
  function variant(v) {
    if (typeof v === "string") return [v, {}];
    if (v && typeof v === "object") {
      const k = Object.keys(v)[0];
      return [k, v[k] ?? {}];
    }
    return ["?", {}];
  }

  /**
   * One WebSocket on /web/ws. Requests queue here and go out one at a time,
   * matching the server's order: a reply is the next frame, except a Generate,
   * whose Delta frames stream until its Generated summary (or an Err).
   */
  class Conn {
    constructor(token) {
      this.token = token;
      this.ws = null;
      this.opening = null;
      this.queue = [];
      this.current = null;
      this.closed = false;
    }

    open() {
      if (this.ws) return Promise.resolve();
      if (this.opening) return this.opening;
      const url = `${location.origin.replace(/^http/, "ws")}/web/ws`;
      this.opening = new Promise((resolve, reject) => {
        let ws;
        try {
          ws = new WebSocket(url, ["superfluid.v1", `superfluid.token.${this.token}`]);
        } catch (e) {
          this.opening = null;
          reject(new ConnectError(String(e)));
          return;
        }
        ws.onopen = () => {
          this.ws = ws;
          this.opening = null;
          resolve();
        };
        ws.onmessage = (ev) => this.onFrame(ev.data);
        ws.onclose = () => {
          if (this.ws !== ws) {
            this.opening = null;
            reject(new ConnectError("the server refused the connection"));
            return;
          }
          this.ws = null;
          this.failAll(new ConnectError("the connection to the server closed"));
        };
      });
      return this.opening;
    }

    /** Sends one request; resolves with its final reply. `onDelta` receives a Generate's streamed events. */
    request(req, onDelta) {
      return new Promise((resolve, reject) => {
        this.queue.push({ req, onDelta, resolve, reject });
        this.pump();
      });
    }

    /** Like request, but an Err reply rejects. */
    async call(req, onDelta) {
      const reply = await this.request(req, onDelta);
      const [kind, body] = variant(reply);
      if (kind === "Err") throw new ServerError(body.message || "the server refused the request");
      return reply;
    }

    async pump() {
      if (this.current || this.queue.length === 0) return;
      const item = this.queue.shift();
      this.current = item;
      try {
        await this.open();
        this.ws.send(JSON.stringify(item.req));
      } catch (e) {
        this.current = null;
        item.reject(e);
        this.pump();
      }
    }

    onFrame(data) {
      const item = this.current;
      if (!item) return; // nothing asked: not a reply of ours
      let reply;
      try {
        reply = JSON.parse(data);
      } catch {
        reply = { Err: { message: "the server sent a frame that is not JSON" } };
      }
      const [kind, body] = variant(reply);
      if (kind === "Delta" && item.onDelta) {
        item.onDelta(body.event);
        return;
      }
      this.current = null;
      item.resolve(reply);
      this.pump();
    }

    failAll(err) {
      const pending = this.current ? [this.current, ...this.queue] : this.queue;
      this.current = null;
      this.queue = [];
      for (const p of pending) p.reject(err);
    }

    close() {
      this.closed = true;
      if (this.ws) this.ws.close();
      this.ws = null;
    }
  }

  // --- State ------------------------------------------------------------------

  const state = {
    token: "",
    ctl: null, // the connection for everything but Generate
    sessions: new Map(), // id -> SessionList entry
    selected: null, // session id, or null for a new chat not created yet
    view: null, // the LogView of the selected session
    gens: new Map(), // session id -> running generation
    draftQos: 0, // a chat page's sessions are interactive unless the user picks otherwise
    stats: loadStats(),
  };

  function loadStats() {
    try {
      return JSON.parse(sessionStorage.getItem(STATS_KEY) || "{}");
    } catch {
      return {};
    }
  }

  function saveStats() {
    try {
      sessionStorage.setItem(STATS_KEY, JSON.stringify(state.stats));
    } catch {
      // storage full or off: the figures stay for this page's life
    }
  }

  /**
   * A reply's figures (warm prefix, tokens, tok/s) exist only in the page that
   * watched it generate. A fork shares its parent's events below fork_at with
   * the same ids, so a reply it inherited is looked up on its ancestors.
   */
  function statsFor(session, first) {
    let id = session;
    for (let hops = 0; id !== null && id !== undefined && hops < 1000; hops++) {
      const s = state.stats[`${id}:${first}`];
      if (s) return s;
      const info = state.sessions.get(id);
      if (!info || info.parent === null || info.parent === undefined || first >= info.fork_at) return undefined;
      id = info.parent;
    }
    return undefined;
  }

  /** The nearest title on the session's ancestry (forks and edits show their origin's title). */
  function titleOf(id) {
    for (let cur = id, hops = 0; cur !== null && cur !== undefined && hops < 1000; hops++) {
      const info = state.sessions.get(cur);
      if (!info) break;
      if (info.title) return info.title;
      cur = info.parent;
    }
    return `Session ${id}`;
  }

  function shortTitle(text) {
    const one = text.replace(/\s+/g, " ").trim();
    return one.length > 48 ? `${one.slice(0, 47)}…` : one || "Untitled";
  }

  function readParams() {
    const num = (id, fallback) => {
      const v = Number($(id).value);
      return $(id).value.trim() === "" || !Number.isFinite(v) ? fallback : v;
    };
    return {
      temperature: num("#p-temperature", 0.7),
      top_p: num("#p-top_p", 0.95),
      min_p: num("#p-min_p", 0.05),
      top_k: Math.trunc(num("#p-top_k", 40)),
      seed: Math.trunc(num("#p-seed", randomSeed())),
    };
  }

  function randomSeed() {
    return crypto.getRandomValues(new Uint32Array(1))[0];
  }

  /** Generate's tool_choice (a superfluid extension): auto, required (a call must come) or none. */
  function toolChoice() {
    return $("#p-tool_choice").value || "auto";
  }

  function maxTokens() {
    const v = Math.trunc(Number($("#p-max_tokens").value));
    return Number.isFinite(v) && v > 0 ? v : 1024;
  }

  // --- Banner -----------------------------------------------------------------

  function showError(err) {
    const b = $("#banner");
    b.textContent = err instanceof Error ? err.message : String(err);
    b.hidden = false;
    if (err instanceof ConnectError) void explainConnectError();
  }

  function clearError() {
    $("#banner").hidden = true;
  }

  /** A refused WebSocket tells the page nothing; /web/health tells a dead server from a refused token. */
  async function explainConnectError() {
    let up = false;
    try {
      up = (await fetch("/web/health", { cache: "no-store" })).ok;
    } catch {
      up = false;
    }
    if (up) showGate("The server is up but refused this page's token (it makes a new one at every start).");
    else $("#banner").textContent = "The server is not reachable; start it again and reload this page.";
  }

  // --- The session log view -----------------------------------------------------

  /**
   * Renders one session's events, fed one at a time: the whole log after a
   * Read, then each Delta as it streams. Consecutive generated events form one
   * reply; its reasoning is folded; tool calls are cards that take a result.
   */
  class LogView {
    constructor(root, session) {
      this.root = root;
      this.session = session;
      this.events = [];
      this.lastId = -1;
      this.reply = null; // the reply being built, while only generated records follow
      this.cards = new Map(); // call_id -> card element
      this.params = null; // the sampling parameters in force (Created, Forked, Rebased)
      this.qos = QOS_DEFAULT;
      root.replaceChildren();
    }

    add(ev) {
      if (typeof ev.event_id === "number") {
        if (ev.event_id <= this.lastId) return; // a Read and a stream can overlap: ids de-duplicate
        this.lastId = ev.event_id;
      }
      this.events.push(ev);
      const [kind, body] = variant(ev.body);
      const id = ev.event_id;
      switch (kind) {
        case "Created":
          if (body.params) this.params = body.params;
          this.reply = null;
          break;
        case "Forked":
        case "Rebased":
          if (body.params) this.params = body.params;
          this.reply = null;
          this.note(
            kind === "Forked"
              ? `forked from session ${body.parent} at event ${body.fork_at}`
              : `edited copy of session ${body.parent}`,
            "fork-note",
          );
          break;
        case "Message":
          this.reply = null;
          this.message(id, body);
          break;
        case "GenerationPrompt":
          this.reply = this.newReply(id);
          break;
        case "Generated":
          this.generated(id, body);
          break;
        case "ToolUse":
          this.toolUse(id, body);
          break;
        case "ToolResult":
          this.reply = null;
          this.toolResult(id, body);
          break;
        case "Appended":
          this.reply = null;
          this.note(body.text ?? "(tokens appended)", "appended");
          break;
        case "QosSet":
          this.qos = body.class;
          // The class a chat starts with is in the top bar; a change mid-chat is worth a line.
          if (this.root.querySelector(".msg")) this.note(`QoS: ${QOS_NAMES[body.class] ?? body.class}`, "qos-note");
          break;
        case "EpochBump":
          break;
        default:
          this.note(kind, "other-note");
      }
      this.scroll();
    }

    /** The id the next committed event gets: a fork's Read includes what it inherited, so the log is complete. */
    nextId() {
      return this.lastId + 1;
    }

    note(text, cls) {
      const n = el("div", `note ${cls}`, text);
      this.root.append(n);
      return n;
    }

    message(id, body) {
      const role = ["system", "user", "assistant", "tool"][body.role] ?? "other";
      if (role === "system") {
        const d = el("details", "msg system");
        d.dataset.event = id;
        d.append(el("summary", "role", "system prompt"), el("div", "text", body.text ?? ""));
        this.root.append(d);
        return;
      }
      const m = el("article", `msg ${role}`);
      m.dataset.event = id;
      const text = el("div", "text", body.text ?? "");
      const actions = el("footer", "actions");
      if (role === "user")
        actions.append(
          button(
            "Edit",
            "edit",
            () => this.editMessage(m, id, text),
            "Edit this message and generate again (a new session)",
          ),
        );
      actions.append(
        button("Fork here", "fork", () => forkAt(this.session, id + 1), "A new session holding the chat up to here"),
      );
      m.append(el("div", "role", role), text, actions);
      this.root.append(m);
    }

    editMessage(m, id, textEl) {
      if (m.querySelector(".editor")) return;
      const editor = el("form", "editor");
      const ta = el("textarea");
      ta.value = textEl.textContent;
      ta.rows = Math.min(12, Math.max(2, ta.value.split("\n").length));
      const save = el("button", "save", "Save & regenerate");
      save.type = "submit";
      editor.append(
        ta,
        save,
        button("Cancel", "discard", () => editor.remove()),
      );
      editor.addEventListener("submit", (e) => {
        e.preventDefault();
        editor.remove();
        void rebaseFrom(this.session, id, this.nextId(), ta.value);
      });
      textEl.after(editor);
      ta.focus();
    }

    newReply(first) {
      const r = el("article", "msg reply");
      r.dataset.first = first;
      r.dataset.last = first;
      r.dataset.state = "done";
      r.dataset.tokens = "0";
      const body = el("div", "reply-body");
      const meta = el("footer", "actions");
      const stats = el("span", "stats");
      meta.append(
        stats,
        button(
          "Fork here",
          "fork",
          () => forkAt(this.session, Number(r.dataset.last) + 1),
          "A new session holding the chat up to here",
        ),
        button(
          "Regenerate",
          "regenerate",
          () => regenerate(this.session, first),
          "Draw this reply again with a new seed (a new session)",
        ),
      );
      r.append(el("div", "role", "assistant"), body, meta);
      this.root.append(r);
      return { el: r, body, stats, first, seg: null, segChannel: -1 };
    }

    generated(id, body) {
      if (!this.reply) this.reply = this.newReply(id);
      const reply = this.reply;
      reply.el.dataset.last = id;
      reply.el.dataset.finish = body.finish;
      reply.el.dataset.tokens = String(Number(reply.el.dataset.tokens) + (body.span?.length ?? 0));
      if (body.text) {
        if (reply.segChannel !== body.channel) {
          reply.seg = this.segment(reply, body.channel);
          reply.segChannel = body.channel;
        }
        reply.seg.textContent += body.text;
      }
      this.refreshStats(reply);
    }

    segment(reply, channel) {
      if (channel === CHANNEL.reasoning) {
        const d = el("details", "reasoning");
        const text = el("div", "text");
        d.append(el("summary", "", "Reasoning"), text);
        reply.body.append(d);
        return text;
      }
      if (channel === CHANNEL.tool) {
        const d = el("details", "tool-markup");
        const text = el("pre", "text");
        d.append(el("summary", "", "tool call (as generated)"), text);
        reply.body.append(d);
        return text;
      }
      const text = el("div", "text");
      reply.body.append(text);
      return text;
    }

    toolUse(id, body) {
      if (!this.reply) this.reply = this.newReply(id);
      this.reply.el.dataset.last = id;
      this.reply.segChannel = -1; // text after a card starts a new block below it
      const card = el("div", "tool-card");
      card.dataset.call = id;
      let args = body.arguments ?? "";
      try {
        args = JSON.stringify(typeof args === "string" ? JSON.parse(args) : args, null, 2);
      } catch {
        // not JSON: shown as the model wrote it
      }
      const result = el("div", "tool-result pending", "awaiting result");
      card.append(el("div", "tool-name", `tool call · ${body.name ?? "?"}`), el("pre", "tool-args", args), result);
      const form = el("form", "tool-answer");
      const input = el("textarea");
      input.rows = 2;
      input.placeholder = "tool result";
      const submit = el("button", "", "Send result");
      submit.type = "submit";
      form.append(input, submit);
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        void answerTool(this.session, id, input.value);
      });
      card.append(form);
      this.reply.body.append(card);
      this.cards.set(id, card);
    }

    toolResult(id, body) {
      const card = this.cards.get(body.call_id);
      if (card) {
        const r = card.querySelector(".tool-result");
        r.textContent = body.content ?? "";
        r.classList.remove("pending");
        card.querySelector(".tool-answer")?.remove();
        return;
      }
      const m = el("article", "msg tool");
      m.dataset.event = id;
      m.append(el("div", "role", `tool result (call ${body.call_id})`), el("div", "text", body.content ?? ""));
      this.root.append(m);
    }

    refreshStats(reply) {
      const tokens = Number(reply.el.dataset.tokens);
      const s = statsFor(this.session, reply.first);
      const finish = Number(reply.el.dataset.finish);
      const parts = [];
      if (s) {
        parts.push(`${s.warm} warm`, `${s.tokens} tokens`, `${s.tps.toFixed(1)} tok/s`);
      } else if (tokens > 0) parts.push(`${tokens} tokens`);
      if (finish > 1) parts.push(FINISH[finish] ?? `finish ${finish}`);
      reply.stats.textContent = parts.join(" · ");
    }

    /** The reply the log ends in, if it does (a Generate continues it or opens the next). */
    lastReply() {
      return this.reply;
    }

    setStreaming(on) {
      this.root.querySelector(".pending-reply")?.remove();
      for (const r of this.root.querySelectorAll('.reply[data-state="streaming"]')) r.dataset.state = "done";
      if (!on) {
        if (this.reply) this.refreshStats(this.reply);
        return;
      }
      if (this.reply) this.reply.el.dataset.state = "streaming";
      else this.root.append(el("div", "pending-reply", "generating…"));
      this.scroll(true);
    }

    /** Whether Generate has something to answer or continue: a user turn or tool result, or a cut reply. */
    canGenerate() {
      const last = this.events[this.events.length - 1];
      if (!last) return false;
      const [kind, body] = variant(last.body);
      if (kind === "Message") return body.role === 1 || body.role === 3;
      if (kind === "ToolResult" || kind === "Appended" || kind === "GenerationPrompt") return true;
      if (kind === "Generated") return body.finish === 0 || body.finish === 2 || body.finish === 4;
      return false;
    }

    scroll(force) {
      const log = this.root;
      const nearBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 120;
      if (force || nearBottom) log.scrollTop = log.scrollHeight;
    }
  }

  /** Streams a Delta's event into the view when its session is the one shown. */
  function deliver(session, ev) {
    if (state.view && state.view.session === session) {
      const pending = state.view.root.querySelector(".pending-reply");
      state.view.add(ev);
      if (pending && state.view.reply) {
        pending.remove();
        state.view.reply.el.dataset.state = "streaming";
      }
    }
  }

  // --- Actions --------------------------------------------------------------------

  async function select(id) {
    clearError();
    state.selected = id;
    sessionStorage.setItem("superfluid.selected", id === null ? "" : String(id));
    renderSidebar();
    const log = $("#log");
    if (id === null) {
      state.view = null;
      log.replaceChildren(el("div", "empty", "Start a chat: write a message below."));
      $("#qos").value = String(state.draftQos);
      updateControls();
      return;
    }
    const view = new LogView(log, id);
    state.view = view;
    updateControls();
    try {
      const reply = await state.ctl.call({ Read: { session: id, cursor: 0 } });
      if (state.view !== view) return; // another session was picked meanwhile
      for (const ev of variant(reply)[1].events ?? []) view.add(ev);
      view.scroll(true);
      if (state.gens.has(id)) view.setStreaming(true);
    } catch (e) {
      showError(e);
    }
    updateControls();
  }

  async function send(text) {
    if (!text.trim()) return;
    clearError();
    try {
      let s = state.selected;
      if (s === null) s = await createSession(text);
      else if (!state.sessions.get(s)?.title && state.sessions.get(s)?.parent == null) {
        await state.ctl.call({
          SetMeta: { session: s, expected_version: null, title: shortTitle(text), archived: null },
        });
      }
      const c = await state.ctl.call({ AppendMessage: { session: s, role: 1, text } });
      $("#input").value = "";
      if (state.view?.session !== s) await select(s);
      else state.view.add(variant(c)[1].event);
      void generate(s);
    } catch (e) {
      showError(e);
    }
  }

  /** Creates the session a new chat's first message goes to: sampling, system prompt and tools from the settings. */
  async function createSession(firstText) {
    let tools = [];
    const raw = $("#p-tools").value.trim();
    if (raw) {
      const parsed = JSON.parse(raw);
      if (!Array.isArray(parsed)) throw new Error("tools must be a JSON array");
      tools = parsed.map((t) => JSON.stringify(t));
    }
    const created = await state.ctl.call({ Create: { parent: null, params: readParams() } });
    const s = variant(created)[1].session;
    const system = $("#p-system").value;
    if (system.trim() || tools.length)
      await state.ctl.call({ AppendSystem: { session: s, text: system.trim() ? system : null, tools } });
    await state.ctl.call({ SetQos: { session: s, class: state.draftQos, batch_invariant: false } });
    await state.ctl.call({
      SetMeta: { session: s, expected_version: null, title: shortTitle(firstText), archived: null },
    });
    await refreshSessions();
    await select(s);
    return s;
  }

  /** Runs one Generate on a connection of its own, streaming its events into the view. */
  async function generate(s) {
    if (state.gens.has(s)) return;
    const conn = new Conn(state.token);
    const g = {
      conn,
      sent: performance.now(),
      firstAt: 0,
      deltas: 0,
      firstTokens: 0,
      firstEvent: undefined,
      cancelling: false,
    };
    state.gens.set(s, g);
    if (state.view?.session === s) state.view.setStreaming(true);
    updateControls();
    try {
      const reply = await conn.call(
        { Generate: { session: s, max_tokens: maxTokens(), tool_choice: toolChoice() } },
        (ev) => {
          const [kind, body] = variant(ev.body);
          // A turn this Generate opened starts at its first event; one it continued started earlier.
          if (g.firstEvent === undefined) g.firstEvent = kind === "GenerationPrompt" ? ev.event_id : null;
          if (kind === "Generated") {
            if (g.deltas === 0) {
              g.firstAt = performance.now();
              g.firstTokens = body.span?.length ?? 0;
            }
            g.deltas++;
          }
          deliver(s, ev);
        },
      );
      const done = performance.now();
      const sum = variant(reply)[1];
      // tok/s is the decode rate after the first token (the first waits on the
      // prefill); a reply that arrived in one commit falls back to the whole wait.
      const tokensAfterFirst = sum.tokens_generated - g.firstTokens;
      const tps =
        g.deltas >= 2 && tokensAfterFirst > 0 && done > g.firstAt
          ? tokensAfterFirst / ((done - g.firstAt) / 1000)
          : sum.tokens_generated / (Math.max(1, done - g.sent) / 1000);
      const view = state.view?.session === s ? state.view : null;
      const first = view?.lastReply()?.first ?? g.firstEvent ?? undefined;
      if (first !== undefined) {
        state.stats[`${s}:${first}`] = { warm: sum.warm_prefix, tokens: sum.tokens_generated, tps, finish: sum.finish };
        saveStats();
      }
      if (view?.lastReply()) view.lastReply().el.dataset.finish = sum.finish;
    } catch (e) {
      showError(e);
    } finally {
      conn.close();
      state.gens.delete(s);
      if (state.view?.session === s) state.view.setStreaming(false);
      updateControls();
      void refreshSessions();
    }
  }

  async function cancel(s) {
    const g = state.gens.get(s);
    if (!g || g.cancelling) return;
    g.cancelling = true;
    updateControls();
    try {
      await state.ctl.call({ Cancel: { session: s } });
    } catch (e) {
      // the generation may have ended between the click and the request
      if (state.gens.has(s)) showError(e);
    }
  }

  async function forkAt(s, atEvent) {
    clearError();
    try {
      const reply = await state.ctl.call({ Fork: { session: s, at_event: atEvent, params: null } });
      const child = variant(reply)[1].session;
      await refreshSessions();
      await select(child);
      $("#input").focus();
    } catch (e) {
      showError(e);
    }
  }

  /** "Edit this message and drop what followed": a Rebase replacing it to the session's end, then a reply. */
  async function rebaseFrom(s, from, to, text) {
    clearError();
    try {
      const reply = await state.ctl.call({
        Rebase: { session: s, edits: [{ Replace: { from, to, role: 1, text } }], params: null },
      });
      const child = variant(reply)[1].session;
      await refreshSessions();
      await select(child);
      void generate(child);
    } catch (e) {
      showError(e);
    }
  }

  /** A fork just before the reply, with a new seed: the same seed would draw the same reply again. */
  async function regenerate(s, replyFirst) {
    clearError();
    try {
      const params =
        state.view?.session === s && state.view.params ? { ...state.view.params, seed: randomSeed() } : null;
      const reply = await state.ctl.call({ Fork: { session: s, at_event: replyFirst, params } });
      const child = variant(reply)[1].session;
      await refreshSessions();
      await select(child);
      void generate(child);
    } catch (e) {
      showError(e);
    }
  }

  async function answerTool(s, callId, content) {
    clearError();
    try {
      const c = await state.ctl.call({ AppendToolResult: { session: s, call_id: callId, content } });
      if (state.view?.session === s) state.view.add(variant(c)[1].event);
      void generate(s);
    } catch (e) {
      showError(e);
    }
  }

  async function setQos(cls) {
    if (state.selected === null) {
      state.draftQos = cls;
      return;
    }
    const s = state.selected;
    try {
      const c = await state.ctl.call({ SetQos: { session: s, class: cls, batch_invariant: false } });
      if (state.view?.session === s) state.view.add(variant(c)[1].event);
    } catch (e) {
      showError(e);
      if (state.view?.session === s) $("#qos").value = String(state.view.qos);
    }
  }

  async function archive(id) {
    try {
      await state.ctl.call({ SetMeta: { session: id, expected_version: null, title: null, archived: true } });
      if (state.selected === id) await select(null);
      await refreshSessions();
    } catch (e) {
      showError(e);
    }
  }

  // --- The sidebar ------------------------------------------------------------------

  async function refreshSessions() {
    try {
      const reply = await state.ctl.call({ Sessions: { include_archived: $("#show-archived").checked } });
      // Every HTTP request is a session too; the sidebar lists the conversations made here.
      const sessions = (variant(reply)[1].sessions ?? []).filter((s) => s.source !== "http");
      state.sessions = new Map(sessions.map((s) => [s.id, s]));
      renderSidebar();
    } catch (e) {
      showError(e);
    }
  }

  function renderSidebar() {
    const children = new Map();
    const roots = [];
    for (const s of state.sessions.values()) {
      if (s.parent !== null && s.parent !== undefined && state.sessions.has(s.parent)) {
        if (!children.has(s.parent)) children.set(s.parent, []);
        children.get(s.parent).push(s);
      } else roots.push(s);
    }
    roots.sort((a, b) => (b.updated_unix_ms ?? 0) - (a.updated_unix_ms ?? 0) || b.id - a.id);
    const item = (s, depth) => {
      const li = el("li");
      li.dataset.session = s.id;
      if (s.id === state.selected) li.classList.add("selected");
      if (s.archived) li.classList.add("archived");
      const row = el("div", "row");
      const open = button("", "open", () => void select(s.id));
      const label = el("span", "label", titleOf(s.id));
      const meta = el(
        "span",
        "meta",
        s.parent !== null && s.parent !== undefined
          ? `#${s.id} · fork @${s.fork_at} · ${s.events} ev`
          : `#${s.id} · ${s.events} ev`,
      );
      open.append(label, meta);
      if (state.gens.has(s.id)) open.append(el("span", "live", "●"));
      row.append(open);
      if (!s.archived) row.append(button("×", "archive", () => void archive(s.id), "Archive (hide) this session"));
      li.append(row);
      const kids = (children.get(s.id) ?? []).sort((a, b) => a.id - b.id);
      if (kids.length && depth < 64) {
        const ul = el("ul");
        for (const k of kids) ul.append(item(k, depth + 1));
        li.append(ul);
      }
      return li;
    };
    const tree = $("#sessions .tree");
    tree.replaceChildren(...roots.map((s) => item(s, 0)));
    $("#new-chat").classList.toggle("selected", state.selected === null);
    $("#title").textContent = state.selected === null ? "New chat" : titleOf(state.selected);
    const info = state.selected === null ? undefined : state.sessions.get(state.selected);
    $("#session-info").textContent = info
      ? `session ${info.id}${info.parent != null ? ` · fork of ${info.parent} at ${info.fork_at}` : ""}`
      : "";
  }

  // --- Controls ---------------------------------------------------------------------

  function updateControls() {
    const s = state.selected;
    const g = s === null ? undefined : state.gens.get(s);
    $("#send").disabled = Boolean(g);
    $("#cancel").hidden = !g;
    $("#cancel").disabled = Boolean(g?.cancelling);
    $("#cancel").textContent = g?.cancelling ? "Cancelling…" : "Cancel";
    const v = state.view;
    $("#continue").hidden = Boolean(g) || !v || !v.canGenerate();
    $("#continue").textContent = v?.lastReply() ? "Continue" : "Generate";
    if (v) $("#qos").value = String(v.qos);
    document.body.dataset.generating = g ? "1" : "";
    renderSidebar();
  }

  function showGate(message) {
    $("#token-gate").hidden = false;
    $("#gate-error").textContent = message || "";
    $("#token-input").focus();
  }

  async function connect() {
    state.ctl?.close();
    state.ctl = new Conn(state.token);
    try {
      await state.ctl.open();
    } catch {
      await explainConnectError();
      return false;
    }
    $("#token-gate").hidden = true;
    await refreshSessions();
    const saved = sessionStorage.getItem("superfluid.selected");
    const id = saved ? Number(saved) : null;
    await select(id !== null && state.sessions.has(id) ? id : null);
    return true;
  }

  function wire() {
    $("#composer").addEventListener("submit", (e) => {
      e.preventDefault();
      if (state.selected !== null && state.gens.has(state.selected)) return;
      void send($("#input").value);
    });
    $("#input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        $("#composer").requestSubmit();
      }
    });
    $("#cancel").addEventListener("click", () => state.selected !== null && void cancel(state.selected));
    $("#continue").addEventListener("click", () => state.selected !== null && void generate(state.selected));
    $("#new-chat").addEventListener("click", () => void select(null));
    $("#refresh").addEventListener("click", () => void refreshSessions());
    $("#show-archived").addEventListener("change", () => void refreshSessions());
    $("#qos").addEventListener("change", (e) => void setQos(Number(e.target.value)));
    $("#settings-toggle").addEventListener("click", () => {
      const panel = $("#settings");
      panel.hidden = !panel.hidden;
      $("#settings-toggle").setAttribute("aria-expanded", String(!panel.hidden));
    });
    $("#token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      state.token = $("#token-input").value.trim();
      sessionStorage.setItem(TOKEN_KEY, state.token);
      void connect();
    });
    // Sessions another client made show up when the page comes back into view.
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible" && state.ctl) void refreshSessions();
    });
  }

  wire();
  state.token = takeToken();
  if (!state.token) showGate();
  else void connect();
})();
