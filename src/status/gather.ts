import type { ActRecord } from '../core/ports/acts.js';
import type { DeliveryRecord, Inbox } from '../core/ports/inbox.js';
import type { CostFigure } from '../core/ports/ledger.js';
import type { SessionRecord, SessionStore, TurnRecord } from '../core/ports/sessions.js';
import type { CostLine, StatusFacts, TodoItem } from '../core/status-facts.js';
import { actLineOf, holdOf } from './release-rules.js';

/**
 * The facts a delivery's tracking comment shows, read from the stores as they are now: the tracker
 * renders whatever the delivery's state is, so an edit after a restart says what happened while
 * no daemon watched (a crash's turn recorded interrupted, a delivery queued again).
 */
export interface FactSources {
  inbox: Pick<Inbox, 'get' | 'list'>;
  sessions: Pick<SessionStore, 'get' | 'findActive' | 'turnsForDelivery'>;
  acts: { list(filter: { turnId: number; limit?: number }): Promise<ActRecord[]> };
  /** The ledger's figure for one turn (undefined: no row). */
  turnCost(sessionId: string, turnId: number): Promise<CostFigure | undefined>;
  /** The checklist of a turn from its stored events (a finished turn, or one no live tracker saw). */
  turnTodos(turnId: number): Promise<TodoItem[]>;
  /** The console's public origin (`console.publicOrigin`), for the link; undefined: no link. */
  consoleOrigin: string | undefined;
  now: () => number;
}

/** Live knowledge of a running delivery the stores do not have yet (its checklist so far). */
export interface LiveFacts {
  todos?: TodoItem[] | undefined;
}

const MAX_ACTS = 60;

export async function gatherFacts(
  src: FactSources,
  deliveryId: string,
  live: LiveFacts = {},
): Promise<StatusFacts | undefined> {
  const d = await src.inbox.get(deliveryId);
  if (!d?.workItem) return undefined;
  const turns = await src.sessions.turnsForDelivery(deliveryId);
  const last = turns.at(-1);
  const session = last ? await src.sessions.get(last.sessionId) : await src.sessions.findActive(d.workItem);
  const common = {
    workItem: d.workItem,
    deliveryId,
    sessionId: session?.id,
    consoleUrl:
      session && src.consoleOrigin
        ? `${src.consoleOrigin}/sessions/${encodeURIComponent(session.id)}`
        : undefined,
    now: new Date(src.now()).toISOString(),
  };
  switch (d.status) {
    case 'rejected':
    case 'ignored':
      return { ...common, phase: 'rejected', reason: d.reason ?? d.status };
    case 'queued':
      return { ...common, ...(await waiting(src, d, session, last)) };
    case 'running': {
      if (last?.status !== 'running') return { ...common, ...(await waiting(src, d, session, last)) };
      const held = session ? holdOf({ ...session, hold: null, takeover: null }) : undefined;
      if (held) return { ...common, phase: 'held', ...held };
      return {
        ...common,
        phase: 'running',
        turnSeq: last.seq,
        startedAt: last.startedAt,
        elapsedMs: Math.max(0, src.now() - Date.parse(last.startedAt)),
        engine: session?.engine ?? '',
        todos: live.todos ?? (await src.turnTodos(last.id)),
        acts: await actsOf(src, last.id),
      };
    }
    default:
      return { ...common, ...(await finished(src, d, session, last)) };
  }
}

/** A queued delivery: held with its session, or in line behind the one running (and why it runs again). */
async function waiting(
  src: FactSources,
  d: DeliveryRecord,
  session: SessionRecord | undefined,
  last: TurnRecord | undefined,
): Promise<DistributiveOmit<Extract<StatusFacts, { phase: 'queued' | 'held' }>>> {
  const held = session ? holdOf(session) : undefined;
  if (held) return { phase: 'held', ...held };
  if (d.heldReason) return { phase: 'held', reason: d.heldReason, release: 'the hold is released' };
  const workItem = d.workItem ?? '';
  const running = (await src.inbox.list({ workItem, status: 'running', limit: 5 })).filter(
    (r) => r.id !== d.id,
  );
  const queued = (await src.inbox.list({ workItem, status: 'queued', limit: 500 })).filter(
    (r) => r.seq < d.seq,
  );
  const ahead = running[0] ?? queued.sort((a, b) => b.seq - a.seq)[0];
  let turnSeq: number | undefined;
  if (ahead && ahead.status === 'running')
    turnSeq = (await src.sessions.turnsForDelivery(ahead.id)).at(-1)?.seq;
  return {
    phase: 'queued',
    behind: ahead ? { deliveryId: ahead.id, turnSeq, running: ahead.status === 'running' } : undefined,
    position: running.length + queued.length,
    interrupted:
      last && last.status !== 'running'
        ? `turn ${last.seq} ended ${last.endReason ?? last.status} before it finished; it runs again`
        : undefined,
  };
}

type DistributiveOmit<F> = F extends unknown ? Omit<F, keyof CommonKeys> : never;
type CommonKeys = Pick<StatusFacts, 'workItem' | 'deliveryId' | 'sessionId' | 'consoleUrl' | 'now'>;

async function finished(
  src: FactSources,
  d: DeliveryRecord,
  session: SessionRecord | undefined,
  last: TurnRecord | undefined,
): Promise<DistributiveOmit<Extract<StatusFacts, { phase: 'finished' }>>> {
  if (!last)
    return {
      phase: 'finished',
      outcome: 'not-run',
      endReason: undefined,
      error: d.error ?? undefined,
      turnSeq: undefined,
      durationMs: undefined,
      engine: session?.engine,
      cost: { tokens: null, usd: null, basis: 'no turn ran', unpricedRows: 0 },
      todos: [],
      acts: [],
      next: undefined,
    };
  const outcome =
    last.status === 'succeeded'
      ? 'succeeded'
      : last.endReason === 'cancel'
        ? 'cancelled'
        : last.endReason === 'interrupted' || last.endReason === 'lost'
          ? 'interrupted'
          : 'failed';
  return {
    phase: 'finished',
    outcome,
    endReason: last.endReason ?? undefined,
    error: last.status === 'succeeded' ? undefined : (last.error ?? d.error ?? undefined),
    turnSeq: last.seq,
    durationMs: last.endedAt ? Math.max(0, Date.parse(last.endedAt) - Date.parse(last.startedAt)) : undefined,
    engine: session?.engine,
    cost: costOf(last, await src.turnCost(last.sessionId, last.id)),
    todos: await src.turnTodos(last.id),
    acts: await actsOf(src, last.id),
    next: undefined,
  };
}

async function actsOf(src: FactSources, turnId: number) {
  return (await src.acts.list({ turnId, limit: MAX_ACTS })).map(actLineOf);
}

/** Tokens and the estimated cost with its basis; unknown (never $0) when nothing priced it. */
export function costOf(
  turn: Pick<TurnRecord, 'usage' | 'meter' | 'model'>,
  figure: CostFigure | undefined,
): CostLine {
  const u = turn.usage;
  const tokens = u ? u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheCreationTokens : null;
  if (!figure || figure.rows === 0)
    return {
      tokens,
      usd: null,
      basis: turn.meter === 'none' ? 'unmetered' : 'nothing measured',
      unpricedRows: 0,
    };
  if (figure.costUsd === null)
    return {
      tokens,
      usd: null,
      basis: `no price for ${turn.model ?? 'its model'}`,
      unpricedRows: figure.unpricedRows,
    };
  return {
    tokens,
    usd: figure.costUsd,
    basis: figure.bases.join(', ') || 'list-price',
    unpricedRows: figure.unpricedRows,
  };
}
