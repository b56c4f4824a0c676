/**
 * `sessions move <work item> --to <host>` (issue 17, docs/scale-out.md): pure rules over what the
 * store reports (the hosts, the work item's lease, its active session). "Drain, then bump the
 * epoch": the holder finishes its running turn and claims nothing new, then lets go, and the target
 * holds the lease with the next epoch.
 *
 * - Held by another host: its lease is marked draining for the target (`draining`).
 * - Ended (its holder let go, or died and was reaped): it is kept for the target, which takes it
 *   at the work item's next delivery (`reserved`).
 * - A move under way is re-targeted by another move, and cancelled by moving the work item to the
 *   host that holds it (`cancel`).
 */
import type { LoopErrorCode } from '../core/errors.js';
import type { HostRecord, Lease } from '../core/ports/hosts.js';

/** What a move has come to: on the target, still draining on its holder, kept for the target, undone. */
export type MoveState = 'moved' | 'draining' | 'reserved' | 'cancelled';

export interface MoveInput {
  workItem: string;
  to: string;
  hosts: readonly HostRecord[];
  lease: Lease | undefined;
  /** The work item's active session, if any: what it needs of a host. */
  session: { runner: string; engine: string } | undefined;
  /** A host silent for longer than this (seconds, the database's clock) is taken as gone. */
  silentAfter: number;
}

export interface MoveRefusal {
  kind: 'refused';
  code: LoopErrorCode;
  message: string;
  hint: string;
}

export type MovePlan =
  | MoveRefusal
  /** Ask the store to move it (`HostStore.move`); `epoch` is the one the target will hold. */
  | { kind: 'move'; from: string; epoch: number; state: 'draining' | 'reserved' }
  /** Ask the store to stop the move under way (`HostStore.cancelMove`): it stays on `from`. */
  | { kind: 'cancel'; from: string; was: string; epoch: number };

const refuse = (code: LoopErrorCode, message: string, hint: string): MoveRefusal => ({
  kind: 'refused',
  code,
  message,
  hint,
});

const SEE_HOSTS = 'See `the-loop hosts list`.';

/** Why `to` cannot take a work item now (unknown, down, silent, lacking the session's engine). */
function targetRefusal(input: MoveInput): MoveRefusal | undefined {
  const { to, hosts, session, silentAfter } = input;
  const target = hosts.find((h) => h.id === to);
  if (!target) {
    const known = hosts.map((h) => `${h.id} (${h.status})`).join(', ') || 'none has registered yet';
    return refuse('usage', `no host named ${JSON.stringify(to)} shares this store`, `Hosts: ${known}.`);
  }
  if (target.status !== 'up')
    return refuse(
      'usage',
      `${to} is ${target.status}: a work item moves only to a host that is up`,
      `Start \`the-loop serve\` on ${to}, or pick another host. ${SEE_HOSTS}`,
    );
  if (target.silentSeconds > silentAfter)
    return refuse(
      'usage',
      `${to} has not sent a heartbeat for ${Math.round(target.silentSeconds)} s: it looks gone`,
      `Check its daemon, or pick another host. ${SEE_HOSTS}`,
    );
  if (session && !target.engines.includes(session.engine))
    return refuse(
      'usage',
      `${to} cannot run this session: its engine ${session.engine} is not installed there`,
      `Install it on ${to} (its daemon finds it on PATH when it starts), or pick another host. ${SEE_HOSTS}`,
    );
  return undefined;
}

/** What `sessions move` does for this work item, or why it refuses. */
export function planMove(input: MoveInput): MovePlan {
  const { workItem, to, lease, session } = input;
  if (!lease)
    return refuse(
      'session-missing',
      `no host has held ${workItem} yet: there is nothing to move`,
      'Its next delivery goes to the host placement picks (the least loaded that fits); move it once it runs somewhere.',
    );
  // Moving it to the host that holds it: the move under way (if any) is called off.
  if (!lease.ended && lease.hostId === to) {
    if (lease.movingTo) return { kind: 'cancel', from: to, was: lease.movingTo, epoch: lease.epoch };
    return refuse('usage', `${workItem} is on ${to} already (epoch ${lease.epoch})`, SEE_HOSTS);
  }
  const target = targetRefusal(input);
  if (target) return target;
  if (session && session.runner === 'tmux')
    return refuse(
      'usage',
      `${workItem} has a tmux-runner session: its terminal lives on ${lease.hostId} and cannot move`,
      `Close it (\`the-loop sessions close ${workItem}\`) and its next delivery starts a new session; move it then.`,
    );
  return {
    kind: 'move',
    from: lease.hostId,
    epoch: lease.epoch + 1,
    state: lease.ended ? 'reserved' : 'draining',
  };
}

export interface ProgressInput {
  workItem: string;
  from: string;
  to: string;
  /** The epoch the target holds once it lands (the plan's). */
  epoch: number;
  lease: Lease | undefined;
  /** The target as `hosts list` reports it now (undefined: gone from the store). */
  target: HostRecord | undefined;
  /** The running turn of the work item's session, if any (its number). */
  runningTurn: number | undefined;
}

export type MoveProgress =
  | { kind: 'done'; state: 'moved' | 'reserved'; epoch: number }
  | { kind: 'waiting'; line: string }
  | { kind: 'failed'; message: string; hint: string };

/** Where a requested move stands: landed, still draining (what to say), or undone by something else. */
export function moveProgress(input: ProgressInput): MoveProgress {
  const { workItem, from, to, lease, target, runningTurn } = input;
  if (!lease) return { kind: 'failed', message: `the lease of ${workItem} is gone`, hint: SEE_HOSTS };
  // Held by the target at the new epoch (or let go by it already: it landed all the same).
  if (lease.hostId === to && lease.epoch >= input.epoch)
    return { kind: 'done', state: 'moved', epoch: lease.epoch };
  const targetUp = target?.status === 'up';
  if (lease.ended && lease.movingTo === to && targetUp)
    return { kind: 'done', state: 'reserved', epoch: lease.epoch + 1 };
  if (!targetUp)
    return {
      kind: 'failed',
      message: `${to} is ${target?.status ?? 'gone'}: the move of ${workItem} cannot land`,
      hint: `Once ${from} lets go, any host may take it at its next delivery. ${SEE_HOSTS}`,
    };
  if (lease.movingTo !== to) {
    const now = lease.ended ? 'let go' : `held by ${lease.hostId}`;
    const why = lease.movingTo ? `re-targeted to ${lease.movingTo}` : 'called off or taken';
    return {
      kind: 'failed',
      message: `the move of ${workItem} to ${to} was ${why} (it is ${now}, epoch ${lease.epoch})`,
      hint: SEE_HOSTS,
    };
  }
  const line =
    runningTurn !== undefined
      ? `draining on ${lease.hostId}: turn ${runningTurn} running…`
      : `draining on ${lease.hostId}: waiting for it to let go…`;
  return { kind: 'waiting', line };
}
