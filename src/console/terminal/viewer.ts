import type { RawData, WebSocket } from 'ws';
import type { Logger } from '../../log/logger.js';
import type { TakeoverView, TerminalClientMessage, TerminalServerMessage } from '../protocol.js';
import {
  applyAck,
  type FlowLimits,
  type FlowState,
  flowAction,
  MAX_BAD_FRAMES,
  parseClientFrame,
} from './flow-rules.js';
import { filterInput, flushInput, INITIAL_INPUT, type InputState, inputPending } from './input-rules.js';
import type { ViewerPty } from './pty-viewer.js';
import { stopPid } from './stop.js';

/**
 * One browser terminal on one socket: its pty's output out (binary frames, coalesced per turn of the
 * event loop, paused and resumed by the browser's acknowledgements), its frames in. A viewer's input
 * and resizes go nowhere; a writer's go to the hub, input first filtered of terminal reports.
 */

export type Role = 'viewer' | 'writer';

/** What a viewer asks of its hub: a writer's keys (filtered) and resizes. */
export interface ViewerHooks {
  input(viewer: Viewer, keys: string): void;
  resize(viewer: Viewer, cols: number, rows: number): void;
  /** The socket is gone (whoever closed it): forget the viewer. */
  gone(viewer: Viewer): void;
}

/** A report split across frames waits this long for its rest; only a bare Escape key is delayed by it. */
const INPUT_FLUSH_MS = 30;

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
  private flow: FlowState = { sent: 0, acked: 0, buffered: 0, paused: false };
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

  /** Bytes sent and acknowledged so far, and whether the pty is paused (for tests and the bench). */
  get flowState(): Readonly<FlowState> {
    return this.flow;
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
    this.pty = pty;
    this.ptyExited = new Promise((resolve) => pty.onExit(() => resolve()));
    void this.ptyExited.then(() => {
      this.pty = null;
      // Not ours to end: the tmux client left because its session did (or its server).
      if (!this.ended) this.end(CLOSE.gone, 'the tmux session ended', true);
    });
    this.send({ t: 'hello', role: this.role, cols: size.cols, rows: size.rows, takeover });
    if (history.length > 0) this.output(history);
    pty.onData((data) => this.output(typeof data === 'string' ? Buffer.from(data, 'utf8') : data));
  }

  setRole(role: Role, takeover: TakeoverView | null): void {
    if (role !== this.role) this.resetInput();
    this.role = role;
    this.send({ t: 'role', role, takeover });
  }

  /** The window changed size: this client follows it, and the browser is told. */
  resize(cols: number, rows: number): void {
    if (this.ended) return;
    try {
      this.pty?.resize(cols, rows);
    } catch {
      // The client has just exited: its exit ends the viewer.
    }
    this.send({ t: 'size', cols, rows });
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
    this.flow = { ...this.flow, sent: this.flow.sent + data.length };
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
    const action = flowAction(this.flow, this.limits);
    if (action === 'none' || !this.pty) return;
    this.flow = { ...this.flow, paused: action === 'pause' };
    if (action === 'pause') this.pty.pause();
    else this.pty.resume();
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
      const acked = applyAck(this.flow, message.bytes);
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
