/**
 * The console's wire contract, shared by the daemon (src/console/) and the browser (console/src/):
 * the JSON the API answers, the messages of its two WebSockets, and how a ticket is made. Types and
 * constants only (and one pure function): the browser bundle imports nothing else from src/.
 */

/** What a session is, as the console shows it (console/status-rules.ts derives it). */
export type ConsoleStatus =
  | 'running'
  | 'idle'
  | 'waiting'
  | 'held'
  | 'over-budget'
  | 'breach'
  | 'unaccounted'
  | 'interrupted'
  | 'lost'
  | 'closed'
  | 'ended';

/** A person typing in a session: deliveries to it are held until hand back. */
export interface TakeoverView {
  by: string;
  since: string;
  /** The console login that took over (its public id), null when taken over from the CLI. */
  principal: string | null;
}

/** One row of the sessions page (GET /api/sessions, and the live socket's `sessions` message). */
export interface SessionRow {
  id: string;
  workItem: string;
  engine: string;
  runner: string;
  tmuxTarget: string | null;
  status: ConsoleStatus;
  /** Why it is held, in words (a hold's reason, a take over), else null. */
  heldReason: string | null;
  takeover: TakeoverView | null;
  turns: number;
  /** Total tokens of its metered turns; null when no turn was metered. */
  tokens: number | null;
  /**
   * Estimated cost: the priced sum of its usage-ledger rows (list price or the engine's figure),
   * plus the engine's figure of a turn the ledger has no row of; null when nothing is priced
   * (never shown as $0).
   */
  costUsd: number | null;
  /** Ledger rows without a price (unknown model): left out of `costUsd`, which is then partial. */
  unpricedRows: number;
  /** Finished turns nothing measured (no usage, no ledger row): their cost is unknown. */
  unmeteredTurns: number;
  lastTurnAt: string | null;
  createdAt: string;
}

export interface ActView {
  id: number;
  at: string;
  /** `command`: found in the turn's tool uses (best effort); `wire`: seen by the gateway (certain). */
  source: string;
  kind: string;
  tool: string;
  /** The command or API call, scrubbed (as stored). */
  command: string;
  outcome: string;
  verdict: 'allow' | 'deny';
  rule: string | null;
  evasion: string | null;
  breach: boolean;
  workItem: string;
  sessionId: string;
  turnSeq: number | null;
}

export interface TurnView {
  id: number;
  seq: number;
  status: string;
  endReason: string | null;
  startedAt: string;
  endedAt: string | null;
  meter: string;
  model: string | null;
  usage: {
    inputTokens: number;
    outputTokens: number;
    cacheReadTokens: number;
    cacheWriteTokens: number;
  } | null;
  /** The priced sum of the turn's ledger rows, else the engine's own figure; null: unknown. */
  costUsd: number | null;
  /** `engine-reported`, `list-price`, or both (`engine-reported, list-price`); null with a null cost. */
  costBasis: string | null;
  /** The turn's ledger rows without a price: left out of `costUsd`. */
  unpricedRows: number;
  error: string | null;
  warnings: string[];
  acts: ActView[];
}

/** GET /api/sessions/:id */
export interface SessionDetail {
  session: SessionRow;
  turns: TurnView[];
}

/** A turn event as it streams (process sessions): the stored event, already scrubbed. */
export interface EventView {
  turnId: number;
  seq: number;
  at: string;
  event: { type: string } & Record<string, unknown>;
}

/** Messages the live socket (/ws/live) sends. The client sends `{ t: 'watch', sessionId }` or `{ t: 'watch', sessionId: null }`. */
export type LiveMessage =
  | { t: 'sessions'; rows: SessionRow[] }
  | { t: 'session'; detail: SessionDetail }
  | { t: 'events'; sessionId: string; events: EventView[] }
  | { t: 'error'; message: string };

export type LiveClientMessage = { t: 'watch'; sessionId: string | null };

/**
 * The terminal socket (/ws/terminal/:sessionId): output is binary frames (raw terminal bytes,
 * coalesced); control is JSON text frames.
 */
export type TerminalServerMessage =
  | { t: 'hello'; role: 'viewer' | 'writer'; cols: number; rows: number; takeover: TakeoverView | null }
  | { t: 'role'; role: 'viewer' | 'writer'; takeover: TakeoverView | null }
  | { t: 'size'; cols: number; rows: number }
  | { t: 'closed'; reason: string };

export type TerminalClientMessage =
  /** Bytes of output the browser has written to its terminal (total since connect). */
  | { t: 'ack'; bytes: number }
  /** Keys typed (forwarded only from the writer, filtered of terminal reports). */
  | { t: 'input'; data: string }
  /** The writer's terminal size (only the writer resizes the agent's window). */
  | { t: 'resize'; cols: number; rows: number };

/** Sub-protocols of both sockets: the first names the protocol, the second carries the page's ticket. */
export const WS_PROTOCOL = 'the-loop.console.v1';
export const TICKET_PROTOCOL_PREFIX = 'ticket.';
/** Header every /api request of a browser login carries its page's ticket in. */
export const TICKET_HEADER = 'x-loop-ticket';
/**
 * The login page's meta tags: the login's key (32 random bytes, base64url) and its public id. The
 * page moves both into localStorage and leaves; no other page or answer ever carries the key.
 */
export const LOGIN_KEY_META = 'loop-login-key';
export const LOGIN_ID_META = 'loop-login-id';
/**
 * Where the browser keeps `{ publicId, key }` (JSON): localStorage is per origin (scheme, host and
 * port), so a page of another port of the same host never reads it — unlike the cookie, which every
 * port of the host is sent.
 */
export const LOGIN_STORAGE_KEY = 'the-loop.console.login';

/**
 * What a ticket's HMAC signs (HMAC-SHA256 under the login's key): the browser makes a ticket
 * `<publicId>.<nonce>.<base64url mac>` per page with WebCrypto, the daemon checks it.
 */
export const ticketMessage = (publicId: string, nonce: string): string => `ticket|v1|${publicId}|${nonce}`;
