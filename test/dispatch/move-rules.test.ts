/**
 * `sessions move`'s rules (pure): what it asks of the store for each state of the work item's lease,
 * why it refuses (unknown, down, silent or unfit target; no lease; already there; a tmux session),
 * and how a requested move is followed until it lands (or something else undoes it).
 */
import { describe, expect, it } from 'vitest';
import type { HostRecord, Lease } from '../../src/core/ports/hosts.js';
import { type MoveInput, moveProgress, planMove } from '../../src/dispatch/move-rules.js';

const WI = 'github:acme/widgets#15';

const host = (id: string, over: Partial<HostRecord> = {}): HostRecord => ({
  id,
  labels: [],
  engines: ['claude', 'fake'],
  capacity: 2,
  address: null,
  incarnation: 1,
  status: 'up',
  startedAt: '2026-12-07T00:00:00.000Z',
  heartbeatAt: '2026-12-07T00:00:00.000Z',
  silentSeconds: 1,
  leases: 0,
  moving: 0,
  ...over,
});

const lease = (over: Partial<Lease> = {}): Lease => ({
  workItem: WI,
  hostId: 'a',
  incarnation: 1,
  epoch: 3,
  expiresAt: '2026-12-07T00:01:00.000Z',
  draining: false,
  movingTo: null,
  ended: false,
  ...over,
});

const input = (over: Partial<MoveInput> = {}): MoveInput => ({
  workItem: WI,
  to: 'b',
  hosts: [host('a'), host('b'), host('c', { status: 'down', silentSeconds: 900 })],
  lease: lease(),
  session: { runner: 'process', engine: 'fake' },
  silentAfter: 30,
  ...over,
});

describe('planMove', () => {
  it('a held lease: drain it for the target, which holds the next epoch', () => {
    expect(planMove(input())).toEqual({ kind: 'move', from: 'a', epoch: 4, state: 'draining' });
    // Asked again (or re-targeted while draining): the same request.
    expect(planMove(input({ lease: lease({ draining: true, movingTo: 'b' }) }))).toMatchObject({
      kind: 'move',
      state: 'draining',
    });
    expect(planMove(input({ lease: lease({ draining: true, movingTo: 'c' }) }))).toMatchObject({
      kind: 'move',
      from: 'a',
    });
  });

  it('an ended lease (its holder let go or died): kept for the target, taken at the next delivery', () => {
    expect(planMove(input({ lease: lease({ ended: true }), session: undefined }))).toEqual({
      kind: 'move',
      from: 'a',
      epoch: 4,
      state: 'reserved',
    });
    // Last held by the target itself: kept for it all the same.
    expect(planMove(input({ lease: lease({ ended: true, hostId: 'b' }) }))).toMatchObject({
      kind: 'move',
      state: 'reserved',
    });
  });

  it('to the host that holds it: calls off the move under way, else it is there already', () => {
    expect(planMove(input({ to: 'a', lease: lease({ draining: true, movingTo: 'b' }) }))).toEqual({
      kind: 'cancel',
      from: 'a',
      was: 'b',
      epoch: 3,
    });
    const there = planMove(input({ to: 'a' }));
    expect(there).toMatchObject({ kind: 'refused', code: 'usage' });
    expect(there.kind === 'refused' && there.message).toMatch(/on a already \(epoch 3\)/);
  });

  it('refuses an unknown, down or silent target, naming the hosts or what to do', () => {
    const unknown = planMove(input({ to: 'zz' }));
    expect(unknown).toMatchObject({ kind: 'refused', code: 'usage' });
    expect(unknown.kind === 'refused' && `${unknown.message} ${unknown.hint}`).toMatch(
      /no host named "zz".*Hosts: a \(up\), b \(up\), c \(down\)/,
    );
    const down = planMove(input({ to: 'c' }));
    expect(down.kind === 'refused' && down.message).toMatch(/c is down/);
    const silent = planMove(input({ hosts: [host('a'), host('b', { silentSeconds: 31 })] }));
    expect(silent.kind === 'refused' && silent.message).toMatch(/b has not sent a heartbeat for 31 s/);
    const none = planMove(input({ hosts: [] }));
    expect(none.kind === 'refused' && none.hint).toMatch(/none has registered yet/);
  });

  it('refuses a target without the session engine, and a tmux session (its terminal stays put)', () => {
    const engine = planMove(input({ session: { runner: 'process', engine: 'codex' } }));
    expect(engine.kind === 'refused' && engine.message).toMatch(/engine codex is not installed there/);
    const tmux = planMove(input({ session: { runner: 'tmux', engine: 'fake' } }));
    expect(tmux).toMatchObject({ kind: 'refused', code: 'usage' });
    expect(tmux.kind === 'refused' && `${tmux.message} ${tmux.hint}`).toMatch(
      /tmux-runner session.*lives on a.*sessions close github:acme\/widgets#15/,
    );
    // With no active session, nothing to fit: kept for the target.
    expect(planMove(input({ session: undefined, lease: lease({ ended: true }) }))).toMatchObject({
      kind: 'move',
    });
  });

  it('no lease (no host ever held it): nothing to move, and says where its next delivery goes', () => {
    const plan = planMove(input({ lease: undefined }));
    expect(plan).toMatchObject({ kind: 'refused', code: 'session-missing' });
    expect(plan.kind === 'refused' && plan.hint).toMatch(/placement picks/);
  });
});

describe('moveProgress', () => {
  const at = (over: Partial<Parameters<typeof moveProgress>[0]> = {}) =>
    moveProgress({
      workItem: WI,
      from: 'a',
      to: 'b',
      epoch: 4,
      lease: lease({ draining: true, movingTo: 'b' }),
      target: host('b'),
      runningTurn: undefined,
      ...over,
    });

  it('draining: names the holder and the running turn', () => {
    expect(at({ runningTurn: 3 })).toEqual({ kind: 'waiting', line: 'draining on a: turn 3 running…' });
    expect(at()).toEqual({ kind: 'waiting', line: 'draining on a: waiting for it to let go…' });
  });

  it('landed: held by the target (its epoch), or ended and kept for it (the next epoch)', () => {
    expect(at({ lease: lease({ hostId: 'b', epoch: 4 }) })).toEqual({
      kind: 'done',
      state: 'moved',
      epoch: 4,
    });
    // Landed, then let go by the target before a poll saw it held: landed all the same.
    expect(at({ lease: lease({ hostId: 'b', epoch: 4, ended: true }) })).toEqual({
      kind: 'done',
      state: 'moved',
      epoch: 4,
    });
    // Ended while last held by the target at an older epoch: not this move.
    expect(at({ lease: lease({ hostId: 'b', epoch: 3, ended: true }) })).toMatchObject({ kind: 'failed' });
    expect(at({ lease: lease({ ended: true, movingTo: 'b' }) })).toEqual({
      kind: 'done',
      state: 'reserved',
      epoch: 4,
    });
  });

  it('fails when the target goes down, or the move is re-targeted, called off or taken', () => {
    expect(at({ target: host('b', { status: 'down' }) })).toMatchObject({
      kind: 'failed',
      message: expect.stringMatching(/b is down/),
    });
    expect(at({ target: undefined })).toMatchObject({ message: expect.stringMatching(/b is gone/) });
    expect(at({ lease: lease({ draining: true, movingTo: 'c' }) })).toMatchObject({
      message: expect.stringMatching(/re-targeted to c/),
    });
    expect(at({ lease: lease() })).toMatchObject({
      message: expect.stringMatching(/called off or taken.*held by a/),
    });
    expect(at({ lease: lease({ hostId: 'c', epoch: 4 }) })).toMatchObject({
      message: expect.stringMatching(/held by c, epoch 4/),
    });
    expect(at({ lease: undefined })).toMatchObject({ kind: 'failed' });
  });
});
