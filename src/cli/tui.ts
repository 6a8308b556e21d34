// `serve --tui` (docs/cli.md#tui): the server's own `superfluid top` panel
// above a scrolling log of its startup and access lines. The panel scrapes
// the server's /metrics over loopback like any other monitor, so what it
// shows is exactly what Prometheus would read. `q`, Esc, Ctrl-C or Ctrl-D
// ask the server to stop (the caller stops it as on SIGINT).
import { newNode, nodeView, poll, renderLines, type Node } from "./top.ts";

const POLL_MS = 1000;
/** Log lines kept for the screen (the files under <sessions>/logs keep everything). */
const SCROLLBACK = 2000;
/** A burst of log lines repaints once. */
const PAINT_DELAY_MS = 30;

export class ServeTui {
  private readonly lines: string[] = [];
  private node: Node | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private pending: ReturnType<typeof setTimeout> | undefined;
  private running = false;
  private raw = false;
  private quitRequested!: () => void;
  /** Resolves when the operator asks to quit. */
  readonly quit = new Promise<void>((resolve) => (this.quitRequested = resolve));
  private readonly onResize = () => this.paint();
  private readonly onKey = (chunk: Buffer) => {
    // As in `top`: only a chunk of exactly Esc counts (arrow keys start with one).
    const text = chunk.toString("latin1");
    if (text === "\x1b" || /[qQ\x03\x04]/.test(text)) this.quitRequested();
  };

  constructor(
    private readonly out: NodeJS.WriteStream = process.stdout,
    private readonly input: NodeJS.ReadStream = process.stdin,
  ) {}

  /** Takes the terminal: alternate screen, cursor hidden, keys one at a time. */
  start(): void {
    this.running = true;
    this.out.write("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J");
    this.raw = this.input.isTTY === true;
    if (this.raw) this.input.setRawMode(true);
    this.input.on("data", this.onKey);
    this.input.resume();
    this.out.on("resize", this.onResize);
    this.paint();
  }

  /** One log line (or several, newline-separated) into the scrolling region. */
  readonly line = (text: string): void => {
    for (const l of text.split("\n")) this.lines.push(l);
    if (this.lines.length > SCROLLBACK) this.lines.splice(0, this.lines.length - SCROLLBACK);
    this.schedulePaint();
  };

  /** Starts the panel's scrapes of the server at `url` (known once it listens). */
  watch(url: string): void {
    this.node = newNode(url);
    this.node.target = url.replace(/^https?:\/\//, "");
    const tick = async () => {
      if (!this.node) return;
      await poll(this.node, undefined);
      this.paint();
    };
    void tick();
    this.timer = setInterval(() => void tick(), POLL_MS);
  }

  /** Gives the terminal back as it was. */
  stop(): void {
    if (!this.running) return;
    this.running = false;
    clearInterval(this.timer);
    clearTimeout(this.pending);
    this.out.off("resize", this.onResize);
    this.input.off("data", this.onKey);
    if (this.raw) this.input.setRawMode(false);
    this.input.pause();
    this.out.write("\x1b[?25h\x1b[?1049l");
  }

  /** The screen's lines (no escapes): the panel, a rule, then the newest log lines that fit. */
  screen(width: number, height: number, clock = new Date()): string[] {
    const panel = this.node
      ? renderLines([nodeView(this.node)], clock, "superfluid serve")
      : [`superfluid serve · starting · ${clock.toTimeString().slice(0, 8)} · q quits`, ""];
    const top = [...panel.slice(0, Math.max(1, height - 2)), "─".repeat(Math.min(width, 80))];
    const room = Math.max(0, height - top.length);
    return [...top, ...(room > 0 ? this.lines.slice(-room) : [])];
  }

  private schedulePaint(): void {
    if (this.pending !== undefined || !this.running) return;
    this.pending = setTimeout(() => {
      this.pending = undefined;
      this.paint();
    }, PAINT_DELAY_MS);
  }

  private paint(): void {
    if (!this.running) return;
    const width = this.out.columns || 80;
    const height = this.out.rows || 24;
    const lines = this.screen(width, height);
    // Home, each line clipped and its rest erased, then erase below: no flicker from a full clear.
    this.out.write(`\x1b[H${lines.map((l) => `${l.slice(0, width)}\x1b[K`).join("\r\n")}\x1b[J`);
  }
}
