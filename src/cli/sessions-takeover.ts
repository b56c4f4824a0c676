import { hostname, userInfo } from 'node:os';
import type { SessionRecord, SessionStore } from '../core/ports/sessions.js';
import { handBack, type TakeoverDeps, takeOver } from '../sessions/takeover.js';
import { toJson } from './format.js';
import { EXIT, type Io } from './io.js';
import { findSession } from './sessions.js';

/**
 * `sessions takeover|handback`: a person at a terminal takes a session over (its deliveries wait
 * while they type in it, through `sessions attach`) and hands it back. From the CLI there is no
 * console login: the take over's principal is null, and the person is named by `--as` (default
 * `$USER@host`).
 */

/** What the commands use of the app: the registry (to find the session), the ledger, the log. */
export type TakeoverApp = Omit<TakeoverDeps, 'store'> & { store: SessionStore };

/** Who a person at this terminal is, by default: `$USER@host`. */
export function terminalName(env: Readonly<Record<string, string | undefined>>): string {
  let user = env.USER ?? env.LOGNAME;
  if (!user) {
    try {
      user = userInfo().username;
    } catch {
      user = 'someone';
    }
  }
  return `${user}@${hostname()}`;
}

export async function takeoverCommand(
  app: TakeoverApp,
  io: Io,
  ref: string,
  options: { as?: string; json?: boolean },
): Promise<number> {
  const session = await findSession(app.store, ref);
  const by = options.as ?? terminalName(io.env);
  const before = session.takeover;
  const taken = await takeOver(app, session, { by, principal: null }, new Date());
  const already = before !== null && before.since === taken.takeover?.since;
  if (options.json) {
    io.out(`${toJson({ takenOver: true, already, session: taken })}\n`);
    return EXIT.ok;
  }
  const t = taken.takeover as NonNullable<SessionRecord['takeover']>;
  io.out(
    [
      `${taken.workItem}: ${already ? 'already ' : ''}taken over by ${t.by} since ${t.since}; its deliveries wait.`,
      ...(taken.runner === 'tmux' ? [`  type in it:   the-loop sessions attach ${taken.workItem}`] : []),
      `  hand it back: the-loop sessions handback ${taken.workItem}`,
      '',
    ].join('\n'),
  );
  return EXIT.ok;
}

export async function handbackCommand(
  app: TakeoverApp,
  io: Io,
  ref: string,
  options: { json?: boolean },
): Promise<number> {
  const session = await findSession(app.store, ref);
  const fresh = (await app.store.get(session.id)) ?? session;
  const held = fresh.takeover;
  const back = await handBack(app, fresh, new Date());
  if (options.json) {
    io.out(`${toJson({ handedBack: held !== null, released: held, session: back })}\n`);
    return EXIT.ok;
  }
  io.out(
    held
      ? `${back.workItem}: handed back (taken over by ${held.by} since ${held.since}). Held deliveries run next.\n`
      : `${back.workItem}: session ${back.id.slice(0, 8)} is not taken over.\n`,
  );
  return EXIT.ok;
}
