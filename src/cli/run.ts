import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { LoopError } from '../core/errors.js';
import type { TurnEvent } from '../core/events.js';
import type { SessionRecord, TurnRecord } from '../core/ports/sessions.js';
import { formatWorkItem, parseWorkItem } from '../core/work-item.js';
import { acquireLock, currentHolder, lockPath } from '../dispatch/lock.js';
import { manualPlan } from '../dispatch/manual-plan.js';
import type { App } from '../main.js';
import { type RunDispatch, startRunDispatch } from '../main-run.js';
import { describeEvent } from './describe-event.js';
import { formatDuration, formatGuard, formatTurnUsage, oneLine, toJson, turnDurationMs } from './format.js';
import { EXIT, type Io } from './io.js';

export interface RunOptions {
  engine?: string;
  cwd?: string;
  runner?: string;
  json?: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `promise` or `ms`, whichever comes first; the timer is cleared (it must not hold the process open). */
async function raceTimer(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([promise, new Promise((r) => (timer = setTimeout(r, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A turn run in this process would run outside the hosts' leases (unfenced, beside the host that
 * holds the work item): on a shared store the daemons run turns.
 */
function refuseShared(app: App, workItem: string): string {
  if (app.stores.recovery === 'leases')
    throw new LoopError(
      'usage',
      '`the-loop run` runs a turn in this process, and this config uses a store several hosts share',
      {
        hint: `Queue it for the hosts instead: the-loop sessions send ${workItem} "<text>" (the host holding the work item runs it).`,
      },
    );
  return workItem;
}

/**
 * `the-loop run <work-item> <prompt>`: one turn, through the same inbox and dispatcher as a webhook,
 * so it queues behind webhook turns of the same session. With a daemon running, the daemon runs it
 * and this command follows it; otherwise this command dispatches that work item itself.
 */
export async function runCommand(
  app: App,
  io: Io,
  workItemRef: string,
  prompt: string,
  options: RunOptions,
): Promise<number> {
  // Everything that can be refused is refused before anything is queued (a shared store first).
  const workItem = refuseShared(app, formatWorkItem(parseWorkItem(workItemRef)));
  const cwd = options.cwd ? resolve(io.cwd, options.cwd) : undefined;
  const plan = await app.turns.preflight({
    workItem,
    prompt,
    engine: options.engine,
    runner: options.runner,
    cwd,
  });

  const printSession = (session: SessionRecord, created: boolean) => {
    if (options.json) {
      io.out(`${toJson({ type: 'session', created, session })}\n`);
      return;
    }
    const what = created ? 'new session' : 'session';
    const credential = session.credentialKind
      ? `${session.credentialKind} (${session.credentialEnv})`
      : 'no credential set';
    io.out(
      `▸ ${session.workItem} · ${what} ${session.id.slice(0, 8)} · ${session.engine} on ${session.runner} · ${credential}\n`,
    );
    io.out(`  cwd ${session.cwd}\n`);
  };
  const printEvent = (event: TurnEvent) => {
    if (options.json) {
      io.out(`${toJson({ type: 'event', event })}\n`);
      return;
    }
    const line = describeEvent(event);
    if (line) io.out(`${line}\n`);
  };

  const deliveryId = `manual-${randomUUID()}`;
  // Planned as it is queued, like a webhook routed on arrival: the dispatcher runs it as stored.
  const body = { workItem, prompt, engine: options.engine, runner: options.runner, cwd };
  await app.inbox.accept({
    id: deliveryId,
    source: 'manual',
    event: 'manual',
    action: null,
    body: JSON.stringify(body),
    routed: manualPlan(body),
  });

  const controller = new AbortController();
  const onSignal = () => {
    io.err('the-loop: cancelling…\n');
    controller.abort();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const started = Date.now();
  try {
    let announced = false;
    for (;;) {
      const lock = acquireLock(lockPath(app.loaded.dataDir), 'run');
      if ('release' in lock) {
        await dispatchOwn(
          app,
          { workItem, deliveryId, cwd: plan.cwd },
          printEvent,
          printSession,
          controller.signal,
          lock.release,
        );
        if (await heldNote(app, deliveryId)) return await reportHeld(app, io, deliveryId, options);
        break;
      }
      if (!announced && !options.json) {
        const who = lock.heldBy.kind === 'run' ? 'another `the-loop run`' : 'the daemon';
        io.out(`  queued as ${deliveryId}; ${who} (pid ${lock.heldBy.pid}) dispatches it — following…\n`);
      }
      announced = true;
      // Follow until it settles — or until nobody holds the lock any more (the holder finished or
      // died): then take over and dispatch it here.
      const outcome = await follow(app, deliveryId, printSession, printEvent, controller.signal);
      if (outcome === 'settled') break;
      if (outcome === 'held') return await reportHeld(app, io, deliveryId, options);
      if (outcome === 'aborted') {
        io.err(
          `the-loop: stopped following; ${deliveryId} stays queued (see \`the-loop events show ${deliveryId}\`)\n`,
        );
        return EXIT.failed;
      }
    }
    return await report(app, io, deliveryId, options, started);
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

async function dispatchOwn(
  app: App,
  turn: { workItem: string; deliveryId: string; cwd: string },
  onEvent: (e: TurnEvent) => void,
  onSession: (s: SessionRecord, created: boolean) => void,
  signal: AbortSignal,
  release: () => void,
): Promise<void> {
  const { deliveryId } = turn;
  let running: RunDispatch | undefined;
  try {
    // The root starts what dispatching needs (recovery, the telemetry receiver, the gateway); the
    // workspace the plan names has its git dirs asked at once.
    running = await startRunDispatch(app, { ...turn, onEvent, onSession });
    const dispatch = running;
    const onAbort = () => void dispatch.stop();
    signal.addEventListener('abort', onAbort, { once: true });
    while (!(await isSettled(app, deliveryId)) && !(await heldNote(app, deliveryId)) && !signal.aborted) {
      // Woken when the dispatcher has nothing left to run (the delivery settled, or waits on a hold),
      // not by a poll: the turn's end reaches the report at once. The timer is a backstop only.
      const since = Date.now();
      await raceTimer(dispatch.idle(), 1000);
      // Idle without the delivery settled or held is not expected: never spin on it.
      if (Date.now() - since < 5) await sleep(25);
    }
    signal.removeEventListener('abort', onAbort);
    await dispatch.stop();
  } finally {
    await running?.close();
    release();
  }
}

/** Why a queued delivery waits (its session is held, e.g. over budget), if it does. */
const heldNote = async (app: App, id: string): Promise<string | undefined> => {
  const d = await app.inbox.get(id);
  return d?.status === 'queued' ? (d.heldReason ?? undefined) : undefined;
};

/** The delivery is queued behind a hold: say why and how to release it; it runs once resumed. */
async function reportHeld(app: App, io: Io, deliveryId: string, options: RunOptions): Promise<number> {
  const reason = (await heldNote(app, deliveryId)) ?? 'held';
  const workItem = (await app.inbox.get(deliveryId))?.workItem ?? '<work-item>';
  // Only a budget hold needs a raise; a breach or an unaccounted session needs a person's resume.
  const kind = (await app.store.findActive(workItem))?.hold?.kind;
  const resume = `the-loop sessions resume ${workItem}${kind === 'over-budget' || kind === undefined ? ' --raise <amount>' : ''}`;
  if (options.json) io.out(`${toJson({ type: 'held', delivery: deliveryId, reason, hold: kind ?? null })}\n`);
  else
    io.out(
      `⏸ held: ${reason}. ${deliveryId} stays queued and runs when the session is resumed: \`${resume}\`${kind === 'breach' ? ' (see `the-loop acts --breaches`)' : ''}\n`,
    );
  return EXIT.failed;
}

const isSettled = async (app: App, id: string) => {
  const status = (await app.inbox.get(id))?.status;
  return status === 'done' || status === 'failed' || status === 'rejected' || status === 'ignored';
};

async function follow(
  app: App,
  deliveryId: string,
  onSession: (s: SessionRecord, created: boolean) => void,
  onEvent: (e: TurnEvent) => void,
  signal: AbortSignal,
): Promise<'settled' | 'aborted' | 'unlocked' | 'held'> {
  let turn: TurnRecord | undefined;
  let seen = 0;
  for (;;) {
    const settled = await isSettled(app, deliveryId);
    const latest = (await app.store.turnsForDelivery(deliveryId)).at(-1);
    if (latest && latest.id !== turn?.id) {
      turn = latest;
      seen = 0;
      const session = await app.store.get(latest.sessionId);
      if (session) onSession(session, latest.seq === 1);
    }
    if (turn) {
      const events = await app.store.events(turn.id);
      for (const e of events.slice(seen)) onEvent(e.event);
      seen = events.length;
    }
    if (settled) return 'settled';
    if (await heldNote(app, deliveryId)) return 'held';
    if (signal.aborted) return 'aborted';
    if (!currentHolder(lockPath(app.loaded.dataDir))) return 'unlocked';
    await sleep(200);
  }
}

async function report(
  app: App,
  io: Io,
  deliveryId: string,
  options: RunOptions,
  started: number,
): Promise<number> {
  const delivery = await app.inbox.get(deliveryId);
  const turn = (await app.store.turnsForDelivery(deliveryId)).at(-1);
  if (!turn) {
    const error = delivery?.error ?? `the delivery ended ${delivery?.status ?? 'unknown'} without a turn`;
    if (options.json) io.out(`${toJson({ type: 'error', delivery: deliveryId, error })}\n`);
    throw new LoopError('internal', error);
  }
  if (options.json) {
    io.out(`${toJson({ type: 'turn', turn })}\n`);
  } else {
    const took = formatDuration(turnDurationMs(turn) ?? Date.now() - started);
    const mark = turn.status === 'succeeded' ? '✔' : '✖';
    io.out(
      `${mark} turn ${turn.seq} ${turn.status} · ended by ${turn.endReason} · ${took} · ${formatTurnUsage(turn)}\n`,
    );
    if (turn.error) io.out(`  error: ${oneLine(turn.error, 1000)}\n`);
    io.out(`  guard: ${formatGuard(turn.guard)}\n`);
    for (const warning of turn.warnings) io.out(`  ⚠ ${oneLine(warning, 1000)}\n`);
  }
  return turn.status === 'succeeded' ? EXIT.ok : EXIT.failed;
}
