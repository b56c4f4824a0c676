import type { TokenStore } from '../../core/ports/tokens.js';
import type { Pg } from './pg.js';

/** The gateway's capability tokens (the `gateway_tokens` table) on PostgreSQL: its only reader and writer. */
export class PgTokenStore implements TokenStore {
  constructor(private readonly db: Pg) {}

  async add(hash: string, sessionId: string, at: string): Promise<void> {
    await this.db.run('INSERT INTO gateway_tokens (hash, session_id, created_at) VALUES ($1, $2, $3)', [
      hash,
      sessionId,
      at,
    ]);
  }

  async sessionOf(hash: string): Promise<string | undefined> {
    const row = await this.db.row<{ session_id: string }>(
      'SELECT session_id FROM gateway_tokens WHERE hash = $1 AND revoked_at IS NULL',
      [hash],
    );
    return row?.session_id;
  }

  async revoke(hash: string, at: string): Promise<void> {
    await this.db.run('UPDATE gateway_tokens SET revoked_at = $1 WHERE hash = $2 AND revoked_at IS NULL', [
      at,
      hash,
    ]);
  }

  async revokeSession(sessionId: string, at: string): Promise<number> {
    return this.db.run(
      'UPDATE gateway_tokens SET revoked_at = $1 WHERE session_id = $2 AND revoked_at IS NULL',
      [at, sessionId],
    );
  }
}
