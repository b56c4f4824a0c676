import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TakeoverView, TerminalServerMessage } from '../../../src/console/protocol.js';
import {
  eventually,
  type Harness,
  marker,
  recorded,
  recorder,
  startHarness,
  type TestClient,
} from './harness.js';

// The hub keeps each held session's take over and window size fresh: a stale attach never re-arms a
// writer, a take over or hand back made elsewhere (the CLI) reaches open terminals, and a resize made
// elsewhere reaches every viewer. Real tmux on a private server, real node-pty clients, real sockets.
let h: Harness;
const dir = mkdtempSync(join(tmpdir(), 'the-loop-console-fresh-'));
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
  expect((await h.tmux.run(['list-clients'])).stdout.trim()).toBe('');
  rmSync(dir, { recursive: true, force: true });
});

type RoleMessage = Extract<TerminalServerMessage, { t: 'role' }>;
const roles = (c: TestClient): RoleMessage[] => c.messages.filter((m): m is RoleMessage => m.t === 'role');
const lastRole = (c: TestClient) => roles(c).at(-1);

/** What the pane shows (the recorder prints each read it got). */
async function screen(harness: Harness, target: string): Promise<string> {
  return harness.tmux.must(['capture-pane', '-p', '-t', `=${target}:`], 'capture-pane');
}

/**
 * A hub whose store reads are held back on demand (a slow store): each read answers what the store
 * said when it began, once released.
 */
async function startSlow() {
  const slow = { hold: false, reads: 0, held: [] as Array<() => void> };
  const harness = await startHarness({
    takeoverOf: (_id, read) => {
      slow.reads++;
      const value = read();
      if (!slow.hold) return Promise.resolve(value);
      return new Promise<TakeoverView | null>((resolve) => slow.held.push(() => resolve(value)));
    },
  });
  const release = () => {
    for (const answer of slow.held.splice(0)) answer();
  };
  return { harness, slow, release };
}

/** A recorder session with alice connected and shown its screen. */
async function recorderSession(harness: Harness, name: string) {
  const file = join(dir, `${name}.hex`);
  const { sessionId, target } = await harness.newSession(recorder(file));
  const alice = harness.connect(sessionId, 'alice');
  await alice.until(() => alice.text.includes('RECORDER-READY'), 20_000, 'the recorder');
  return { file, sessionId, target, alice };
}

describe('terminal hub: a stale attach', () => {
  it('carrying a take over read before the hand back does not make the old writer a writer again', async () => {
    const { file, sessionId, target, alice } = await recorderSession(h, 'stale');
    h.setTakeover(sessionId, 'alice');
    await alice.until(() => lastRole(alice)?.role === 'writer');
    alice.type('one');
    await eventually(() => recorded(file) === 'one' || undefined);
    h.setTakeover(sessionId, null);
    await alice.until(() => lastRole(alice)?.role === 'viewer');
    const seen = roles(alice).length;

    // bob's server read the store while alice still held it; its attach comes after her hand back.
    const bob = h.connect(sessionId, 'bob', { carrying: 'alice' });
    await bob.until(() => bob.message('hello') !== undefined);
    expect(bob.message('hello')).toMatchObject({ role: 'viewer', takeover: null });
    alice.type('two');
    await alice.roundTrip();
    await marker(h.tmux, target, file, 'MARK');
    expect(recorded(file)).toBe('oneMARK');
    expect(await screen(h, target)).not.toContain('two');
    expect(roles(alice).slice(seen)).toEqual([]);
    alice.close();
    bob.close();
    await Promise.all([alice.closed, bob.closed]);
  });
});

describe('terminal hub: take over and hand back from elsewhere (the CLI writes the store alone)', () => {
  it('a hand back in the store makes the writer a viewer, a take over makes the viewer a writer', async () => {
    const { file, sessionId, target, alice } = await recorderSession(h, 'cli');
    h.setTakeover(sessionId, 'alice');
    await alice.until(() => lastRole(alice)?.role === 'writer');
    alice.type('one');
    await eventually(() => recorded(file) === 'one' || undefined);

    h.storeTakeover(sessionId, null);
    await alice.until(() => lastRole(alice)?.role === 'viewer' && lastRole(alice)?.takeover === null);
    alice.type('two');
    await alice.roundTrip();
    await marker(h.tmux, target, file, 'MARK');
    expect(recorded(file)).toBe('oneMARK');
    expect(await screen(h, target)).not.toContain('two');

    h.storeTakeover(sessionId, 'alice');
    await alice.until(() => lastRole(alice)?.role === 'writer');
    alice.type('three');
    await eventually(() => recorded(file) === 'oneMARKthree' || undefined);
    await eventually(async () => (await screen(h, target)).includes('three') || undefined);
    alice.close();
    await alice.closed;
  });
});

describe('terminal hub: a slow store read', () => {
  it('begun before a take over through the API never undoes it; a poll in flight at close is harmless', async () => {
    const { harness, slow, release } = await startSlow();
    try {
      const { file, sessionId, alice } = await recorderSession(harness, 'slow');
      slow.hold = true;
      await eventually(() => slow.held.length > 0 || undefined);
      // The held read said "nobody"; the API takes over now, and tells the hub.
      harness.setTakeover(sessionId, 'alice');
      await alice.until(() => lastRole(alice)?.role === 'writer');
      const seen = roles(alice).length;
      slow.hold = false;
      const before = slow.reads;
      release();
      // Polls run one at a time: a new read means the released one has been applied (or dropped).
      await eventually(() => slow.reads > before || undefined);
      expect(roles(alice).slice(seen)).toEqual([]);
      alice.type('kept');
      await eventually(() => recorded(file) === 'kept' || undefined);

      slow.hold = true;
      await eventually(() => slow.held.length > 0 || undefined);
    } finally {
      await harness.close();
      release();
    }
    expect(harness.hub.counts()).toEqual({ viewers: 0, sessions: 0 });
  });

  it('a session new to the hub starts from the take over it was given; its poll corrects a stale one', async () => {
    const { harness, slow, release } = await startSlow();
    try {
      const file = join(dir, 'stale-new.hex');
      const { sessionId, target } = await harness.newSession(recorder(file));
      slow.hold = true;
      // The store says nobody; this attach's read said alice.
      const alice = harness.connect(sessionId, 'alice', { carrying: 'alice' });
      await alice.until(() => alice.message('hello') !== undefined);
      expect(alice.message('hello')).toMatchObject({ role: 'writer' });
      await eventually(() => slow.held.length > 0 || undefined);
      slow.hold = false;
      release();
      await alice.until(() => lastRole(alice)?.role === 'viewer' && lastRole(alice)?.takeover === null);
      await alice.until(() => alice.text.includes('RECORDER-READY'), 20_000, 'the recorder');
      alice.type('late');
      await alice.roundTrip();
      await marker(harness.tmux, target, file, 'MARK');
      expect(recorded(file)).toBe('MARK');
      alice.close();
      await alice.closed;
    } finally {
      await harness.close();
      release();
    }
  });
});

describe('terminal hub: a window resized by someone else', () => {
  it("viewers follow a resize by hand and a turn's reset after the writer's own", async () => {
    const { sessionId, target } = await h.newSession(['sleep', '600']);
    const alice = h.connect(sessionId, 'alice');
    const bob = h.connect(sessionId, 'bob');
    await alice.until(() => alice.message('hello') !== undefined);
    await bob.until(() => bob.message('hello') !== undefined);
    const sized = (c: TestClient, cols: number, rows: number) =>
      c.until(() => c.messages.some((m) => m.t === 'size' && m.cols === cols && m.rows === rows));
    const clientSizes = async () =>
      (
        await h.tmux.must(
          [
            'list-clients',
            '-t',
            `=${target}`,
            '-F',
            '#{client_control_mode} #{client_width}x#{client_height}',
          ],
          'list-clients',
        )
      )
        .trim()
        .split('\n')
        // The control client (alice's keys' path) is no viewer.
        .flatMap((line) => (line.startsWith('0 ') ? [line.slice(2)] : []));

    // By hand: `tmux resize-window`.
    await h.tmux.must(['resize-window', '-t', `=${target}:`, '-x', '100', '-y', '30'], 'resize-window');
    await Promise.all([sized(alice, 100, 31), sized(bob, 100, 31)]);
    await eventually(async () => {
      const sizes = await clientSizes();
      return (sizes.length === 2 && sizes.every((s) => s === '100x31')) || undefined;
    });

    // The writer fits the window to her browser; the next turn puts it back (keepWindowSize).
    h.setTakeover(sessionId, 'alice');
    await alice.until(() => lastRole(alice)?.role === 'writer');
    alice.resize(120, 41);
    await Promise.all([sized(alice, 120, 41), sized(bob, 120, 41)]);
    await h.tmux.must(['resize-window', '-t', `=${target}:`, '-x', '80', '-y', '20'], 'resize-window');
    await Promise.all([sized(alice, 80, 21), sized(bob, 80, 21)]);
    await eventually(async () => {
      const sizes = await clientSizes();
      return (sizes.length === 2 && sizes.every((s) => s === '80x21')) || undefined;
    });
    alice.close();
    bob.close();
    await Promise.all([alice.closed, bob.closed]);
  });
});
