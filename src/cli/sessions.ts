import type { ActRecord } from '../acts/audit.js';
import { LoopError } from '../core/errors.js';
import type { SessionRecord, SessionStore } from '../core/ports/sessions.js';
import { formatWorkItem, parseWorkItem } from '../core/work-item.js';
import { formatAmount } from '../ledger/budget-rules.js';
import { totalTokens } from '../ledger/usage.js';
import type { App } from '../main.js';
import { isSessionHolding, type Runner } from '../runners/runner.js';
import { resumeHeld } from '../sessions/resume.js';
import {
  type SessionLister,
  type SessionListing,
  type SessionSummary,
  summarizeTurns,
} from '../sessions/summary.js';
import { takeoverReason } from '../sessions/takeover-rules.js';
import { describeEvent } from './describe-event.js';
import {
  formatDuration,
  formatGuard,
  formatInt,
  formatTokens,
  formatTurnUsage,
  oneLine,
  table,
  toJson,
  turnDurationMs,
} from './format.js';
import { EXIT, type Io } from './io.js';

/** A session named by work item (its active session, else its latest) or by id / id prefix (≥ 8 chars). */
export async function findSession(store: SessionStore, ref: string): Promise<SessionRecord> {
  if (ref.startsWith('github:')) {
    const workItem = formatWorkItem(parseWorkItem(ref));
    const session = (await store.findActive(workItem)) ?? (await store.list({ workItem, limit: 1 }))[0];
    if (!session)
      throw new LoopError('session-missing', `no session for ${workItem}`, {
        hint: 'See `the-loop sessions list --all`.',
      });
    return session;
  }
  if (!/^[0-9a-f-]{8,36}$/i.test(ref)) {
    throw new LoopError('usage', `not a work item or session id: ${JSON.stringify(ref)}`, {
      hint: 'Name a session by work item (github:owner/repo#15) or by its id (at least 8 characters).',
    });
  }
  const exact = await store.get(ref);
  if (exact) return exact;
  const matches = (await store.list({ limit: 100000 })).filter((s) => s.id.startsWith(ref.toLowerCase()));
  if (matches.length === 1 && matches[0]) return matches[0];
  if (matches.length > 1)
    throw new LoopError('usage', `session id prefix ${ref} is ambiguous (${matches.length} sessions)`);
  throw new LoopError('session-missing', `no session with id ${ref}`, {
    hint: 'See `the-loop sessions list --all`.',
  });
}

/**
 * `sessions list`: a store that lists sessions in figures (SessionLister) prints its table without
 * reading any turn; `--json` prints the whole records and summaries.
 */
export async function listSessions(
  store: SessionStore & Partial<SessionLister>,
  io: Io,
  options: { all?: boolean; json?: boolean; workItem?: string },
): Promise<number> {
  const workItem = options.workItem ? formatWorkItem(parseWorkItem(options.workItem)) : undefined;
  const filter = {
    ...(workItem ? { workItem } : {}),
    ...(options.all ? {} : { status: 'active' as const }),
  };
  if (!options.json && store.listings) {
    printListings(io, await store.listings(filter), options);
    return EXIT.ok;
  }
  const sessions = await store.list(filter);
  const rows: Array<{ session: SessionRecord; summary: SessionSummary }> = [];
  const turnsOf = await store.turnsOfSessions(sessions.map((s) => s.id));
  for (const s of sessions) rows.push({ session: s, summary: summarizeTurns(turnsOf.get(s.id) ?? []) });
  if (options.json) {
    io.out(
      `${toJson(
        rows.map((r) => ({ ...r.session, ...r.summary })),
        2,
      )}\n`,
    );
    return EXIT.ok;
  }
  printListings(
    io,
    rows.map(({ session: s, summary: m }) => ({
      ...s,
      ...m,
      tokens: m.usage ? totalTokens(m.usage) : null,
    })),
    options,
  );
  return EXIT.ok;
}

function printListings(io: Io, rows: readonly SessionListing[], options: { all?: boolean }): void {
  if (rows.length === 0) {
    io.out(
      options.all
        ? 'No sessions yet. Start one with `the-loop run <work-item> "<prompt>"`.\n'
        : 'No active sessions (add --all for closed ones).\n',
    );
    return;
  }
  io.out(
    table(
      ['WORK ITEM', 'ENGINE', 'RUNNER', 'TMUX', 'STATUS', 'TURNS', 'TOKENS', 'LAST TURN', 'ID'],
      rows.map((s) => [
        s.workItem,
        s.engine,
        s.runner,
        s.tmuxTarget ?? '-',
        listStatus(s, s),
        String(s.turns),
        // What formatTokens writes before its breakdown.
        s.tokens !== null ? `${formatInt(s.tokens)} tokens` : s.turns ? 'unmetered' : '-',
        s.lastTurnAt ?? '-',
        s.id.slice(0, 8),
      ]),
    ),
  );
}

/** A session's STATUS in `sessions list`: a person typing in it first (its deliveries wait). */
function listStatus(
  s: Pick<SessionRecord, 'status' | 'takeover' | 'waiting' | 'hold'>,
  m: Pick<SessionSummary, 'running'>,
): string {
  if (s.status === 'active' && s.takeover) return `taken over by ${s.takeover.by}`;
  return s.waiting ? 'waiting for a person' : m.running ? 'running' : s.hold ? s.hold.kind : s.status;
}

export async function showSession(
  store: SessionStore,
  io: Io,
  ref: string,
  options: { json?: boolean },
  actsOf: (sessionId: string) => Promise<ActRecord[]> = async () => [],
): Promise<number> {
  const session = await findSession(store, ref);
  const turns = await store.turns(session.id);
  const summary = summarizeTurns(turns);
  const acts = await actsOf(session.id);
  if (options.json) {
    io.out(`${toJson({ session, summary, turns, acts }, 2)}\n`);
    return EXIT.ok;
  }
  const lines = [
    `Session ${session.id}`,
    `  work item   ${session.workItem}`,
    `  engine      ${session.engine} on the ${session.runner} runner`,
    `  engine id   ${session.engineSessionId ?? '(not yet known)'}`,
    `  cwd         ${session.cwd}`,
    `  credential  ${session.credentialKind ? `${session.credentialKind} via ${session.credentialEnv}` : 'none found in the environment (the engine uses its own login, if any)'}`,
    `  guard       ${formatGuard(turns.at(-1)?.guard ?? null)}`,
    `  status      ${session.waiting ? `waiting for a person since ${session.waiting.since}: ${oneLine(session.waiting.message, 200)}` : summary.running ? 'active, turn running' : session.status}${session.closeReason ? ` (${session.closeReason})` : ''}${session.hold ? ` · held, ${session.hold.kind}: ${session.hold.reason}` : ''}${session.status === 'active' && session.takeover ? ` · ${takeoverReason(session)}` : ''}`,
    `  created     ${session.createdAt}${session.closedAt ? ` · closed ${session.closedAt}` : ''}`,
    `  usage       ${summary.usage ? formatTokens(summary.usage) : 'unknown'}${summary.unmeteredTurns ? ` · ${summary.unmeteredTurns} turn(s) unmetered, not included` : ''}`,
    '',
    'Turns',
  ];
  for (const t of turns) {
    const took = turnDurationMs(t);
    lines.push(
      `  ${t.seq}. ${t.status} · ${t.endReason ?? 'running'} · ${t.startedAt}${took === null ? '' : ` · ${formatDuration(took)}`} · ${formatTurnUsage(t)}`,
    );
    if (t.error) lines.push(`     error: ${t.error.split('\n')[0]}`);
    for (const warning of t.warnings) lines.push(`     ⚠ ${oneLine(warning, 300)}`);
    for (const a of acts.filter((x) => x.turnId === t.id).reverse()) {
      const policy = a.breach
        ? `BREACH (${a.rule})`
        : a.verdict === 'deny'
          ? `denied (${a.rule})`
          : 'allowed';
      lines.push(
        `     act: ${a.kind} · ${a.outcome} · ${policy} · ${a.source === 'wire' ? 'at the gateway' : 'from a command'} · ${oneLine(a.command, 100)}`,
      );
    }
  }
  if (turns.length === 0) lines.push('  (none)');
  io.out(`${lines.join('\n')}\n`);
  return EXIT.ok;
}

export async function sessionLogs(
  store: SessionStore,
  io: Io,
  ref: string,
  options: { json?: boolean; turn?: number },
): Promise<number> {
  const session = await findSession(store, ref);
  const turns = (await store.turns(session.id)).filter(
    (t) => options.turn === undefined || t.seq === options.turn,
  );
  if (options.turn !== undefined && turns.length === 0) {
    throw new LoopError('usage', `session ${session.id.slice(0, 8)} has no turn ${options.turn}`);
  }
  for (const t of turns) {
    const events = await store.events(t.id);
    if (options.json) {
      for (const e of events) io.out(`${toJson({ turn: t.seq, seq: e.seq, at: e.at, event: e.event })}\n`);
      continue;
    }
    io.out(`── turn ${t.seq} · ${t.startedAt} · ${t.status}${t.endReason ? ` (${t.endReason})` : ''}\n`);
    for (const e of events) {
      const line = describeEvent(e.event);
      if (line) io.out(`${line}\n`);
    }
    if (t.error) io.out(`  error: ${t.error.split('\n')[0]}\n`);
  }
  return EXIT.ok;
}

export async function closeSession(
  store: SessionStore,
  runners: Record<string, Runner>,
  io: Io,
  ref: string,
  options: { json?: boolean },
): Promise<number> {
  const session = await findSession(store, ref);
  if (session.status !== 'active') {
    if (options.json) io.out(`${toJson({ closed: false, alreadyClosed: true, session })}\n`);
    else
      io.out(
        `${session.workItem}: session ${session.id.slice(0, 8)} was already ${session.status} (${session.closedAt}${session.closeReason ? `: ${session.closeReason}` : ''}).\n`,
      );
    return EXIT.ok;
  }
  if ((await store.turns(session.id)).some((t) => t.status === 'running')) {
    throw new LoopError('session-busy', `${session.workItem} has a turn running`, {
      hint: 'Wait for it to end (or cancel it where it runs), then close the session.',
    });
  }
  const closed = await store.close(session.id, 'closed by hand');
  // Best effort: the runner's own resources (a tmux session) end too; "already gone" is reported, not failed.
  const runner = Object.hasOwn(runners, closed.runner) ? runners[closed.runner] : undefined;
  const note = runner && isSessionHolding(runner) ? await runner.closeSession(closed) : undefined;
  if (options.json) io.out(`${toJson({ closed: true, session: closed, note: note ?? null })}\n`);
  else
    io.out(
      `${closed.workItem}: session ${closed.id.slice(0, 8)} closed${note ? ` (${note})` : ''}. Its history stays (\`the-loop sessions show ${closed.id.slice(0, 8)}\`).\n`,
    );
  return EXIT.ok;
}

/**
 * `sessions resume <wi> [--raise <amount>]`: release a held session. An over-budget one needs its
 * ceiling raised (in the unit of the ceiling reached: turns, tokens, or dollars); if it is still over
 * after the raise, it stays held and says so.
 */
export async function resumeSession(
  app: App,
  io: Io,
  ref: string,
  options: { raise?: string; json?: boolean },
): Promise<number> {
  const outcome = await resumeHeld(app, await findSession(app.store, ref), options.raise);
  const { session } = outcome;
  if (outcome.kind === 'not-held') {
    if (options.json) io.out(`${toJson({ resumed: false, held: false, session })}\n`);
    else io.out(`${session.workItem}: session ${session.id.slice(0, 8)} is not held.\n`);
    return EXIT.ok;
  }
  if (outcome.kind === 'released') {
    const hold = outcome.released;
    if (options.json) io.out(`${toJson({ resumed: true, released: hold, session })}\n`);
    else if (hold.kind === 'breach')
      io.out(
        `${session.workItem}: resumed after the policy breach (${hold.reason}). Held deliveries run next.\n`,
      );
    else if (hold.kind === 'interrupted')
      io.out(
        `${session.workItem}: resumed on this store's hosts after ${hold.reason}. Held deliveries run next; the interrupted turn is not run again (\`the-loop events list --status failed\`, \`events retry <id>\`).\n`,
      );
    else
      io.out(
        `${session.workItem}: acknowledged (${hold.reason}); its turns may go unmeasured or unaudited. Held deliveries run next.\n`,
      );
    return EXIT.ok;
  }
  const { released: hold, amount, again } = outcome;
  if (options.json) {
    io.out(`${toJson({ resumed: again === null, raised: { [hold.dimension]: amount }, session })}\n`);
  } else if (again) {
    io.out(
      `${session.workItem}: raised by ${formatAmount(hold.dimension, amount)}, but still over budget: ${again.reason}. Raise it further.\n`,
    );
  } else {
    io.out(
      `${session.workItem}: resumed; ${hold.scope} ceiling raised by ${formatAmount(hold.dimension, amount)}. Held deliveries run next.\n`,
    );
  }
  return again ? EXIT.failed : EXIT.ok;
}
