import { randomUUID } from 'node:crypto';
import type { CredentialKind } from '../../core/credential.js';
import { LoopError } from '../../core/errors.js';
import type { TurnEvent, Usage } from '../../core/events.js';
import type { Fence } from '../../core/ports/hosts.js';
import type {
  BudgetRaise,
  EventWindow,
  Meter,
  NewSession,
  SessionHold,
  SessionRecord,
  SessionStore,
  SessionTakeover,
  SessionWaiting,
  StoredEvent,
  TurnEnd,
  TurnRecord,
} from '../../core/ports/sessions.js';
import { parseWorkItem, workItemKey, workItemSlug } from '../../core/work-item.js';
import { planSlug, type SlugUse, slugCollision } from '../../sessions/slug.js';
import type { SessionLister, SessionListing } from '../../sessions/summary.js';
import { type SessionRow, type TurnRow, toSession, toTurn } from '../sqlite/session-rows.js';
import type { Pg } from './pg.js';
import { insertSession, insertTurn, type TurnInput, turnBusy } from './session-begin.js';
import { endTakeover, writeTakeover } from './session-console.js';
import { fenceHolds, fenceValues, noteRefused, noteTurnRefused, turnFenceHolds } from './session-fence.js';
import { listQuery, type SessionFilter, sessionListings } from './session-list.js';
import {
  appendTurnEvent,
  isUniqueViolation,
  markTurnLost,
  orphanTurns,
  ownerGone,
  readEventWindow,
  readTurnEvents,
  recoverLost,
  runningOwners,
  setTurnPid,
  turnAt,
  turnsOfSessions,
  writeTurnEnd,
} from './turns.js';

export type { TurnInput } from './session-begin.js';

const sessionBusy = (workItem: string, cause: unknown) =>
  new LoopError('session-busy', `${workItem} already has an active session`, { cause });

/**
 * The session registry on PostgreSQL: the owner of `sessions`, `turns` and `turn_events` (the turn
 * side's SQL in turns.ts, the console's in session-console.ts, `sessions list`'s in
 * session-list.ts). Every string that came from an engine passes through `scrub` before it is
 * stored. Several hosts may call at once: each read-then-write locks the row it read (or is one
 * statement), and the unique indexes `sessions_one_active` and `turns_one_running` back the rules.
 *
 * With a `fence` (several hosts, session-fence.ts): `create` and `beginTurn` write only under this
 * host's lease of the work item at its epoch, else throw `fenced` (nothing written); a turn records
 * the host and epoch it was begun under, and its later writes (`finishTurn`, `setTurnPid`,
 * `appendEvent`, `adoptTurn`, `clearEvents`) apply only from that host while that lease is current;
 * the session columns a turn writes (`markEngineSessionStarted`, `setUsageBaseline`) only under this
 * host's lease. A fenced write of a running turn changes nothing and throws nothing (`finishTurn`
 * returns the turn as stored), but is said: the fence is told what was not written (its keeper
 * warns). The turn service goes on, and the lease's next owner settles it (abandon.ts). Recovery (`recoverLostTurns`, `orphanTurns`, `anyTurnOrphaned`) judges only this
 * host's turns and those begun before hosts.
 */
export class PgSessionStore implements SessionStore, SessionLister {
  constructor(
    private readonly db: Pg,
    private readonly options: {
      scrub: (text: string) => string;
      now?: () => Date;
      ownerPid?: number;
      /** This host's leases (several hosts): its writes for a work item are fenced by them. */
      fence?: Fence | undefined;
    },
  ) {}

  /** This host's id when fenced (recovery then judges only its own turns), else null. */
  private get host(): string | null {
    return this.options.fence?.host ?? null;
  }

  private now(): string {
    return (this.options.now?.() ?? new Date()).toISOString();
  }

  async findActive(workItem: string): Promise<SessionRecord | undefined> {
    const row = await this.db.row<SessionRow>(
      "SELECT * FROM sessions WHERE work_item = $1 AND status = 'active'",
      [workItemKey(workItem)],
    );
    return row && toSession(row);
  }

  async get(id: string): Promise<SessionRecord | undefined> {
    const row = await this.db.row<SessionRow>('SELECT * FROM sessions WHERE id = $1', [id]);
    return row && toSession(row);
  }

  async list(filter: SessionFilter = {}): Promise<SessionRecord[]> {
    const { sql, args } = listQuery(filter);
    return (await this.db.rows<SessionRow>(sql, args)).map(toSession);
  }

  /** What `sessions list` prints of the sessions `list` returns, in one query (session-list.ts). */
  async listings(filter: SessionFilter = {}): Promise<SessionListing[]> {
    return sessionListings(this.db, filter);
  }

  async slugFor(workItem: string): Promise<string> {
    const key = workItemKey(workItem);
    const own = await this.db.rows<{ work_item: string; slug: string }>(
      'SELECT work_item, slug FROM sessions WHERE work_item = $1 ORDER BY created_at DESC, created_seq DESC',
      [key],
    );
    const slugs = [...new Set([...own.map((r) => r.slug), workItemSlug(parseWorkItem(key))])];
    const others = await this.db.rows<{ work_item: string; slug: string }>(
      'SELECT work_item, slug FROM sessions WHERE work_item <> $1 AND slug = ANY($2::text[])',
      [key, slugs],
    );
    const uses: SlugUse[] = [...own, ...others].map((r) => ({ workItem: r.work_item, slug: r.slug }));
    return planSlug(key, uses);
  }

  async create(input: NewSession): Promise<SessionRecord> {
    const id = randomUUID();
    const at = this.now();
    const workItem = workItemKey(input.workItem);
    try {
      const row = await this.db.tx(async (q) => {
        // Two work items never end up sharing one slug: whoever checks a slug holds its lock until
        // commit, so a second creator with the same slug checks after the first's row is visible.
        await q.run("SELECT pg_advisory_xact_lock(hashtextextended('the-loop/session-slug/' || $1, 0))", [
          input.slug,
        ]);
        const holder = await q.row<{ work_item: string }>(
          'SELECT work_item FROM sessions WHERE slug = $1 AND work_item <> $2 LIMIT 1',
          [input.slug, workItem],
        );
        if (holder) throw slugCollision(input.slug, workItem, holder.work_item);
        return insertSession(q, id, workItem, input, at, this.options.fence);
      });
      return toSession(row);
    } catch (error) {
      if (isUniqueViolation(error, 'sessions_one_active')) throw sessionBusy(workItem, error);
      throw error;
    }
  }

  /** One update of a session's columns (`set` uses $1…, then updated_at and id follow); missing → session-missing. */
  private async touch(id: string, set: string, ...values: unknown[]): Promise<void> {
    const n = values.length;
    const changed = await this.db.run(
      `UPDATE sessions SET ${set}, updated_at = $${n + 1} WHERE id = $${n + 2}`,
      [...values, this.now(), id],
    );
    if (changed === 0) throw new LoopError('session-missing', `no session ${id}`);
  }

  /**
   * A session column a turn writes, fenced by this host's lease of the session's work item: a stale
   * or absent one changes nothing (and throws nothing: the turn that wrote it must not crash).
   * Without a fence, `touch`.
   */
  private async touchFenced(id: string, set: string, value: unknown): Promise<void> {
    if (!this.options.fence) return this.touch(id, set, value);
    const of = await this.db.row<{ work_item: string }>('SELECT work_item FROM sessions WHERE id = $1', [id]);
    if (!of) throw new LoopError('session-missing', `no session ${id}`);
    const [host, epoch] = fenceValues(this.options.fence, of.work_item);
    const changed = await this.db.run(
      `UPDATE sessions SET ${set}, updated_at = $2 WHERE id = $3 AND work_item = $4
          AND ${fenceHolds('$4', '$5', '$6')}`,
      [value, this.now(), id, of.work_item, host, epoch],
    );
    const column = set.split(' = ')[0] ?? set;
    await noteRefused(this.db, this.options.fence, changed, {
      workItem: of.work_item,
      epoch,
      what: `${column} of session ${id}`,
      key: `session ${id} ${column}`,
    });
  }

  async markEngineSessionStarted(id: string, engineSessionId: string): Promise<void> {
    await this.touchFenced(id, 'engine_session_id = $1, engine_session_started = 1', engineSessionId);
  }

  async setUsageBaseline(id: string, usage: Usage): Promise<void> {
    await this.touchFenced(id, 'usage_baseline = $1', JSON.stringify(usage));
  }

  async setCredential(
    id: string,
    kind: CredentialKind | null,
    env: string | null,
    payerId: string | null = null,
  ): Promise<void> {
    await this.touch(id, 'credential_kind = $1, credential_env = $2, payer_id = $3', kind, env, payerId);
  }

  async close(id: string, reason: string): Promise<SessionRecord> {
    return this.end(id, 'closed', reason);
  }

  async markGone(id: string, status: 'lost' | 'ended', reason: string): Promise<SessionRecord> {
    return this.end(id, status, reason);
  }

  /** End an active session (one no longer active stays as it was), returning it as it is. */
  private async end(id: string, status: 'closed' | 'lost' | 'ended', reason: string): Promise<SessionRecord> {
    const at = this.now();
    const ended = await this.db.row<SessionRow>(
      `UPDATE sessions SET status = $1, closed_at = $2, close_reason = $3, updated_at = $2
        WHERE id = $4 AND status = 'active' RETURNING *`,
      [status, at, reason, id],
    );
    const session = ended ? toSession(ended) : await this.get(id);
    if (!session) throw new LoopError('session-missing', `no session ${id}`);
    return session;
  }

  async setHold(id: string, hold: SessionHold | null): Promise<void> {
    await this.touch(id, 'hold = $1', hold ? JSON.stringify(hold) : null);
  }

  async setTakeover(id: string, takeover: SessionTakeover | null): Promise<SessionRecord> {
    return writeTakeover(this.db, id, takeover, this.now());
  }

  async endTakeover(id: string, held: Pick<SessionTakeover, 'by' | 'since'>): Promise<boolean> {
    return endTakeover(this.db, id, held, this.now());
  }

  async raiseBudget(id: string, raise: BudgetRaise): Promise<SessionRecord> {
    // Read and written with the row locked: a raise made at the same moment by another host waits,
    // then adds to this one, never overwrites it.
    return this.db.tx(async (q) => {
      const row = await q.row<SessionRow>('SELECT * FROM sessions WHERE id = $1 FOR UPDATE', [id]);
      if (!row) throw new LoopError('session-missing', `no session ${id}`);
      const next: BudgetRaise = { ...toSession(row).budgetRaise };
      for (const [k, v] of Object.entries(raise) as Array<[keyof BudgetRaise, number]>)
        next[k] = (next[k] ?? 0) + v;
      const written = await q.row<SessionRow>(
        'UPDATE sessions SET budget_raise = $1, updated_at = $2 WHERE id = $3 RETURNING *',
        [JSON.stringify(next), this.now(), id],
      );
      return toSession(written as SessionRow);
    });
  }

  /** With a fence, only a turn this host began (or one begun before hosts) under a current lease. */
  async adoptTurn(turnId: number): Promise<void> {
    await this.db.run(
      `UPDATE turns SET owner_pid = $1 WHERE id = $2 AND status = 'running' AND ${turnFenceHolds('turns', '$3')}`,
      [process.pid, turnId, this.host],
    );
  }

  /** With a fence, as `adoptTurn`: never another host's turn's events. */
  async clearEvents(turnId: number): Promise<void> {
    await this.db.run(
      `DELETE FROM turn_events WHERE turn_id = $1
          AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = $1 AND NOT ${turnFenceHolds('t', '$2')})`,
      [turnId, this.host],
    );
  }

  async beginTurn(sessionId: string, input: TurnInput): Promise<TurnRecord> {
    try {
      const row = await this.db.tx((q) =>
        insertTurn(q, sessionId, input, this.now(), this.options.ownerPid ?? process.pid, this.options.fence),
      );
      return toTurn(row);
    } catch (error) {
      // The session's lock makes this unlikely; the index is what guarantees it.
      if (isUniqueViolation(error, 'turns_one_running')) throw turnBusy('another turn', error);
      throw error;
    }
  }

  async currentTurn(sessionId: string): Promise<TurnRecord | undefined> {
    const row = await this.db.row<TurnRow>(
      "SELECT * FROM turns WHERE session_id = $1 ORDER BY (status = 'running') DESC, seq DESC LIMIT 1",
      [sessionId],
    );
    return row ? toTurn(row) : undefined;
  }

  async setWaiting(id: string, waiting: SessionWaiting | null): Promise<void> {
    await this.db.run('UPDATE sessions SET waiting = $1, updated_at = $2 WHERE id = $3', [
      waiting ? this.options.scrub(JSON.stringify(waiting)) : null,
      this.now(),
      id,
    ]);
  }

  async setTurnPid(turnId: number, pid: number): Promise<void> {
    const changed = await setTurnPid(this.db, turnId, pid, this.host);
    await noteTurnRefused(this.db, this.options.fence, changed, turnId, 'the pid');
  }

  async appendEvent(turnId: number, event: TurnEvent): Promise<void> {
    const data = this.options.scrub(JSON.stringify(event));
    const changed = await appendTurnEvent(this.db, turnId, this.now(), event, data, this.host);
    await noteTurnRefused(this.db, this.options.fence, changed, turnId, 'the events');
  }

  async finishTurn(turnId: number, end: TurnEnd): Promise<TurnRecord> {
    return writeTurnEnd(this.db, turnId, end, this.options.scrub, this.host, () =>
      noteTurnRefused(this.db, this.options.fence, 0, turnId, `the end (${end.status}, ${end.endReason})`),
    );
  }

  async turnsForDelivery(deliveryId: string): Promise<TurnRecord[]> {
    const rows = await this.db.rows<TurnRow>('SELECT * FROM turns WHERE delivery_id = $1 ORDER BY id', [
      deliveryId,
    ]);
    return rows.map(toTurn);
  }

  async turns(sessionId: string): Promise<TurnRecord[]> {
    const rows = await this.db.rows<TurnRow>('SELECT * FROM turns WHERE session_id = $1 ORDER BY seq', [
      sessionId,
    ]);
    return rows.map(toTurn);
  }

  async turnsOfSessions(sessionIds: readonly string[]): Promise<Map<string, TurnRecord[]>> {
    return turnsOfSessions(this.db, sessionIds);
  }

  async events(turnId: number, window?: EventWindow): Promise<StoredEvent[]> {
    return window ? readEventWindow(this.db, turnId, window) : readTurnEvents(this.db, turnId);
  }

  async recoverLostTurns(
    isAlive: (pid: number) => boolean,
    onLost?: (turn: { id: number; pid: number | null; startedAt: string }) => void,
    options: { skipRunners?: readonly string[] } = {},
  ): Promise<number> {
    return recoverLost(this.db, this.now(), isAlive, onLost, options.skipRunners ?? [], this.host);
  }

  /**
   * Whether recovering lost turns could find one: a turn recorded running whose owner process is
   * gone. With none a reader has nothing to recover, and need not load the runners.
   */
  async anyTurnOrphaned(isAlive: (pid: number) => boolean): Promise<boolean> {
    return (await runningOwners(this.db, this.host)).some((owner) => ownerGone(owner, isAlive));
  }

  async turnAt(sessionId: string, at: string): Promise<TurnRecord | undefined> {
    return turnAt(this.db, sessionId, at);
  }

  async engineSessions(): Promise<
    Array<SessionRecord & { engineSessionId: string; lastMeter: Meter | null }>
  > {
    const rows = await this.db.rows<SessionRow & { engine_session_id: string; last_meter: Meter | null }>(
      `SELECT s.*, (SELECT meter FROM turns t WHERE t.session_id = s.id ORDER BY t.id DESC LIMIT 1) AS last_meter
         FROM sessions s WHERE s.engine_session_id IS NOT NULL ORDER BY s.created_seq`,
    );
    return rows.map((r) => ({
      ...toSession(r),
      engineSessionId: r.engine_session_id,
      lastMeter: r.last_meter,
    }));
  }

  async orphanTurns(isAlive: (pid: number) => boolean, runners: readonly string[]): Promise<TurnRecord[]> {
    return orphanTurns(this.db, isAlive, runners, this.host);
  }

  async markTurnLost(turnId: number, error: string): Promise<void> {
    const at = this.now();
    await this.db.tx((q) => markTurnLost(q, turnId, at, error));
  }
}
