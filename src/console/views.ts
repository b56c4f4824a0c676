import type { ActFilter, ActRecord, ActStore } from '../core/ports/acts.js';
import type { CostFigure, LedgerStore, SessionCosts } from '../core/ports/ledger.js';
import type { SessionRecord, SessionStore, StoredEvent, TurnRecord } from '../core/ports/sessions.js';
import { formatWorkItem, parseWorkItem } from '../core/work-item.js';
import { totalTokens } from '../ledger/usage.js';
import { summarizeTurns } from '../sessions/summary.js';
import type { ActView, EventView, SessionDetail, SessionRow, TurnView } from './protocol.js';
import { consoleHeldReason, consoleStatus } from './status-rules.js';

/**
 * What the console shows, read through the ports (sessions, turns, events, acts, the ledger) and
 * shaped for the wire (protocol.ts). Unknown stays unknown: a session with no metered turn has no
 * token count and one with nothing priced no cost (null, never 0). Costs come from the usage ledger:
 * a turn metered at the wire or from transcripts is priced there, never on its turn record (which
 * holds only the engine's own figure).
 */

/** Sessions no longer active shown after the active ones: the latest this many. */
export const ENDED_ROWS = 200;
/** Events one call returns at most (a live view polls again for the rest). */
export const EVENTS_PER_CALL = 500;
/** Acts one call returns at most. */
export const ACTS_MAX = 1000;
/** A session's acts read for its page (its turns' acts; more than this are left out of it). */
const SESSION_ACTS = 5000;

type Sessions = Pick<SessionStore, 'list' | 'turns'>;
type Costs = Pick<LedgerStore, 'sessionCosts'>;

/** One row of the sessions page. */
export async function sessionRow(
  deps: { store: Pick<SessionStore, 'turns'>; ledger: Costs },
  s: SessionRecord,
): Promise<SessionRow> {
  const costs = await deps.ledger.sessionCosts([s.id]);
  return rowOf(s, await deps.store.turns(s.id), costs.get(s.id));
}

/**
 * A session's cost: its ledger rows' priced sum, plus the engine's own figure of each turn the
 * ledger has no row of (turns recorded before the ledger existed); null while nothing is priced.
 * A finished turn with neither usage nor a ledger row is unmetered: unknown, and said so.
 */
function sessionCost(
  turns: readonly TurnRecord[],
  costs: SessionCosts | undefined,
): Pick<SessionRow, 'costUsd' | 'unpricedRows' | 'unmeteredTurns'> {
  let costUsd = costs?.total.costUsd ?? null;
  let unmeteredTurns = 0;
  for (const t of turns) {
    if (costs?.turns.has(t.id)) continue;
    if (t.costUsd !== null) costUsd = (costUsd ?? 0) + t.costUsd;
    if (t.usage === null && t.status !== 'running') unmeteredTurns += 1;
  }
  return { costUsd, unpricedRows: costs?.total.unpricedRows ?? 0, unmeteredTurns };
}

function rowOf(s: SessionRecord, turns: readonly TurnRecord[], costs: SessionCosts | undefined): SessionRow {
  const summary = summarizeTurns(turns);
  return {
    id: s.id,
    workItem: s.workItem,
    engine: s.engine,
    runner: s.runner,
    tmuxTarget: s.tmuxTarget,
    status: consoleStatus(s, summary),
    heldReason: consoleHeldReason(s),
    // Only an active session is typed in (an ended one's take over is over, whatever its row says).
    takeover:
      s.status === 'active' && s.takeover
        ? { by: s.takeover.by, since: s.takeover.since, principal: s.takeover.principal }
        : null,
    turns: summary.turns,
    tokens: summary.usage ? totalTokens(summary.usage) : null,
    ...sessionCost(turns, costs),
    lastTurnAt: summary.lastTurnAt,
    createdAt: s.createdAt,
  };
}

/** Every active session (newest first), then the latest ENDED_ROWS others. */
export async function sessionRows(deps: { store: Sessions; ledger: Costs }): Promise<SessionRow[]> {
  const active = await deps.store.list({ status: 'active' });
  // The newest of any status, enough of them that ENDED_ROWS are not active.
  const recent = await deps.store.list({ limit: ENDED_ROWS + active.length });
  const ended = recent.filter((s) => s.status !== 'active').slice(0, ENDED_ROWS);
  const sessions = [...active, ...ended];
  // One ledger read for the whole page, not one per row.
  const costs = await deps.ledger.sessionCosts(sessions.map((s) => s.id));
  const rows: SessionRow[] = [];
  for (const s of sessions) rows.push(rowOf(s, await deps.store.turns(s.id), costs.get(s.id)));
  return rows;
}

const actView = (a: ActRecord): ActView => ({
  id: a.id,
  at: a.at,
  source: a.source,
  kind: a.kind,
  tool: a.tool,
  command: a.command,
  outcome: a.outcome,
  verdict: a.verdict,
  rule: a.rule,
  evasion: a.evasion,
  breach: a.breach,
  workItem: a.workItem,
  sessionId: a.sessionId,
  turnSeq: a.turnSeq,
});

/**
 * A turn's cost: its ledger rows' (their bases joined), else — no row: a turn from before the
 * ledger — the engine's own figure on the turn.
 */
function turnCost(
  t: TurnRecord,
  figure: CostFigure | undefined,
): Pick<TurnView, 'costUsd' | 'costBasis' | 'unpricedRows'> {
  if (!figure)
    return { costUsd: t.costUsd, costBasis: t.costUsd === null ? null : t.costBasis, unpricedRows: 0 };
  const basis = figure.costUsd === null ? '' : figure.bases.join(', ');
  return { costUsd: figure.costUsd, costBasis: basis || null, unpricedRows: figure.unpricedRows };
}

function turnView(t: TurnRecord, acts: ActView[], figure: CostFigure | undefined): TurnView {
  const u = t.usage;
  return {
    id: t.id,
    seq: t.seq,
    status: t.status,
    endReason: t.endReason,
    startedAt: t.startedAt,
    endedAt: t.endedAt,
    meter: t.meter,
    model: t.model,
    usage: u && {
      inputTokens: u.inputTokens,
      outputTokens: u.outputTokens,
      cacheReadTokens: u.cacheReadTokens,
      cacheWriteTokens: u.cacheCreationTokens,
    },
    ...turnCost(t, figure),
    error: t.error,
    warnings: t.warnings,
    acts,
  };
}

/** One session's page: its row, and its turns with their acts (each turn's in the order they happened). */
export async function sessionDetail(
  deps: { store: Pick<SessionStore, 'get' | 'turns'>; acts: Pick<ActStore, 'list'>; ledger: Costs },
  id: string,
): Promise<SessionDetail | undefined> {
  const session = await deps.store.get(id);
  if (!session) return undefined;
  const turns = await deps.store.turns(id);
  const costs = (await deps.ledger.sessionCosts([id])).get(id);
  const byTurn = new Map<number, ActView[]>();
  // Newest first from the store: reversed, so each turn's acts read in the order they happened.
  for (const a of (await deps.acts.list({ sessionId: id, limit: SESSION_ACTS })).reverse()) {
    const list = byTurn.get(a.turnId) ?? [];
    list.push(actView(a));
    byTurn.set(a.turnId, list);
  }
  return {
    session: rowOf(session, turns, costs),
    turns: turns.map((t) => turnView(t, byTurn.get(t.id) ?? [], costs?.turns.get(t.id))),
  };
}

/**
 * Acts, newest first: every one, or the breaches only, of a work item or a session, at most `limit`
 * (ACTS_MAX, 500 by default). A work item not written as one is a `work-item-invalid` LoopError.
 */
export async function actViews(
  deps: { acts: Pick<ActStore, 'list'> },
  filter: {
    breaches?: boolean;
    workItem?: string | undefined;
    sessionId?: string | undefined;
    limit?: number;
  },
): Promise<ActView[]> {
  const query: ActFilter = { limit: Math.min(Math.max(1, Math.floor(filter.limit ?? 500)), ACTS_MAX) };
  if (filter.breaches) query.breachesOnly = true;
  if (filter.workItem) query.workItem = formatWorkItem(parseWorkItem(filter.workItem));
  if (filter.sessionId) query.sessionId = filter.sessionId;
  return (await deps.acts.list(query)).map(actView);
}

const eventView = (e: StoredEvent): EventView => ({
  turnId: e.turnId,
  seq: e.seq,
  at: e.at,
  event: e.event as EventView['event'],
});

/**
 * A session's stored events as they stream. Without a cursor: the last EVENTS_PER_CALL of its
 * running turn, else of its latest. With one (the last event the caller has): the events after it,
 * in its turn and the turns after, the first EVENTS_PER_CALL of them (the next call goes on).
 */
export async function eventViews(
  deps: { store: Pick<SessionStore, 'currentTurn' | 'turns' | 'events'> },
  sessionId: string,
  after?: { turnId: number; seq: number },
  limit = EVENTS_PER_CALL,
): Promise<EventView[]> {
  const most = Math.min(Math.max(1, Math.floor(limit)), EVENTS_PER_CALL);
  if (!after) {
    const turn = await deps.store.currentTurn(sessionId);
    return turn ? (await deps.store.events(turn.id, { last: most })).map(eventView) : [];
  }
  const out: EventView[] = [];
  for (const t of await deps.store.turns(sessionId)) {
    if (t.id < after.turnId) continue;
    const seq = t.id === after.turnId ? after.seq : 0;
    const events = await deps.store.events(t.id, { seq, limit: most - out.length });
    out.push(...events.map(eventView));
    if (out.length >= most) break;
  }
  return out;
}
