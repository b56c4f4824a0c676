import type { SessionRecord, SessionStore } from '../core/ports/sessions.js';
import type { Logger } from '../log/logger.js';
import type { GatewayTokens } from './tokens.js';

/**
 * The session store, with a session's capability tokens revoked whenever it stops being active
 * (closed by a person or its work item, lost, ended by its engine): one place, whoever ends it.
 */
export function revokingStore(store: SessionStore, tokens: GatewayTokens, logger: Logger): SessionStore {
  // The store stays synchronous: the revocation completes behind it (the gateway also refuses a
  // token whose session is no longer active, so nothing is served meanwhile).
  const revoke = (session: SessionRecord) => {
    tokens.revokeSession(session.id).catch((error: unknown) => {
      logger.error('could not revoke the capability tokens of an ended session', {
        session: session.id,
        error,
      });
    });
    return session;
  };
  const close: SessionStore['close'] = (id, reason) => revoke(store.close(id, reason));
  const markGone: SessionStore['markGone'] = (id, status, reason) =>
    revoke(store.markGone(id, status, reason));
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'close') return close;
      if (prop === 'markGone') return markGone;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
