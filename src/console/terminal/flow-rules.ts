/**
 * The terminal socket's rules (pure): when a viewer's output stops and goes on (flow control), what a
 * client frame is, and what sizes a writer may ask for.
 *
 * Flow control: the browser acknowledges the bytes it has written to its terminal. Above HIGH bytes
 * unacknowledged (or queued in the socket, for a client that acknowledges without reading) the
 * viewer's pty is paused: its tmux client's terminal output then blocks, and tmux, which never waits
 * for a client, stops drawing to that client and redraws it whole once it drains (tmux tty.c,
 * TTY_BLOCK) — so the agent never waits for a browser. Below LOW the pty reads again.
 */

export interface FlowLimits {
  high: number;
  low: number;
}

/** 512 KiB: about a second of a fast TUI at full tilt; a browser on loopback acknowledges far sooner. */
export const FLOW_HIGH = 512 * 1024;
/** 128 KiB: resume with room to spare, so a pty does not flap between paused and reading. */
export const FLOW_LOW = 128 * 1024;

export interface FlowState {
  /** Bytes sent to the socket since connect. */
  sent: number;
  /** The highest total the client acknowledged. */
  acked: number;
  /** Bytes still queued in the socket (ws bufferedAmount). */
  buffered: number;
  paused: boolean;
}

export type FlowAction = 'pause' | 'resume' | 'none';

/** Whether the pty should pause or resume now. */
export function flowAction(state: FlowState, limits: FlowLimits): FlowAction {
  const behind = Math.max(state.sent - state.acked, state.buffered);
  if (!state.paused && behind > limits.high) return 'pause';
  if (state.paused && behind < limits.low) return 'resume';
  return 'none';
}

/**
 * A client's acknowledgement: the total it has written. Only a whole number between what it already
 * acknowledged and what was sent moves it (a lie about the future counts as bad; an old total is
 * harmless and ignored).
 */
export function applyAck(state: FlowState, bytes: number): { state: FlowState; bad: boolean } {
  if (!Number.isSafeInteger(bytes) || bytes < 0 || bytes > state.sent) return { state, bad: true };
  return { state: bytes > state.acked ? { ...state, acked: bytes } : state, bad: false };
}

/**
 * A client frame of the terminal socket: the shape of protocol.ts's TerminalClientMessage, spelled
 * out here because the centre imports no adapter (viewer.ts passes one for the other, so the compiler
 * keeps them the same).
 */
export type ClientFrame =
  | { t: 'ack'; bytes: number }
  | { t: 'input'; data: string }
  | { t: 'resize'; cols: number; rows: number };

/** Bad frames (non-JSON, unknown, binary) a socket may send before it is closed with 1008. */
export const MAX_BAD_FRAMES = 200;

/** One client frame: a message, or why it is bad. */
export function parseClientFrame(
  data: string,
): { ok: true; message: ClientFrame } | { ok: false; why: string } {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return { ok: false, why: 'not JSON' };
  }
  if (!value || typeof value !== 'object') return { ok: false, why: 'not an object' };
  const frame = value as Record<string, unknown>;
  switch (frame.t) {
    case 'ack':
      return typeof frame.bytes === 'number'
        ? { ok: true, message: { t: 'ack', bytes: frame.bytes } }
        : { ok: false, why: 'ack without bytes' };
    case 'input':
      return typeof frame.data === 'string'
        ? { ok: true, message: { t: 'input', data: frame.data } }
        : { ok: false, why: 'input without data' };
    case 'resize':
      return typeof frame.cols === 'number' && typeof frame.rows === 'number'
        ? { ok: true, message: { t: 'resize', cols: frame.cols, rows: frame.rows } }
        : { ok: false, why: 'resize without cols and rows' };
    default:
      return { ok: false, why: 'unknown message type' };
  }
}

/** Window sizes a writer may set: big enough to use, small enough that tmux's grid stays modest. */
export const SIZE_BOUNDS = { cols: { min: 20, max: 500 }, rows: { min: 5, max: 200 } } as const;

/**
 * The window a writer's terminal of `cols` × `rows` asks for: bounded, whole, and less the status
 * lines tmux draws below the window in every client (the browser shows the client, status included).
 */
export function windowForTerminal(
  cols: number,
  rows: number,
  statusLines: number,
): { cols: number; rows: number } | null {
  if (!Number.isFinite(cols) || !Number.isFinite(rows)) return null;
  const clamp = (n: number, b: { min: number; max: number }) =>
    Math.min(b.max, Math.max(b.min, Math.floor(n)));
  const c = clamp(cols, SIZE_BOUNDS.cols);
  const r = clamp(rows, SIZE_BOUNDS.rows);
  return { cols: c, rows: Math.max(1, r - statusLines) };
}

/** Lines of tmux's status bar from the `status` option (`off`, `on`, or 2 to 5). */
export function statusLines(option: string): number {
  if (option === 'off' || option === '0') return 0;
  if (option === 'on' || option === '') return 1;
  const n = Number(option);
  return Number.isInteger(n) && n >= 1 && n <= 5 ? n : 1;
}
