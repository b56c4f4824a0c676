import type { SessionRecord, SessionStore } from './ports/sessions.js';

/**
 * The session store, with `after` run on a session whenever the store ends it (`close`: by a person
 * or its work item; `markGone`: lost, or ended by its engine) and before the call resolves — one
 * place, whoever ends it. What ends with a session (its capability tokens, a take over) hangs here.
 */
export function onSessionEnd(
  store: SessionStore,
  after: (session: SessionRecord) => Promise<SessionRecord>,
): SessionStore {
  const close: SessionStore['close'] = async (id, reason) => after(await store.close(id, reason));
  const markGone: SessionStore['markGone'] = async (id, status, reason) =>
    after(await store.markGone(id, status, reason));
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'close') return close;
      if (prop === 'markGone') return markGone;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
