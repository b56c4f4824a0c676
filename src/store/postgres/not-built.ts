/**
 * TEMPORARY (issue 17, in progress): a PostgreSQL port not written yet. Every call fails with a
 * LoopError naming it. Each port's file replaces its stub with the real store; none may remain when
 * the PostgreSQL store is offered (`store.kind: postgres`).
 */
import { LoopError } from '../../core/errors.js';
import type { Pg } from './pg.js';

export function notBuilt<T>(port: string): new (db: Pg, options?: { scrub: (text: string) => string }) => T {
  return class {
    constructor() {
      // biome-ignore lint/correctness/noConstructorReturn: a stand-in that fails every call
      return new Proxy(
        {},
        {
          get: (_target, key) =>
            key === 'then'
              ? undefined
              : () =>
                  Promise.reject(
                    new LoopError('internal', `PostgreSQL ${port}.${String(key)} is not built yet`),
                  ),
        },
      );
    }
  } as unknown as new (
    db: Pg,
    options?: { scrub: (text: string) => string },
  ) => T;
}
