import { randomUUID } from 'node:crypto';
import type { CredentialKind } from '../../core/credential.js';
import { LoopError } from '../../core/errors.js';
import type { TurnEvent, Usage } from '../../core/events.js';
import type {
  BudgetRaise,
  EventWindow,
  Meter,
  NewSession,
  SessionHold,
  SessionRecord,
  SessionStatus,
  SessionStore,
  SessionTakeover,
  SessionWaiting,
  StoredEvent,
  TurnEnd,
  TurnGuard,
  TurnRecord,
} from '../../core/ports/sessions.js';
import { parseWorkItem, workItemKey, workItemSlug } from '../../core/work-item.js';
import { planSlug, type SlugUse, slugCollision } from '../../sessions/slug.js';
import type { SessionListing } from '../../sessions/summary.js';
import type { Db } from '../db.js';
import { endTakeover, readEventWindow, writeTakeover } from './session-console.js';
import { type SessionFilter, sessionListings, sessionWhere } from './session-list.js';
import { type SessionRow, type TurnRow, toSession, toTurn } from './session-rows.js';
import {
  insertTurnEvent,
  lastEventSeq,
  markTurnLost,
  orphanTurns,
  ownerGone,
  readTurn,
  readTurnEvents,
  recoverLost,
  runningOwners,
  turnAt,
  turnsOfSessions,
  writeTurnEnd,
} from './turns.js';

const isUniqueViolation = (error: unknown): boolean =>
  error instanceof Error && 'code' in error && String(error.code).startsWith('SQLITE_CONSTRAINT');

/**
 * The session registry on SQLite: the owner of `sessions`, `turns` and `turn_events` (the turn side's
 * SQL in turns.ts, the row mappers in session-rows.ts). Every string that came from an engine passes
 * through `scrub` before it is stored, so a secret an engine echoes never lands in the database.
 */
export class SqliteSessionStore implements SessionStore {
  private readonly eventSeq = new Map<number, number>();
  private byId: ReturnType<Db['prepare']> | undefined;

  constructor(
    private readonly db: Db,
    private readonly options: { scrub: (text: string) => string; now?: () => Date; ownerPid?: number },
  ) {}

  private now(): string {
    return (this.options.now?.() ?? new Date()).toISOString();
  }

  async findActive(workItem: string): Promise<SessionRecord | undefined> {
    const row = this.db
      .prepare("SELECT * FROM sessions WHERE work_item = ? AND status = 'active'")
      .get(workItemKey(workItem)) as SessionRow | undefined;
    return row && toSession(row);
  }

  async get(id: string): Promise<SessionRecord | undefined> {
    return this.session(id);
  }

  /** One session, read in the caller's step (the writes below return what they wrote). */
  private session(id: string): SessionRecord | undefined {
    // Prepared once: the gateway asks on every request (preparing is most of a lookup's time).
    this.byId ??= this.db.prepare('SELECT * FROM sessions WHERE id = ?');
    const row = this.byId.get(id) as SessionRow | undefined;
    return row && toSession(row);
  }

  async list(filter: SessionFilter = {}): Promise<SessionRecord[]> {
    const { where, args } = sessionWhere(filter);
    const sql = `SELECT * FROM sessions ${where} ORDER BY created_at DESC, rowid DESC LIMIT ?`;
    return (this.db.prepare(sql).all(...args, filter.limit ?? 1000) as SessionRow[]).map(toSession);
  }

  /** What `sessions list` prints of the sessions `list` returns, in one query (session-list.ts). */
  async listings(filter: SessionFilter = {}): Promise<SessionListing[]> {
    return sessionListings(this.db, filter);
  }

  async slugFor(workItem: string): Promise<string> {
    const key = workItemKey(workItem);
    const own = this.db
      .prepare(
        'SELECT work_item, slug FROM sessions WHERE work_item = ? ORDER BY created_at DESC, rowid DESC',
      )
      .all(key) as { work_item: string; slug: string }[];
    const slugs = [...new Set([...own.map((r) => r.slug), workItemSlug(parseWorkItem(key))])];
    const others = this.db
      .prepare(
        `SELECT work_item, slug FROM sessions WHERE work_item <> ? AND slug IN (${slugs.map(() => '?').join(', ')})`,
      )
      .all(key, ...slugs) as { work_item: string; slug: string }[];
    const uses: SlugUse[] = [...own, ...others].map((r) => ({ workItem: r.work_item, slug: r.slug }));
    return planSlug(key, uses);
  }

  async create(input: NewSession): Promise<SessionRecord> {
    const id = randomUUID();
    const at = this.now();
    const workItem = workItemKey(input.workItem);
    // Checked in the transaction that inserts: two work items never end up sharing one slug.
    const insert = this.db.transaction(() => {
      const holder = this.db
        .prepare('SELECT work_item FROM sessions WHERE slug = ? AND work_item <> ? LIMIT 1')
        .get(input.slug, workItem) as { work_item: string } | undefined;
      if (holder) throw slugCollision(input.slug, workItem, holder.work_item);
      this.db
        .prepare(
          `INSERT INTO sessions (id, work_item, slug, engine, runner, engine_session_id, cwd, status,
             credential_kind, credential_env, payer_id, tmux_target, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          id,
          workItem,
          input.slug,
          input.engine,
          input.runner,
          input.engineSessionId,
          input.cwd,
          input.credentialKind,
          input.credentialEnv,
          input.payerId ?? null,
          input.tmuxTarget ?? null,
          at,
          at,
        );
    });
    try {
      insert.immediate();
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw new LoopError('session-busy', `${workItem} already has an active session`, {
          cause: error,
        });
      }
      throw error;
    }
    return this.session(id) as SessionRecord;
  }

  private touch(id: string, sql: string, ...args: unknown[]): void {
    const info = this.db
      .prepare(`UPDATE sessions SET ${sql}, updated_at = ? WHERE id = ?`)
      .run(...args, this.now(), id);
    if (info.changes === 0) throw new LoopError('session-missing', `no session ${id}`);
  }

  async markEngineSessionStarted(id: string, engineSessionId: string): Promise<void> {
    this.touch(id, 'engine_session_id = ?, engine_session_started = 1', engineSessionId);
  }

  async setUsageBaseline(id: string, usage: Usage): Promise<void> {
    this.touch(id, 'usage_baseline = ?', JSON.stringify(usage));
  }

  async setCredential(
    id: string,
    kind: CredentialKind | null,
    env: string | null,
    payerId: string | null = null,
  ): Promise<void> {
    this.touch(id, 'credential_kind = ?, credential_env = ?, payer_id = ?', kind, env, payerId);
  }

  async close(id: string, reason: string): Promise<SessionRecord> {
    const at = this.now();
    this.db
      .prepare(
        "UPDATE sessions SET status = 'closed', closed_at = ?, close_reason = ?, updated_at = ? WHERE id = ? AND status = 'active'",
      )
      .run(at, reason, at, id);
    const session = this.session(id);
    if (!session) throw new LoopError('session-missing', `no session ${id}`);
    return session;
  }

  async setHold(id: string, hold: SessionHold | null): Promise<void> {
    this.touch(id, 'hold = ?', hold ? JSON.stringify(hold) : null);
  }

  async setTakeover(id: string, takeover: SessionTakeover | null): Promise<SessionRecord> {
    return writeTakeover(this.db, id, takeover, this.now());
  }
  async endTakeover(id: string, held: Pick<SessionTakeover, 'by' | 'since'>): Promise<boolean> {
    return endTakeover(this.db, id, held, this.now());
  }

  async raiseBudget(id: string, raise: BudgetRaise): Promise<SessionRecord> {
    // Read and write under one write lock: a raise made at the same moment by another process is
    // added to, never overwritten.
    return this.db
      .transaction(() => {
        const session = this.session(id);
        if (!session) throw new LoopError('session-missing', `no session ${id}`);
        const next: BudgetRaise = { ...session.budgetRaise };
        for (const [k, v] of Object.entries(raise) as Array<[keyof BudgetRaise, number]>)
          next[k] = (next[k] ?? 0) + v;
        this.touch(id, 'budget_raise = ?', JSON.stringify(next));
        return this.session(id) as SessionRecord;
      })
      .immediate();
  }

  async markGone(id: string, status: 'lost' | 'ended', reason: string): Promise<SessionRecord> {
    const at = this.now();
    this.db
      .prepare(
        "UPDATE sessions SET status = ?, closed_at = ?, close_reason = ?, updated_at = ? WHERE id = ? AND status = 'active'",
      )
      .run(status, at, reason, at, id);
    const session = this.session(id);
    if (!session) throw new LoopError('session-missing', `no session ${id}`);
    return session;
  }

  async adoptTurn(turnId: number): Promise<void> {
    this.db
      .prepare("UPDATE turns SET owner_pid = ? WHERE id = ? AND status = 'running'")
      .run(process.pid, turnId);
  }

  async clearEvents(turnId: number): Promise<void> {
    this.db.prepare('DELETE FROM turn_events WHERE turn_id = ?').run(turnId);
    this.eventSeq.delete(turnId);
  }

  async beginTurn(
    sessionId: string,
    input: {
      promptDigest: string;
      promptBytes: number;
      meter: Meter;
      deliveryId?: string | undefined;
      guard?: TurnGuard | undefined;
    },
  ): Promise<TurnRecord> {
    const begin = this.db.transaction(() => {
      const running = this.db
        .prepare("SELECT id, owner_pid FROM turns WHERE session_id = ? AND status = 'running'")
        .get(sessionId) as { id: number; owner_pid: number | null } | undefined;
      if (running) {
        throw new LoopError('session-busy', `turn ${running.id} of this session is still running`, {
          hint: 'Turns of one session run one at a time; wait for it to end.',
        });
      }
      const session = this.db.prepare('SELECT status FROM sessions WHERE id = ?').get(sessionId) as
        | { status: SessionStatus }
        | undefined;
      if (!session) throw new LoopError('session-missing', `no session ${sessionId}`);
      if (session.status !== 'active')
        throw new LoopError('session-closed', `session ${sessionId} is ${session.status}`);
      const seq = (
        this.db
          .prepare('SELECT COALESCE(MAX(seq), 0) + 1 AS n FROM turns WHERE session_id = ?')
          .get(sessionId) as { n: number }
      ).n;
      const info = this.db
        .prepare(
          `INSERT INTO turns (session_id, seq, prompt_digest, prompt_bytes, status, started_at, meter, owner_pid,
             delivery_id, guard)
           VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)`,
        )
        .run(
          sessionId,
          seq,
          input.promptDigest,
          input.promptBytes,
          this.now(),
          input.meter,
          this.options.ownerPid ?? process.pid,
          input.deliveryId ?? null,
          input.guard ? JSON.stringify(input.guard) : null,
        );
      this.db.prepare('UPDATE sessions SET updated_at = ? WHERE id = ?').run(this.now(), sessionId);
      return Number(info.lastInsertRowid);
    });
    const id = begin.immediate();
    return this.turn(id);
  }

  async currentTurn(sessionId: string): Promise<TurnRecord | undefined> {
    const row = this.db
      .prepare(
        "SELECT * FROM turns WHERE session_id = ? ORDER BY (status = 'running') DESC, seq DESC LIMIT 1",
      )
      .get(sessionId) as TurnRow | undefined;
    return row ? toTurn(row) : undefined;
  }

  async setWaiting(id: string, waiting: SessionWaiting | null): Promise<void> {
    this.db
      .prepare('UPDATE sessions SET waiting = ?, updated_at = ? WHERE id = ?')
      .run(waiting ? this.options.scrub(JSON.stringify(waiting)) : null, this.now(), id);
  }

  private turn(id: number): TurnRecord {
    return readTurn(this.db, id);
  }

  async setTurnPid(turnId: number, pid: number): Promise<void> {
    this.db.prepare('UPDATE turns SET pid = ? WHERE id = ?').run(pid, turnId);
  }

  async appendEvent(turnId: number, event: TurnEvent): Promise<void> {
    const seq = (this.eventSeq.get(turnId) ?? lastEventSeq(this.db, turnId)) + 1;
    this.eventSeq.set(turnId, seq);
    insertTurnEvent(this.db, turnId, seq, this.now(), event, this.options.scrub(JSON.stringify(event)));
  }

  async finishTurn(turnId: number, end: TurnEnd): Promise<TurnRecord> {
    writeTurnEnd(this.db, turnId, end, this.options.scrub);
    this.eventSeq.delete(turnId);
    return this.turn(turnId);
  }

  async turnsForDelivery(deliveryId: string): Promise<TurnRecord[]> {
    return (
      this.db.prepare('SELECT * FROM turns WHERE delivery_id = ? ORDER BY id').all(deliveryId) as TurnRow[]
    ).map(toTurn);
  }

  async turns(sessionId: string): Promise<TurnRecord[]> {
    return (
      this.db.prepare('SELECT * FROM turns WHERE session_id = ? ORDER BY seq').all(sessionId) as TurnRow[]
    ).map(toTurn);
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
    return recoverLost(this.db, this.now(), isAlive, onLost, options.skipRunners ?? []);
  }

  /**
   * Whether recovering lost turns could find one: a turn recorded running whose owner process is
   * gone. With none (no turn running, or a live daemon owning them all) a reader has nothing to
   * recover, and need not load the runners (which only say which of those turns to leave).
   */
  async anyTurnOrphaned(isAlive: (pid: number) => boolean): Promise<boolean> {
    return runningOwners(this.db).some((owner) => ownerGone(owner, isAlive));
  }

  async turnAt(sessionId: string, at: string): Promise<TurnRecord | undefined> {
    return turnAt(this.db, sessionId, at);
  }

  async engineSessions(): Promise<
    Array<SessionRecord & { engineSessionId: string; lastMeter: Meter | null }>
  > {
    const rows = this.db
      .prepare(
        `SELECT s.*, (SELECT meter FROM turns t WHERE t.session_id = s.id ORDER BY t.id DESC LIMIT 1) AS last_meter
         FROM sessions s WHERE s.engine_session_id IS NOT NULL`,
      )
      .all() as Array<SessionRow & { engine_session_id: string; last_meter: Meter | null }>;
    return rows.map((r) => ({
      ...toSession(r),
      engineSessionId: r.engine_session_id,
      lastMeter: r.last_meter,
    }));
  }

  async orphanTurns(isAlive: (pid: number) => boolean, runners: readonly string[]): Promise<TurnRecord[]> {
    return orphanTurns(this.db, isAlive, runners);
  }

  async markTurnLost(turnId: number, error: string): Promise<void> {
    markTurnLost(this.db, turnId, this.now(), error);
  }
}
