import type { RawData, WebSocket } from 'ws';
import type { Logger } from '../../log/logger.js';
import type { TakeoverView, TerminalClientMessage, TerminalServerMessage } from '../protocol.js';
import {
  applyAck,
  type FlowAction,
  type FlowLimits,
  type FlowState,
  flowAction,
  INITIAL_FLOW,
  MAX_BAD_FRAMES,
  noteSent,
  parkDue,
  parseClientFrame,
  stepFlow,
} from './flow-rules.js';
import { filterInput, flushInput, INITIAL_INPUT, type InputState, inputPending } from './input-rules.js';
import type { ViewerPty } from './pty-viewer.js';
import { stopPid } from './stop.js';

/**
 * One browser terminal on one socket: its pty's output out (binary frames, coalesced per turn of the
 * event loop, paused and resumed by the browser's acknowledgements; a browser that stops reading has
 * its tmux client ended — parked — until it reads again, then a new one attached: flow-rules.ts), its
 * frames in. A viewer's input and resizes go nowhere; a writer's go to the hub, input first filtered
 * of terminal reports.
 */

export type Role = 'viewer' | 'writer';

/** What a viewer asks of its hub: a writer's keys (filtered) and resizes. */
export interface ViewerHooks {
  input(viewer: Viewer, keys: string): void;
  resize(viewer: Viewer, cols: number, rows: number): void;
  /** The socket is gone (whoever closed it): forget the viewer. */
  gone(viewer: Viewer): void;
  /** A parked viewer reads again: start a new client (then `reattached`, or end the viewer). */
  reattach(viewer: Viewer): void;
}

/** A report split across frames waits this long for its rest; only a bare Escape key is delayed by it. */
const INPUT_FLUSH_MS = 30;

/**
 * Sent before a re-attached client's first byte: CAN ends any escape sequence the parked client's
 * last frame cut short (ECMA-48; xterm.js goes back to ground on it), so the redraw is read as such.
 */
const CANCEL_SEQUENCE = Buffer.from([0x18]);

/** WebSocket close codes of the terminal socket (4xxx: ours). */
export const CLOSE = {
  policy: 1008,
  goingAway: 1001,
  error: 1011,
  notFound: 4404,
  gone: 4410,
  tooMany: 4429,
} as const;

export class Viewer {
  private pty: ViewerPty | null = null;
  private ptyExited: Promise<void> = Promise.resolve();
  private ptyData: { dispose(): void } | null = null;
  private flow: FlowState = INITIAL_FLOW;
  /** The terminal size the browser was last told. */
  private size = { cols: 0, rows: 0 };
  private parkTimer: NodeJS.Timeout | undefined;
  private parkTimerDue: number | null = null;
  private chunks: Buffer[] = [];
  private flushing = false;
  private input: InputState = INITIAL_INPUT;
  private inputTimer: NodeJS.Timeout | undefined;
  private ended = false;
  /** Frames that were not a valid message (non-JSON, unknown, binary, a lying ack). */
  bad = 0;
  /** Valid frames a viewer may not send (input, resize): ignored. */
  ignored = 0;

  constructor(
    readonly socket: WebSocket,
    readonly principal: string,
    public role: Role,
    private readonly limits: FlowLimits,
    private readonly hooks: ViewerHooks,
    private readonly logger: Logger,
  ) {
    socket.on('message', (data, isBinary) => this.frame(data, isBinary));
    socket.on('close', () => this.dispose());
    // A socket error is followed by its close; the error itself carries nothing for us.
    socket.on('error', () => {});
  }

  get closed(): boolean {
    return this.ended;
  }

  /** Bytes sent and acknowledged so far, and whether the pty is paused or parked (tests, the bench). */
  get flowState(): Readonly<FlowState> {
    return this.flow;
  }

  get parked(): boolean {
    return this.flow.parkedAcked !== null;
  }

  /** Start showing: `hello`, the scrollback, then the live client's output. */
  start(
    pty: ViewerPty,
    size: { cols: number; rows: number },
    history: Buffer,
    takeover: TakeoverView | null,
  ): void {
    if (this.ended) {
      pty.kill('SIGHUP');
      return;
    }
    this.size = size;
    this.send({ t: 'hello', role: this.role, cols: size.cols, rows: size.rows, takeover });
    if (history.length > 0) this.output(history);
    this.attachPty(pty);
  }

  /** A parked viewer's new client (the hub's answer to `reattach`): tmux redraws the screen on it. */
  reattached(pty: ViewerPty, size: { cols: number; rows: number }): void {
    if (this.ended) {
      pty.kill('SIGHUP');
      return;
    }
    if (size.cols !== this.size.cols || size.rows !== this.size.rows) {
      this.size = size;
      this.send({ t: 'size', cols: size.cols, rows: size.rows });
    }
    this.output(CANCEL_SEQUENCE);
    this.attachPty(pty);
    this.applyFlow();
  }

  private attachPty(pty: ViewerPty): void {
    this.pty = pty;
    const exited = new Promise<void>((resolve) => pty.onExit(() => resolve()));
    this.ptyExited = exited;
    void exited.then(() => {
      // A parked client was ended by us; only the current one's exit means anything.
      if (this.pty !== pty) return;
      this.pty = null;
      // Not ours to end: the tmux client left because its session did (or its server).
      if (!this.ended) this.end(CLOSE.gone, 'the tmux session ended', true);
    });
    this.ptyData = pty.onData((data) =>
      this.output(typeof data === 'string' ? Buffer.from(data, 'utf8') : data),
    );
  }

  setRole(role: Role, takeover: TakeoverView | null): void {
    if (role !== this.role) this.resetInput();
    this.role = role;
    this.send({ t: 'role', role, takeover });
  }

  /** The window changed size: this client follows it, and the browser is told. */
  resize(cols: number, rows: number): void {
    if (this.ended) return;
    this.size = { cols, rows };
    try {
      this.pty?.resize(cols, rows);
    } catch {
      // The client has just exited: its exit ends the viewer.
    }
    this.send({ t: 'size', cols, rows });
  }

  /**
   * The window is this size now (the hub's poll): a started client showing another follows it. One not
   * yet started reads the size itself; a parked one is told when it is re-attached.
   */
  follow(cols: number, rows: number): void {
    if (!this.pty || (this.size.cols === cols && this.size.rows === rows)) return;
    this.resize(cols, rows);
  }

  /** Close the socket (telling the browser why when `notice`) and end the pty. */
  end(code: number, reason: string, notice = false): void {
    if (!this.ended && notice) this.send({ t: 'closed', reason });
    if (this.socket.readyState === this.socket.OPEN || this.socket.readyState === this.socket.CONNECTING) {
      this.socket.close(code, reason.slice(0, 120));
    }
    this.dispose();
  }

  /** Resolves once the pty's client has exited (ended by pid: SIGHUP, then SIGKILL). */
  stopped(): Promise<void> {
    const pty = this.pty;
    if (!pty) return Promise.resolve();
    return stopPid(pty.pid, this.ptyExited, 'SIGHUP').then(() => {});
  }

  private dispose(): void {
    if (this.ended) return;
    this.ended = true;
    this.resetInput();
    this.clearParkTimer();
    this.chunks = [];
    this.hooks.gone(this);
    if (this.pty) void this.stopped();
  }

  private output(data: Buffer): void {
    if (this.ended) return;
    this.chunks.push(data);
    if (this.flushing) return;
    this.flushing = true;
    // Coalesced per turn of the event loop: one frame for all the pty gave in this turn.
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.flushing = false;
    if (this.ended || this.chunks.length === 0) return;
    const data = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
    this.chunks = [];
    this.flow = noteSent(this.flow, data.length, performance.now());
    this.socket.send(data, { binary: true }, () => this.drained());
    this.flow = { ...this.flow, buffered: this.socket.bufferedAmount };
    this.applyFlow();
  }

  private drained(): void {
    if (this.ended) return;
    this.flow = { ...this.flow, buffered: this.socket.bufferedAmount };
    this.applyFlow();
  }

  private applyFlow(): void {
    // No client yet (the first, or a re-attached one, is on its way): decided once it is there.
    if (this.ended || (!this.pty && !this.parked)) return;
    const now = performance.now();
    const action = flowAction(this.flow, this.limits, now);
    if (action !== 'none') {
      this.flow = stepFlow(this.flow, action, now);
      this.act(action);
    }
    this.armParkTimer();
  }

  private act(action: FlowAction): void {
    if (action === 'pause') this.pty?.pause();
    else if (action === 'resume') this.pty?.resume();
    else if (action === 'park') this.park();
    else if (action === 'unpark') this.hooks.reattach(this);
  }

  /** End the client (by pid, as stop.ts does); what it had not yet given is dropped with it. */
  private park(): void {
    const pty = this.pty;
    if (!pty) return;
    this.pty = null;
    this.ptyData?.dispose();
    this.ptyData = null;
    this.chunks = [];
    // Read again, so that its end reaches node-pty at once (a paused master only closes on a timer).
    pty.resume();
    void stopPid(pty.pid, this.ptyExited, 'SIGHUP');
  }

  /** Nothing else may happen while a browser keeps still: a timer brings the park decision. */
  private armParkTimer(): void {
    const due = this.pty ? parkDue(this.flow, this.limits) : null;
    if (due === this.parkTimerDue) return;
    this.clearParkTimer();
    if (due === null) return;
    this.parkTimerDue = due;
    this.parkTimer = setTimeout(
      () => {
        this.parkTimerDue = null;
        this.applyFlow();
      },
      Math.max(0, Math.ceil(due - performance.now())),
    );
    this.parkTimer.unref();
  }

  private clearParkTimer(): void {
    clearTimeout(this.parkTimer);
    this.parkTimer = undefined;
    this.parkTimerDue = null;
  }

  private frame(data: RawData, isBinary: boolean): void {
    if (this.ended) return;
    const parsed = isBinary ? null : parseClientFrame(rawText(data));
    if (!parsed?.ok) {
      this.badFrame(parsed ? parsed.why : 'binary frame');
      return;
    }
    const message: TerminalClientMessage = parsed.message;
    if (message.t === 'ack') {
      const acked = applyAck(this.flow, message.bytes, performance.now());
      if (acked.bad) this.badFrame('ack beyond what was sent');
      else {
        this.flow = { ...acked.state, buffered: this.socket.bufferedAmount };
        this.applyFlow();
      }
      return;
    }
    // Read-only is enforced here: a viewer's keys, reports and sizes go nowhere.
    if (this.role !== 'writer') {
      this.ignored++;
      return;
    }
    if (message.t === 'resize') this.hooks.resize(this, message.cols, message.rows);
    else this.typed(message.data);
  }

  private typed(data: string): void {
    clearTimeout(this.inputTimer);
    const result = filterInput(this.input, data);
    this.input = result.state;
    if (result.keep) this.hooks.input(this, result.keep);
    if (inputPending(this.input)) {
      this.inputTimer = setTimeout(() => {
        const rest = flushInput(this.input);
        this.input = rest.state;
        if (rest.keep && this.role === 'writer' && !this.ended) this.hooks.input(this, rest.keep);
      }, INPUT_FLUSH_MS);
    }
  }

  private resetInput(): void {
    clearTimeout(this.inputTimer);
    this.inputTimer = undefined;
    this.input = INITIAL_INPUT;
  }

  private badFrame(why: string): void {
    this.bad++;
    if (this.bad === 1) this.logger.debug('terminal socket: bad frame ignored', { why });
    if (this.bad > MAX_BAD_FRAMES) this.end(CLOSE.policy, 'too many bad frames');
  }

  private send(message: TerminalServerMessage): void {
    if (this.socket.readyState === this.socket.OPEN) this.socket.send(JSON.stringify(message));
  }
}

function rawText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}
