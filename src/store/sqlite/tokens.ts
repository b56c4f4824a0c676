import type Database from 'better-sqlite3';
import type { TokenStore } from '../../core/ports/tokens.js';
import type { Db } from '../db.js';

type Statement = Database.Statement<unknown[]>;

/** The gateway's capability tokens (the `gateway_tokens` table): its only reader and writer. */
export class SqliteTokenStore implements TokenStore {
  private readonly insert: Statement;
  private readonly lookup: Statement;
  private readonly revokeAll: Statement;
  private readonly revokeOne: Statement;

  constructor(db: Db) {
    // Prepared once: the gateway looks a token up on every request.
    this.insert = db.prepare('INSERT INTO gateway_tokens (hash, session_id, created_at) VALUES (?, ?, ?)');
    this.lookup = db
      .prepare('SELECT session_id FROM gateway_tokens WHERE hash = ? AND revoked_at IS NULL')
      .pluck();
    this.revokeAll = db.prepare(
      'UPDATE gateway_tokens SET revoked_at = ? WHERE session_id = ? AND revoked_at IS NULL',
    );
    this.revokeOne = db.prepare(
      'UPDATE gateway_tokens SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL',
    );
  }

  async add(hash: string, sessionId: string, at: string): Promise<void> {
    this.insert.run(hash, sessionId, at);
  }

  async sessionOf(hash: string): Promise<string | undefined> {
    return this.lookup.get(hash) as string | undefined;
  }

  async revoke(hash: string, at: string): Promise<void> {
    this.revokeOne.run(at, hash);
  }

  async revokeSession(sessionId: string, at: string): Promise<number> {
    return this.revokeAll.run(at, sessionId).changes;
  }
}
