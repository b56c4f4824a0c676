import type { SessionRecord, SessionStore } from '../core/ports/sessions.js';
import { onSessionEnd } from '../core/session-end.js';
import type { Logger } from '../log/logger.js';
import type { GatewayTokens } from './tokens.js';

/**
 * The session store, with a session's capability tokens revoked whenever it stops being active
 * (closed by a person or its work item, lost, ended by its engine): one place, whoever ends it. The
 * tokens are revoked once the store has ended the session and before `close`/`markGone` resolve, so
 * an ended session's token is refused from then on. A revocation that fails is logged, and the session
 * stays ended (the gateway also refuses a token whose session is no longer active).
 */
export function revokingStore(store: SessionStore, tokens: GatewayTokens, logger: Logger): SessionStore {
  const revoke = async (session: SessionRecord): Promise<SessionRecord> => {
    try {
      await tokens.revokeSession(session.id);
    } catch (error) {
      logger.error('could not revoke the capability tokens of an ended session', {
        session: session.id,
        error,
      });
    }
    return session;
  };
  return onSessionEnd(store, revoke);
}
