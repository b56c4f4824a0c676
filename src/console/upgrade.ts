import { type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import type { Logger } from '../log/logger.js';
import {
  type Access,
  changeRefusal,
  hostAllowed,
  offeredProtocols,
  principalOf,
  ticketProtocol,
} from './access.js';
import { SECURITY_HEADERS } from './http.js';
import type { LiveHub } from './live.js';
import { type ConsoleDeps, SESSION_ID, type TerminalPort } from './ports.js';
import { WS_PROTOCOL } from './protocol.js';

/**
 * WebSocket upgrades: every check runs on the raw request before `ws` is handed the socket, so a
 * refused attempt costs a few header reads and one short answer, and leaves nothing behind —
 * a thousand of them hold nothing once answered. The order: Host, path, authentication, the
 * sub-protocol, then (a browser login) the exact Origin and the page's ticket.
 */

export interface UpgradeContext {
  access: Access;
  wss: WebSocketServer;
  live: LiveHub;
  terminals: TerminalPort | undefined;
  deps: Pick<ConsoleDeps, 'terminalOf'>;
  logger: Logger;
}

const TERMINAL_PATH = /^\/ws\/terminal\/([^/]+)$/;

export function handleUpgrade(ctx: UpgradeContext, req: IncomingMessage, socket: Duplex, head: Buffer) {
  socket.on('error', () => socket.destroy());
  if (!hostAllowed(ctx.access, req)) return refuse(socket, 421, 'this host is not the console');
  const path = (req.url ?? '/').split('?')[0] ?? '/';
  const terminal = TERMINAL_PATH.exec(path);
  if (path !== '/ws/live' && !terminal) return refuse(socket, 404, 'not found');
  const principal = principalOf(ctx.access, req);
  if (!principal) return refuse(socket, 401, 'not logged in');
  const protocols = offeredProtocols(req);
  if (!protocols.includes(WS_PROTOCOL)) return refuse(socket, 400, `sub-protocol ${WS_PROTOCOL} required`);
  const refusal = changeRefusal(ctx.access, req, principal, ticketProtocol(protocols));
  if (refusal) {
    ctx.logger.warn('console: WebSocket refused', {
      path: path.startsWith('/ws/terminal/') ? '/ws/terminal/…' : path,
      why: refusal,
    });
    return refuse(socket, 403, refusal);
  }
  const sessionId = terminal?.[1];
  if (terminal && (sessionId === undefined || !SESSION_ID.test(sessionId)))
    return refuse(socket, 404, 'not a session id');
  ctx.wss.handleUpgrade(req, socket, head, (ws) => {
    if (sessionId === undefined) return ctx.live.attach(ws);
    const name = principal.kind === 'login' ? principal.login.publicId : 'bearer';
    void attachTerminal(ctx, ws, sessionId.toLowerCase(), name);
  });
}

/** A terminal socket: the session's tmux target found, then the hub takes it (else 4404). */
async function attachTerminal(ctx: UpgradeContext, ws: WebSocket, sessionId: string, principal: string) {
  try {
    const found = await ctx.deps.terminalOf(sessionId);
    if (!found) return ws.close(4404, 'this session has no terminal (not a tmux session, or it ended)');
    if (!ctx.terminals) return ws.close(4404, 'terminals are not served by this daemon');
    ctx.terminals.attach(ws, { sessionId, target: found.target, principal, takeover: found.takeover });
  } catch (error) {
    ctx.logger.error('console: terminal attach failed', { session: sessionId, error });
    ws.close(1011, 'internal error');
  }
}

/**
 * Answer an upgrade with a plain HTTP refusal and close the connection. It carries the headers of
 * every other console answer (http.ts): a refusal read by a browser is a page like any other.
 */
function refuse(socket: Duplex, status: number, message: string): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = `${message}\n`;
  const headers = Object.entries(SECURITY_HEADERS).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Refused'}\r\n` +
      'Connection: close\r\n' +
      headers.join('') +
      'Content-Type: text/plain; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/** `ws`'s choice among the offered sub-protocols: ours, never the ticket (it is not echoed back). */
export const chooseProtocol = (protocols: Set<string>): string | false =>
  protocols.has(WS_PROTOCOL) ? WS_PROTOCOL : false;
