/**
 * A transcript import on PostgreSQL (`usage scan`, the daemon's watcher; begun by ledger.ts): its
 * pieces go into one transaction on a connection of its own, committed about every `everyMs` — what
 * is not committed when the import fails is rolled back, and read again from the transcripts next
 * time. The transaction holds only row locks, on the rows it inserted, corrected or removed: the
 * daemon's other writes go on meanwhile, and one of the same row waits at most until the next commit
 * (about `everyMs`). Its statements go through the pool's Runner (pg.ts) on the import's own connection.
 */
import type pg from 'pg';
import type { ImportPiece, LedgerImport, Pricer } from '../../core/ports/ledger.js';
import { noNul } from '../text.js';
import { type RowIn, rowsOf, writeRows } from './ledger-write.js';
import { type Pg, Runner } from './pg.js';

/** Transcript rows (no turn) taken out again, with when each was recorded (this import's own, or not). */
const UNIMPORT = `DELETE FROM usage_ledger
  WHERE meter = 'transcript' AND source_id = ANY($1::text[]) AND turn_id IS NULL RETURNING recorded_at`;

export class PgLedgerImport implements LedgerImport {
  private readonly started: string;
  private client: pg.PoolClient | undefined;
  private queries: Runner | undefined;
  /** When the open transaction began (Date.now()); undefined when none is open. */
  private since: number | undefined;
  private ended = false;
  /** How the connection failed, if it did: it is then dropped, not given back to the pool. */
  private failed: Error | undefined;
  /** Calls one after another: a piece, a commit and the end never interleave on the connection. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly db: Pg,
    private readonly everyMs: number,
    private readonly now: () => string,
  ) {
    this.started = now();
  }

  private serial<T>(call: () => Promise<T>): Promise<T> {
    const result = this.queue.then(call, call);
    this.queue = result.catch(() => {});
    return result;
  }

  /** The import's connection, in a transaction (begun now if none is open). */
  private async open(): Promise<Runner> {
    if (!this.client || !this.queries) {
      this.client = await this.db.pool.connect();
      // Held between pieces: a connection that fails then is an error event here (not a crash),
      // and the next statement on it fails, which ends the import.
      this.client.on('error', this.onError);
      this.queries = new Runner(this.client);
    }
    if (this.since === undefined) {
      await this.client.query('BEGIN');
      this.since = Date.now();
    }
    return this.queries;
  }

  write(piece: ImportPiece, price: Pricer): Promise<{ added: number; removedOwn: number }> {
    return this.serial(async () => {
      // A piece that arrives after the import ended (a worker's, as a failed scan stops) writes nothing.
      if (this.ended) throw new Error('the transcript import has ended');
      const recordedAt = this.now();
      try {
        // Priced and copied first (the iterables may hand one object again), in order.
        const add: RowIn[] = rowsOf(piece.add, price);
        const correct: RowIn[] = rowsOf(piece.correct, price);
        const q = await this.open();
        const added = await writeRows(q, add, recordedAt);
        await writeRows(q, correct, recordedAt);
        let removedOwn = 0;
        if (piece.remove.length > 0) {
          const removed = await q.rows<{ recorded_at: string }>(UNIMPORT, [piece.remove.map(noNul)]);
          removedOwn = removed.filter((r) => r.recorded_at >= this.started).length;
        }
        return { added, removedOwn };
      } catch (error) {
        // A piece that fails (a row refused, a pricer or a connection that failed) drops what is
        // not committed, and the import ends.
        await this.end();
        throw error;
      }
    });
  }

  private readonly onError = (error: Error): void => {
    this.failed ??= error;
  };

  /** Commit the open transaction; one that fails to commit ends the import (it was rolled back). */
  private async commitOpen(): Promise<void> {
    if (this.since === undefined || !this.client) return;
    this.since = undefined;
    try {
      await this.client.query('COMMIT');
    } catch (error) {
      this.failed ??= error as Error;
      await this.end();
      throw error;
    }
  }

  commit(now: boolean): Promise<void> {
    return this.serial(async () => {
      if (this.since !== undefined && (now || Date.now() - this.since >= this.everyMs))
        await this.commitOpen();
    });
  }

  finish(): Promise<void> {
    return this.serial(async () => {
      try {
        await this.commitOpen();
      } finally {
        await this.end();
      }
    });
  }

  abort(): Promise<void> {
    return this.serial(() => this.end());
  }

  /** Roll back what is not committed, give the connection back (dropped if it failed), and end. */
  private async end(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    const client = this.client;
    this.client = undefined;
    this.queries = undefined;
    if (!client) return;
    let broken = this.failed;
    if (this.since !== undefined && !broken) {
      await client.query('ROLLBACK').catch((e: Error) => {
        broken = e;
      });
    }
    this.since = undefined;
    client.removeListener('error', this.onError);
    // A connection that failed, or whose rollback did, is not handed out again.
    client.release(broken);
  }
}
