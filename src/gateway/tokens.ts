import { createHash, randomBytes } from 'node:crypto';
import { isTokenShaped, TOKEN_PREFIX } from '../core/capability-token.js';
import type { TokenStore } from '../core/ports/tokens.js';

/**
 * The gateway's capability tokens. A token is 32 random bytes; only its SHA-256 is kept (the
 * token store), so the database alone lets nobody act as a session. A token is valid while it is
 * not revoked; the gateway also checks that its session is still active, so a session that ended is
 * refused even before its tokens are revoked.
 */
export { isTokenShaped, TOKEN_PATTERN, TOKEN_PREFIX } from '../core/capability-token.js';

const hashOf = (token: string): string => createHash('sha256').update(token, 'utf8').digest('hex');

export class GatewayTokens {
  constructor(
    private readonly store: TokenStore,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** A new token for a session (the only time its value exists outside the engine's environment). */
  async mint(sessionId: string): Promise<string> {
    const token = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
    await this.store.add(hashOf(token), sessionId, this.now().toISOString());
    return token;
  }

  /** The session a valid, unrevoked token names; undefined for anything else. */
  async sessionOf(token: string): Promise<string | undefined> {
    if (!isTokenShaped(token)) return undefined;
    return this.store.sessionOf(hashOf(token));
  }

  /** Revoke one token (its turn ended). */
  revoke(token: string): Promise<void> {
    return this.store.revoke(hashOf(token), this.now().toISOString());
  }

  /** Revoke every token of a session (it closed or ended). Returns how many were revoked. */
  revokeSession(sessionId: string): Promise<number> {
    return this.store.revokeSession(sessionId, this.now().toISOString());
  }
}
