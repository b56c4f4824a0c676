import type Database from 'better-sqlite3';
import { LoopError } from '../../core/errors.js';
import type { TurnEvent } from '../../core/events.js';
import type { StoredEvent, TurnEnd, TurnRecord } from '../../core/ports/sessions.js';
import type { Db } from '../db.js';
import { insertUnmeteredDrive } from './ledger.js';
import { type TurnRow, toTurn } from './session-rows.js';

/**
 * The turn side of the session store's SQL (`turns`, `turn_events`): a turn's events, its end, and
 * turns whose owner died. Plain functions of the Db; `SqliteSessionStore` (sessions.ts) holds the
 * state and delegates here.
 */

export function readTurn(db: Db, id: number): TurnRecord {
  const row = db.prepare('SELECT * FROM turns WHERE id = ?').get(id) as TurnRow | undefined;
  if (!row) throw new LoopError('internal', `no turn ${id}`);
  return toTurn(row);
}

/** The highest event seq stored for a turn (0 when it has none). */
export function lastEventSeq(db: Db, turnId: number): number {
  return (
    db.prepare('SELECT COALESCE(MAX(seq), 0) AS n FROM turn_events WHERE turn_id = ?').get(turnId) as {
      n: number;
    }
  ).n;
}

/** Store one event; `data` is the event's JSON, already scrubbed. */
export function insertTurnEvent(
  db: Db,
  turnId: number,
  seq: number,
  at: string,
  event: TurnEvent,
  data: string,
): void {
  db.prepare('INSERT INTO turn_events (turn_id, seq, at, type, data) VALUES (?, ?, ?, ?, ?)').run(
    turnId,
    seq,
    at,
    event.type,
    data,
  );
}

export function readTurnEvents(db: Db, turnId: number): StoredEvent[] {
  const rows = db.prepare('SELECT * FROM turn_events WHERE turn_id = ? ORDER BY seq').all(turnId) as {
    turn_id: number;
    seq: number;
    at: string;
    data: string;
  }[];
  return rows.map((r) => ({
    turnId: r.turn_id,
    seq: r.seq,
    at: r.at,
    event: JSON.parse(r.data) as TurnEvent,
  }));
}

/** Record a turn's end; every engine string passes through `scrub`. */
export function writeTurnEnd(db: Db, turnId: number, end: TurnEnd, scrub: (text: string) => string): void {
  const u = end.usage;
  db.prepare(
    `UPDATE turns SET status = ?, end_reason = ?, ended_at = ?, exit_code = ?, exit_signal = ?, model = ?,
       input_tokens = ?, output_tokens = ?, cache_read_tokens = ?, cache_creation_tokens = ?, reasoning_tokens = ?,
       cost_usd = ?, cost_basis = ?, error = ?, warnings = ?
     WHERE id = ?`,
  ).run(
    end.status,
    end.endReason,
    end.endedAt,
    end.exitCode,
    end.exitSignal,
    end.model,
    u?.inputTokens ?? null,
    u?.outputTokens ?? null,
    u?.cacheReadTokens ?? null,
    u?.cacheCreationTokens ?? null,
    u?.reasoningTokens ?? null,
    end.costUsd,
    end.costUsd === null ? null : 'engine-reported',
    end.error === null ? null : scrub(end.error),
    end.warnings?.length ? scrub(JSON.stringify(end.warnings)) : null,
    turnId,
  );
}

/**
 * The owner processes of the turns recorded running, each once (null: a turn with no owner
 * recorded). What a reader checks before recovering: 1,000 running turns of one live daemon are one
 * pid to look at, not 1,000 rows to read.
 */
export function runningOwners(db: Db): (number | null)[] {
  return db.prepare(`SELECT DISTINCT owner_pid FROM turns WHERE status = 'running'`).pluck().all() as (
    | number
    | null
  )[];
}

/** The running turns, with their session's runner. */
export function runningTurns(
  db: Db,
): { id: number; owner_pid: number | null; pid: number | null; started_at: string; runner: string }[] {
  return db
    .prepare(
      `SELECT t.id, t.owner_pid, t.pid, t.started_at, s.runner FROM turns t
         JOIN sessions s ON s.id = t.session_id WHERE t.status = 'running'`,
    )
    .all() as {
    id: number;
    owner_pid: number | null;
    pid: number | null;
    started_at: string;
    runner: string;
  }[];
}

/**
 * Marks each running turn whose owner process is gone (of a runner not skipped) lost; says so to
 * `onLost`. Returns how many.
 */
export function recoverLost(
  db: Db,
  at: string,
  isAlive: (pid: number) => boolean,
  onLost: ((turn: { id: number; pid: number | null; startedAt: string }) => void) | undefined,
  skipRunners: readonly string[],
): number {
  let lost = 0;
  for (const turn of runningTurns(db)) {
    if (skipRunners.includes(turn.runner) || !ownerGone(turn.owner_pid, isAlive)) continue;
    markTurnLost(db, turn.id, at, 'the process running this turn ended without recording its end');
    onLost?.({ id: turn.id, pid: turn.pid, startedAt: turn.started_at });
    lost += 1;
  }
  return lost;
}

/** The turns of each session named, in their order (one query, however many sessions). */
export function turnsOfSessions(db: Db, sessionIds: readonly string[]): Map<string, TurnRecord[]> {
  const of = new Map<string, TurnRecord[]>(sessionIds.map((id) => [id, []]));
  if (sessionIds.length === 0) return of;
  const rows = db
    .prepare(
      'SELECT * FROM turns WHERE session_id IN (SELECT value FROM json_each(?)) ORDER BY session_id, seq',
    )
    .all(JSON.stringify(sessionIds)) as TurnRow[];
  for (const row of rows) of.get(row.session_id)?.push(toTurn(row));
  return of;
}

/** Running turns of the given runners whose owner process is gone. */
export function orphanTurns(
  db: Db,
  isAlive: (pid: number) => boolean,
  runners: readonly string[],
): TurnRecord[] {
  const rows = db
    .prepare(
      `SELECT t.*, s.runner AS session_runner FROM turns t JOIN sessions s ON s.id = t.session_id
         WHERE t.status = 'running' ORDER BY t.id`,
    )
    .all() as (TurnRow & { session_runner: string })[];
  return rows
    .filter((row) => runners.includes(row.session_runner) && ownerGone(row.owner_pid, isAlive))
    .map(toTurn);
}

export function markTurnLost(db: Db, turnId: number, at: string, error: string): void {
  db.transaction(() => {
    const info = db
      .prepare(
        "UPDATE turns SET status = 'failed', end_reason = 'lost', ended_at = ?, error = ? WHERE id = ? AND status = 'running'",
      )
      .run(at, error, turnId);
    if (info.changes === 0) return;
    // Whatever it used before its owner died was not measured: the ledger says so (invariant 2),
    // through its owner, in this transaction.
    const of = db
      .prepare(
        `SELECT s.id, s.work_item, s.engine, s.runner FROM turns t JOIN sessions s ON s.id = t.session_id
         WHERE t.id = ?`,
      )
      .get(turnId) as { id: string; work_item: string; engine: string; runner: string };
    insertUnmeteredDrive(db, {
      at,
      sessionId: of.id,
      workItem: of.work_item,
      turnId,
      engine: of.engine,
      runner: of.runner,
      reason: `lost: ${error}`,
    });
  })();
}

/**
 * Our own pid is never a live owner at recovery: this process has not begun a turn yet, so a match
 * is an earlier life of the same pid (a restarted container).
 */
export function ownerGone(owner: number | null, isAlive: (pid: number) => boolean): boolean {
  return owner === null || owner === process.pid || !isAlive(owner);
}

/**
 * The turn running at `at`: the last one started before it (else the latest). What an OTLP record
 * made then is attributed to.
 */
export function turnAt(db: Db, sessionId: string, at: string): TurnRecord | undefined {
  // Prepared once per database: every OTLP record asks.
  let query = turnAtQueries.get(db);
  if (!query) {
    query = db.prepare(
      `SELECT * FROM turns WHERE session_id = @session
       ORDER BY (started_at <= @at) DESC, seq DESC LIMIT 1`,
    );
    turnAtQueries.set(db, query);
  }
  const row = query.get({ session: sessionId, at }) as TurnRow | undefined;
  return row && toTurn(row);
}

const turnAtQueries = new WeakMap<Db, Database.Statement<unknown[]>>();

/** Turns of a session (or of every session of a work item) started since `since` (ISO; '' for all). */
export function countTurns(db: Db, scope: 'session' | 'work-item', key: string, since: string): number {
  const which =
    scope === 'session' ? 'session_id = ?' : 'session_id IN (SELECT id FROM sessions WHERE work_item = ?)';
  return (
    db.prepare(`SELECT COUNT(*) AS n FROM turns WHERE ${which} AND started_at >= ?`).get(key, since) as {
      n: number;
    }
  ).n;
}
