/**
 * The gateway's capability tokens as they are kept: only a hash of each (SHA-256), so the store alone
 * lets nobody act as a session. The token itself is made and hashed by the gateway
 * (gateway/tokens.ts); the SQLite store keeps the hashes (store/sqlite/tokens.ts).
 */
export interface TokenStore {
  /** Keep a new token's hash for a session. */
  add(hash: string, sessionId: string, at: string): Promise<void>;
  /** The session of a kept hash that is not revoked; undefined for anything else. */
  sessionOf(hash: string): Promise<string | undefined>;
  /** Revoke one token (nothing happens when it is unknown or revoked already). */
  revoke(hash: string, at: string): Promise<void>;
  /** Revoke every token of a session; returns how many were revoked. */
  revokeSession(sessionId: string, at: string): Promise<number>;
}
