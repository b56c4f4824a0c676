/**
 * The live socket (/ws/live): the sessions list on every change, and for a watched session its
 * detail and its turn events. Reconnects with a growing delay (a daemon restart, a laptop waking),
 * and says so: a page that silently stops updating would show stale statuses as current.
 */
import {
  type LiveClientMessage,
  type LiveMessage,
  TICKET_PROTOCOL_PREFIX,
  WS_PROTOCOL,
} from '../../src/console/protocol.js';
import { socketProtocols, socketUrl } from './api.js';

/** `refused`: it cannot connect and will not retry (no login in this browser): the detail says why. */
export type LiveState = 'connecting' | 'open' | 'closed' | 'refused';

export interface LiveOptions {
  onMessage(message: LiveMessage): void;
  onState?(state: LiveState, detail: string): void;
  /** The session to watch (its detail and events), if any. */
  watch?: string | null;
}

export interface Live {
  watch(sessionId: string | null): void;
  close(): void;
}

function isLiveMessage(value: unknown): value is LiveMessage {
  return !!value && typeof value === 'object' && typeof (value as { t?: unknown }).t === 'string';
}

export function connectLive(options: LiveOptions): Live {
  let socket: WebSocket | undefined;
  let watching = options.watch ?? null;
  let closed = false;
  let delay = 500;
  const send = (message: LiveClientMessage) => {
    if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  };
  const retry = () => {
    setTimeout(() => void open(), delay);
    delay = Math.min(delay * 2, 15_000);
  };
  const open = async () => {
    options.onState?.('connecting', '');
    let protocols: string[];
    try {
      protocols = await socketProtocols(WS_PROTOCOL, TICKET_PROTOCOL_PREFIX);
    } catch (error) {
      // No login kept in this browser: retrying will not make one.
      options.onState?.('refused', error instanceof Error ? error.message : String(error));
      return;
    }
    if (closed) return;
    const ws = new WebSocket(socketUrl('/ws/live'), protocols);
    socket = ws;
    ws.addEventListener('open', () => {
      delay = 500;
      options.onState?.('open', '');
      if (watching) send({ t: 'watch', sessionId: watching });
    });
    ws.addEventListener('message', (event) => {
      if (typeof event.data !== 'string') return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(event.data);
      } catch {
        return;
      }
      if (isLiveMessage(parsed)) options.onMessage(parsed);
    });
    ws.addEventListener('close', (event) => {
      if (closed) return;
      options.onState?.('closed', event.reason || `code ${event.code}`);
      // A refused ticket (4401/4403) will not get better by retrying: the page must be reloaded.
      if (event.code === 4401 || event.code === 4403) return;
      retry();
    });
  };
  void open();
  return {
    watch(sessionId) {
      watching = sessionId;
      send({ t: 'watch', sessionId });
    },
    close() {
      closed = true;
      socket?.close();
    },
  };
}
