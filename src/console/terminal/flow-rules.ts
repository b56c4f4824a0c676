/**
 * The terminal socket's rules (pure): when a viewer's output stops and goes on (flow control), what a
 * client frame is, and what sizes a writer may ask for.
 *
 * Flow control: the browser acknowledges the bytes it has written to its terminal. Above HIGH bytes
 * unacknowledged (or queued in the socket, for a client that acknowledges without reading) the
 * viewer's pty is paused: its tmux client's terminal output then blocks, and tmux, which never waits
 * for a client, stops drawing to that client and redraws it whole once it drains (tmux tty.c,
 * TTY_BLOCK) — so the agent never waits for a browser. Below LOW the pty reads again.
 *
 * Parking: tmux still works for a blocked client (it keeps its output, discards it, redraws it: a
 * stalled `tmux attach -r` slows a 20 MB burst in the pane by 10–40 %, bench:console part 3). So a
 * browser that has left output unacknowledged, or its pty paused, for PARK_MS is parked: its tmux
 * client is ended and tmux spends nothing on it. Once its acknowledgements move again and bring it
 * below LOW, a fresh client is attached, and tmux's attach redraws the whole screen (the frames in
 * between are dropped, as tmux drops them for a slow client).
 */

export interface FlowLimits {
  high: number;
  low: number;
  /** How long output may wait unacknowledged (or the pty stay paused) before the client is parked. */
  parkMs: number;
}

/** 512 KiB: about a second of a fast TUI at full tilt; a browser on loopback acknowledges far sooner. */
export const FLOW_HIGH = 512 * 1024;
/** 128 KiB: resume with room to spare, so a pty does not flap between paused and reading. */
export const FLOW_LOW = 128 * 1024;
/**
 * 250 ms: a browser acknowledges within 50 ms of writing a frame (console/src/terminal.ts, ACK_MS)
 * plus a round trip and its parsing; five times that with no acknowledgement moving means it is not
 * reading (a stalled socket, a background tab, a machine swapping). Not longer: each moment tmux keeps
 * a client for it is paid by the agent. Not much shorter: a slow link would be parked and re-attached
 * over and over (each re-attach is a tmux client started and a screen redrawn).
 */
export const FLOW_PARK_MS = 250;

export interface FlowState {
  /** Bytes sent to the socket since connect. */
  sent: number;
  /** The highest total the client acknowledged. */
  acked: number;
  /** Bytes still queued in the socket (ws bufferedAmount). */
  buffered: number;
  /** The pty is not read: paused, or parked (no client at all). */
  paused: boolean;
  /** When the pty was paused (ms on a monotonic clock; null while it reads). */
  pausedAt: number | null;
  /** Since when output has waited for an acknowledgement that has not moved (null: all acknowledged). */
  waitingSince: number | null;
  /** Parked: the total acknowledged when its tmux client was ended (null: a client is attached). */
  parkedAcked: number | null;
}

export const INITIAL_FLOW: FlowState = {
  sent: 0,
  acked: 0,
  buffered: 0,
  paused: false,
  pausedAt: null,
  waitingSince: null,
  parkedAcked: null,
};

export type FlowAction = 'pause' | 'resume' | 'park' | 'unpark' | 'none';

const behindOf = (state: FlowState): number => Math.max(state.sent - state.acked, state.buffered);

/** When the client is due to be parked if nothing moves (null: not while it is caught up, or parked). */
export function parkDue(state: FlowState, limits: FlowLimits): number | null {
  if (state.parkedAcked !== null) return null;
  const since = [state.paused ? state.pausedAt : null, state.waitingSince].filter(
    (t): t is number => t !== null,
  );
  return since.length > 0 ? Math.min(...since) + limits.parkMs : null;
}

/** What to do with the viewer's client now: read, stop reading, end it (park), or attach a new one. */
export function flowAction(state: FlowState, limits: FlowLimits, now: number): FlowAction {
  const behind = behindOf(state);
  if (state.parkedAcked !== null) {
    // Only an acknowledgement that moved since: a browser that never reads is not re-attached.
    return state.acked > state.parkedAcked && behind < limits.low ? 'unpark' : 'none';
  }
  if (state.paused && behind < limits.low) return 'resume';
  const due = parkDue(state, limits);
  if (due !== null && now >= due) return 'park';
  if (!state.paused && behind > limits.high) return 'pause';
  return 'none';
}

/** The state after `action` was taken at `now`. */
export function stepFlow(state: FlowState, action: FlowAction, now: number): FlowState {
  switch (action) {
    case 'pause':
      return { ...state, paused: true, pausedAt: now };
    case 'resume':
      return { ...state, paused: false, pausedAt: null };
    case 'park':
      return { ...state, paused: true, pausedAt: state.pausedAt ?? now, parkedAcked: state.acked };
    case 'unpark':
      // The new client's output gets a fresh wait: the browser has shown it reads.
      return {
        ...state,
        paused: false,
        pausedAt: null,
        parkedAcked: null,
        waitingSince: state.sent > state.acked ? now : null,
      };
    default:
      return state;
  }
}

/** `bytes` more sent at `now`: they wait for an acknowledgement (from now, unless older ones wait). */
export function noteSent(state: FlowState, bytes: number, now: number): FlowState {
  if (bytes <= 0) return state;
  return { ...state, sent: state.sent + bytes, waitingSince: state.waitingSince ?? now };
}

/**
 * A client's acknowledgement: the total it has written. Only a whole number between what it already
 * acknowledged and what was sent moves it (a lie about the future counts as bad; an old total is
 * harmless and ignored). Moving, it restarts the wait of what is still unacknowledged.
 */
export function applyAck(state: FlowState, bytes: number, now: number): { state: FlowState; bad: boolean } {
  if (!Number.isSafeInteger(bytes) || bytes < 0 || bytes > state.sent) return { state, bad: true };
  if (bytes <= state.acked) return { state, bad: false };
  // It moved: what is still unacknowledged waits from now.
  return { state: { ...state, acked: bytes, waitingSince: bytes < state.sent ? now : null }, bad: false };
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
