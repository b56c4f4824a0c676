/**
 * `the-loop sessions move <work item> --to <host>` (issue 17, docs/scale-out.md): on a shared
 * PostgreSQL store, drain a work item on the host that holds it, then hand its lease to another
 * (epoch + 1). By default it waits until the target holds it; `--no-wait` returns once asked. What
 * to do is decided by src/dispatch/move-rules.ts over what the store reports; this file reads, asks
 * and prints.
 */
import { LoopError } from '../core/errors.js';
import type { HostStore } from '../core/ports/hosts.js';
import { workItemKey } from '../core/work-item.js';
import { type MoveState, moveProgress, planMove } from '../dispatch/move-rules.js';
import type { Base } from '../main-base.js';
import { toJson } from './format.js';
import { EXIT, type Io } from './io.js';

export interface MoveOptions {
  to: string;
  json?: boolean;
  /** false: `--no-wait`. */
  wait?: boolean;
  /** Seconds to wait for the move to land (default 600). */
  timeout?: number;
}

/** How the wait polls and tells time (tests and callers may shorten it). */
export interface MoveClock {
  pollMs: number;
  now(): number;
  sleep(ms: number): Promise<void>;
}

const realClock: MoveClock = {
  pollMs: 500,
  now: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

interface Outcome {
  workItem: string;
  from: string;
  to: string;
  epoch: number;
  state: MoveState;
}

function sharedHosts(base: Base): HostStore {
  const { hosts } = base.stores;
  if (!hosts)
    throw new LoopError(
      'usage',
      'sessions move hands a work item to another host sharing a PostgreSQL store, and this config uses SQLite',
      {
        hint: 'With SQLite one host runs everything: there is nowhere to move it. Share a store with store: { kind: postgres, url: env:THE_LOOP_DATABASE_URL }.',
      },
    );
  return hosts;
}

/** The number of the running turn of the work item's active session, if any. */
async function runningTurn(base: Base, workItem: string): Promise<number | undefined> {
  const session = await base.sessions.findActive(workItem);
  if (!session) return undefined;
  return (await base.sessions.turns(session.id)).find((t) => t.status === 'running')?.seq;
}

export async function moveCommand(
  base: Base,
  io: Io,
  ref: string,
  options: MoveOptions,
  clock: MoveClock = realClock,
): Promise<number> {
  const hosts = sharedHosts(base);
  const workItem = workItemKey(ref);
  const to = options.to.trim();
  const store = base.loaded.config.store;
  const silentAfter = store.kind === 'postgres' ? store.leaseSeconds : 0;
  const session = await base.sessions.findActive(workItem);
  const plan = planMove({
    workItem,
    to,
    hosts: await hosts.list(),
    lease: await hosts.lease(workItem),
    session: session ? { runner: session.runner, engine: session.engine } : undefined,
    silentAfter,
  });
  if (plan.kind === 'refused') throw new LoopError(plan.code, plan.message, { hint: plan.hint });
  if (plan.kind === 'cancel') return cancel(hosts, io, workItem, plan, options);
  if (!(await hosts.move(workItem, to)))
    throw new LoopError('usage', `${to} refused the move of ${workItem}: the hosts changed meanwhile`, {
      hint: 'Run it again (see `the-loop hosts list`).',
    });
  const asked: Outcome = { workItem, from: plan.from, to, epoch: plan.epoch, state: plan.state };
  const outcome =
    plan.state === 'draining' && options.wait !== false
      ? await waitForMove(base, hosts, io, asked, (options.timeout ?? 600) * 1000, clock)
      : asked;
  print(io, outcome, options);
  return EXIT.ok;
}

async function cancel(
  hosts: HostStore,
  io: Io,
  workItem: string,
  plan: { from: string; was: string; epoch: number },
  options: MoveOptions,
): Promise<number> {
  if (!(await hosts.cancelMove(workItem, plan.from))) {
    const now = await hosts.lease(workItem);
    throw new LoopError(
      'usage',
      `the move of ${workItem} to ${plan.was} could not be called off: it is ${now?.ended ? 'let go' : `held by ${now?.hostId ?? 'nobody'}`} now`,
      { hint: 'It landed meanwhile; move it back with another `the-loop sessions move`.' },
    );
  }
  const stays: Outcome = { workItem, from: plan.from, to: plan.from, epoch: plan.epoch, state: 'cancelled' };
  print(io, stays, options, plan.was);
  return EXIT.ok;
}

/** Poll the lease until the target holds it (or it is kept for the target), saying what it waits on. */
async function waitForMove(
  base: Base,
  hosts: HostStore,
  io: Io,
  asked: Outcome,
  timeoutMs: number,
  clock: MoveClock,
): Promise<Outcome> {
  const { workItem, from, to } = asked;
  const deadline = clock.now() + timeoutMs;
  let said = '';
  for (;;) {
    const progress = moveProgress({
      workItem,
      from,
      to,
      epoch: asked.epoch,
      lease: await hosts.lease(workItem),
      target: (await hosts.list()).find((h) => h.id === to),
      runningTurn: await runningTurn(base, workItem),
    });
    if (progress.kind === 'done') return { ...asked, state: progress.state, epoch: progress.epoch };
    if (progress.kind === 'failed') throw new LoopError('usage', progress.message, { hint: progress.hint });
    if (progress.line !== said) io.err(`${progress.line}\n`);
    said = progress.line;
    if (clock.now() >= deadline)
      throw new LoopError(
        'session-busy',
        `${workItem} is still draining on ${from} after ${Math.round(timeoutMs / 1000)} s`,
        {
          hint: `The move stays requested: ${from} lets go once its turn ends, then ${to} holds it. Follow it with \`the-loop hosts list\` and \`the-loop sessions show ${workItem}\`; \`the-loop sessions move ${workItem} --to ${from}\` calls it off.`,
        },
      );
    await clock.sleep(clock.pollMs);
  }
}

function print(io: Io, o: Outcome, options: MoveOptions, was?: string): void {
  if (options.json) {
    const { workItem, from, to, epoch, state } = o;
    io.out(`${toJson({ workItem, from, to, epoch, state, ...(was ? { calledOff: was } : {}) })}\n`);
    return;
  }
  const lines: Record<MoveState, string> = {
    moved: `${o.workItem} moved from ${o.from} to ${o.to} (epoch ${o.epoch}).`,
    draining: `${o.workItem} is moving from ${o.from} to ${o.to}: ${o.from} finishes its running turn and claims nothing new, then ${o.to} holds it (epoch ${o.epoch}). Follow it with \`the-loop hosts list\`.`,
    reserved: `${o.workItem} is kept for ${o.to} (the lease of ${o.from} has ended): ${o.to} takes it at its next delivery (epoch ${o.epoch}).`,
    cancelled: `The move of ${o.workItem} to ${was ?? '?'} is called off: it stays on ${o.from} (epoch ${o.epoch}).`,
  };
  io.out(`${lines[o.state]}\n`);
}
