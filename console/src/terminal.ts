/**
 * A tmux session's terminal (/ws/terminal/<id>): xterm.js fed with the daemon's binary frames.
 *
 * The pane's output is the agent's (or anyone's who can write to the repo it reads): hostile. So
 * the terminal swallows what could reach outside it: OSC 52 (clipboard writes), OSC 0/1/2 (titles:
 * document.title is never set from the terminal), OSC 8 (hyperlinks: never made, never opened).
 * No clipboard or web-links addon is loaded.
 *
 * Flow control: the daemon pauses this viewer's pty when too many bytes are unacknowledged, so the
 * browser acknowledges bytes only once xterm.js has parsed them (the write callback), batched.
 */
import { Terminal } from '@xterm/xterm';
import {
  type TakeoverView,
  type TerminalClientMessage,
  type TerminalServerMessage,
  TICKET_PROTOCOL_PREFIX,
  WS_PROTOCOL,
} from '../../src/console/protocol.js';
import { socketProtocols, socketUrl } from './api.js';
import { openWithoutInlineStyles } from './xterm-styles.js';

export type Role = 'viewer' | 'writer';

export interface TerminalCallbacks {
  onRole(role: Role, takeover: TakeoverView | null): void;
  onClosed(reason: string): void;
}

export interface TerminalView {
  term: Terminal;
  /** Writer only: resize the agent's window to fit the container. */
  fit(): void;
  close(): void;
}

/** Acknowledge at least every 64 KiB, or 50 ms after the last unacknowledged write. */
const ACK_BYTES = 64 * 1024;
const ACK_MS = 50;
/** The bounds the daemon accepts for a resize (it checks them too). */
const COLS = [20, 500] as const;
const ROWS = [5, 200] as const;

/** OSC numbers swallowed: 0/1/2 titles, 8 hyperlinks, 52 clipboard. */
const SWALLOWED_OSC = [0, 1, 2, 8, 52];

function newTerminal(): Terminal {
  const term = new Terminal({
    cols: 80,
    rows: 24,
    scrollback: 5000,
    disableStdin: true,
    cursorBlink: false,
    allowProposedApi: false,
    // OSC 8 is swallowed below; this is the second line: a link that got through is never opened.
    linkHandler: { activate: () => undefined, allowNonHttpProtocols: false },
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, monospace',
    fontSize: 14,
  });
  for (const ident of SWALLOWED_OSC) term.parser.registerOscHandler(ident, () => true);
  return term;
}

/** The terminal socket, with the page's ticket among its sub-protocols. */
async function openSocket(sessionId: string): Promise<WebSocket> {
  const protocols = await socketProtocols(WS_PROTOCOL, TICKET_PROTOCOL_PREFIX);
  const ws = new WebSocket(socketUrl(`/ws/terminal/${encodeURIComponent(sessionId)}`), protocols);
  ws.binaryType = 'arraybuffer';
  return ws;
}

const clamp = (n: number, [lo, hi]: readonly [number, number]) => Math.max(lo, Math.min(hi, Math.floor(n)));

export function mountTerminal(
  container: HTMLElement,
  sessionId: string,
  callbacks: TerminalCallbacks,
): TerminalView {
  const term = newTerminal();
  const unstyle = openWithoutInlineStyles(term, container);
  let role: Role = 'viewer';
  let written = 0;
  let acked = 0;
  let ackTimer: number | undefined;
  let ws: WebSocket | undefined;
  let closed = false;
  const send = (message: TerminalClientMessage) => {
    if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
  };
  const ack = () => {
    ackTimer = undefined;
    if (written === acked) return;
    acked = written;
    send({ t: 'ack', bytes: written });
  };
  const setRole = (next: Role, takeover: TakeoverView | null) => {
    role = next;
    term.options.disableStdin = next !== 'writer';
    callbacks.onRole(next, takeover);
  };
  const control = (message: TerminalServerMessage) => {
    if (message.t === 'hello') {
      term.resize(message.cols, message.rows);
      setRole(message.role, message.takeover);
    } else if (message.t === 'role') setRole(message.role, message.takeover);
    else if (message.t === 'size') term.resize(message.cols, message.rows);
    else if (message.t === 'closed') callbacks.onClosed(message.reason);
  };
  const onMessage = (event: MessageEvent) => {
    if (event.data instanceof ArrayBuffer) {
      const bytes = new Uint8Array(event.data);
      term.write(bytes, () => {
        written += bytes.length;
        if (written - acked >= ACK_BYTES) ack();
        else ackTimer ??= window.setTimeout(ack, ACK_MS);
      });
      return;
    }
    try {
      control(JSON.parse(String(event.data)) as TerminalServerMessage);
    } catch {
      // A malformed control frame: nothing to do with it.
    }
  };
  // The ticket is made first (WebCrypto is asynchronous); a view closed meanwhile opens nothing.
  openSocket(sessionId).then(
    (socket) => {
      if (closed) return socket.close();
      ws = socket;
      socket.addEventListener('message', onMessage);
      socket.addEventListener('close', (event) => {
        if (ackTimer !== undefined) clearTimeout(ackTimer);
        callbacks.onClosed(event.reason || `disconnected (code ${event.code})`);
      });
    },
    (error: unknown) => callbacks.onClosed(error instanceof Error ? error.message : String(error)),
  );
  // Keys go out only as the writer; the daemon forwards a viewer's nothing anyway.
  term.onData((data) => {
    if (role === 'writer') send({ t: 'input', data });
  });
  return {
    term,
    fit() {
      if (role !== 'writer') return;
      const screen = container.querySelector<HTMLElement>('.xterm-screen');
      if (!screen || term.cols === 0 || term.rows === 0) return;
      const cellWidth = screen.clientWidth / term.cols;
      const cellHeight = screen.clientHeight / term.rows;
      if (!cellWidth || !cellHeight) return;
      const cols = clamp(container.clientWidth / cellWidth, COLS);
      const rows = clamp(container.clientHeight / cellHeight, ROWS);
      term.resize(cols, rows);
      send({ t: 'resize', cols, rows });
    },
    close() {
      closed = true;
      ws?.close();
      term.dispose();
      unstyle();
    },
  };
}
