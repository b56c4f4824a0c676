import { createHash, randomBytes } from 'node:crypto';
import { isTokenShaped, TOKEN_PREFIX } from '../core/capability-token.js';
import type { Db } from '../store/db.js';

/**
 * The gateway's capability tokens (the `gateway_tokens` table: its only reader and writer). A token
 * is 32 random bytes; only its SHA-256 is stored, so the database alone lets nobody act as a
 * session. A token is valid while it is not revoked; the gateway also checks that its session is
 * still active, so a session that ended is refused even before its tokens are revoked.
 */
export { isTokenShaped, TOKEN_PATTERN, TOKEN_PREFIX } from '../core/capability-token.js';

const hashOf = (token: string): string => createHash('sha256').update(token, 'utf8').digest('hex');

export class GatewayTokens {
  private readonly insert;
  private readonly lookup;
  private readonly revokeAll;
  private readonly revokeOne;

  constructor(
    db: Db,
    private readonly now: () => Date = () => new Date(),
  ) {
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

  /** A new token for a session (the only time its value exists outside the engine's environment). */
  mint(sessionId: string): string {
    const token = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
    this.insert.run(hashOf(token), sessionId, this.now().toISOString());
    return token;
  }

  /** The session a valid, unrevoked token names; undefined for anything else. */
  sessionOf(token: string): string | undefined {
    if (!isTokenShaped(token)) return undefined;
    return this.lookup.get(hashOf(token)) as string | undefined;
  }

  /** Revoke one token (its turn ended). */
  revoke(token: string): void {
    this.revokeOne.run(this.now().toISOString(), hashOf(token));
  }

  /** Revoke every token of a session (it closed or ended). Returns how many were revoked. */
  revokeSession(sessionId: string): number {
    return this.revokeAll.run(this.now().toISOString(), sessionId).changes;
  }
}
