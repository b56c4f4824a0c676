import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { LoopError } from '../core/errors.js';
import { formatWorkItem, parseWorkItem } from '../core/work-item.js';
import { acquireLock } from '../dispatch/lock.js';
import type { TurnEvent } from '../engines/protocols/types.js';
import { type App, createDispatcher, lockPath } from '../main.js';
import type { SessionRecord, TurnRecord } from '../sessions/types.js';
import { formatCost, formatDuration, formatTokens, oneLine, turnDurationMs } from './format.js';
import { EXIT, type Io } from './io.js';

export interface RunOptions {
  engine?: string;
  cwd?: string;
  runner?: string;
  json?: boolean;
}

/** Readable progress for one event; untrusted text is flattened to one safe line. */
export function describeEvent(event: TurnEvent): string | null {
  switch (event.type) {
    case 'session':
      return null;
    case 'text':
      return event.text.trim() ? `  │ ${oneLine(event.text, 400)}` : null;
    case 'tool-use':
      return `  ⚙ ${oneLine(event.name, 60)} ${oneLine(JSON.stringify(event.input ?? null), 200)}`;
    case 'tool-result':
      return `  ${event.ok ? '✓' : '✗'} ${oneLine(event.summary, 200) || '(no output)'}`;
    case 'usage':
      return null;
    case 'turn-end':
      return null;
    case 'error':
      return `  ! engine error: ${oneLine(event.message, 400)}`;
    case 'diagnostic':
      return `  ? ${oneLine(event.message, 300)}`;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
  const workItem = formatWorkItem(parseWorkItem(workItemRef));
  const cwd = options.cwd ? resolve(io.cwd, options.cwd) : undefined;
  // Everything that can be refused is refused before anything is queued.
  app.turns.preflight({ workItem, prompt, engine: options.engine, runner: options.runner, cwd });

  const printSession = (session: SessionRecord, created: boolean) => {
    if (options.json) {
      io.out(`${JSON.stringify({ type: 'session', created, session })}\n`);
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
      io.out(`${JSON.stringify({ type: 'event', event })}\n`);
      return;
    }
    const line = describeEvent(event);
    if (line) io.out(`${line}\n`);
  };

  const deliveryId = `manual-${randomUUID()}`;
  app.inbox.accept({
    id: deliveryId,
    source: 'manual',
    event: 'manual',
    action: null,
    body: JSON.stringify({ workItem, prompt, engine: options.engine, runner: options.runner, cwd }),
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
    const lock = acquireLock(lockPath(app.loaded.dataDir));
    if ('release' in lock) {
      const dispatcher = createDispatcher(app, {
        only: workItem,
        onEvent: printEvent,
        onSession: printSession,
        pollMs: 100,
      });
      try {
        dispatcher.start();
        controller.signal.addEventListener('abort', () => void dispatcher.stop(0), { once: true });
        while (!isSettled(app, deliveryId) && !controller.signal.aborted) await sleep(25);
        await dispatcher.stop(0);
      } finally {
        lock.release();
      }
    } else {
      if (!options.json)
        io.out(`  queued as ${deliveryId}; the daemon (pid ${lock.heldBy}) runs it — following…\n`);
      await follow(app, deliveryId, printSession, printEvent, controller.signal);
      if (controller.signal.aborted && !isSettled(app, deliveryId)) {
        io.err(
          `the-loop: stopped following; the daemon still runs ${deliveryId} (see \`the-loop events show ${deliveryId}\`)\n`,
        );
        return EXIT.failed;
      }
    }
    return report(app, io, deliveryId, options, started);
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

const isSettled = (app: App, id: string) => {
  const status = app.inbox.get(id)?.status;
  return status === 'done' || status === 'failed' || status === 'rejected' || status === 'ignored';
};

async function follow(
  app: App,
  deliveryId: string,
  onSession: (s: SessionRecord, created: boolean) => void,
  onEvent: (e: TurnEvent) => void,
  signal: AbortSignal,
): Promise<void> {
  let turn: TurnRecord | undefined;
  let seen = 0;
  for (;;) {
    const settled = isSettled(app, deliveryId);
    const turns = app.store.turnsForDelivery(deliveryId);
    const latest = turns.at(-1);
    if (latest && latest.id !== turn?.id) {
      turn = latest;
      seen = 0;
      const session = app.store.get(latest.sessionId);
      if (session) onSession(session, latest.seq === 1);
    }
    if (turn) {
      for (const e of app.store.events(turn.id).slice(seen)) onEvent(e.event);
      seen = app.store.events(turn.id).length;
    }
    if (settled || signal.aborted) return;
    await sleep(200);
  }
}

function report(app: App, io: Io, deliveryId: string, options: RunOptions, started: number): number {
  const delivery = app.inbox.get(deliveryId);
  const turn = app.store.turnsForDelivery(deliveryId).at(-1);
  if (!turn) {
    const error = delivery?.error ?? `the delivery ended ${delivery?.status ?? 'unknown'} without a turn`;
    if (options.json) io.out(`${JSON.stringify({ type: 'error', delivery: deliveryId, error })}\n`);
    throw new LoopError('internal', error);
  }
  if (options.json) {
    io.out(`${JSON.stringify({ type: 'turn', turn })}\n`);
  } else {
    const took = formatDuration(turnDurationMs(turn) ?? Date.now() - started);
    const mark = turn.status === 'succeeded' ? '✔' : '✖';
    io.out(
      `${mark} turn ${turn.seq} ${turn.status} · ended by ${turn.endReason} · ${took} · ${formatTokens(turn.usage)} · ${formatCost(turn)}\n`,
    );
    if (turn.error) io.out(`  error: ${oneLine(turn.error, 1000)}\n`);
  }
  return turn.status === 'succeeded' ? EXIT.ok : EXIT.failed;
}
