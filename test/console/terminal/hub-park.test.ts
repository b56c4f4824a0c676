import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, type Harness, startHarness, type TestClient } from './harness.js';

// Parking: a browser that stops reading has its tmux client ended (tmux then spends nothing on it)
// and gets a new one, which redraws the screen, once it reads again. Real tmux, real ws.
let h: Harness;
const dir = mkdtempSync(join(tmpdir(), 'the-loop-console-park-'));
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
  expect(h.hub.counts()).toEqual({ viewers: 0, sessions: 0 });
  rmSync(dir, { recursive: true, force: true });
});

/** The pids of the tmux clients attached to our private server (a viewer's pty runs one). */
async function clientPids(of: Harness = h): Promise<number[]> {
  const r = await of.tmux.run(['list-clients', '-F', '#{client_pid}']);
  return r.stdout.split('\n').filter(Boolean).map(Number);
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const statsOf = (of: Harness, principal: string) => of.hub.stats().find((s) => s.principal === principal);

/** Wait for the one client that appeared since `before`. */
async function newClient(before: number[], of: Harness = h): Promise<number> {
  return eventually(async () => (await clientPids(of)).find((pid) => !before.includes(pid)));
}

/**
 * A pane that floods its screen after a key (base64 of random bytes) until the file `stop` exists,
 * then prints NOW-<its content>.
 */
const flood = (stop: string) => [
  'sh',
  '-c',
  'echo READY; read x; while [ ! -e "$0" ]; do head -c 200000 /dev/urandom | base64 -w 200; done; ' +
    'echo "NOW-$(cat "$0")"; exec sleep 600',
  stop,
];

describe('terminal hub: parking a stalled viewer', () => {
  it('a viewer that stops acknowledging under a flood loses its tmux client; acks bring a new one showing the screen as it is now; close leaves no process', async () => {
    const own = await startHarness();
    const pids: number[] = [];
    const stop = join(dir, 'stop');
    try {
      const { sessionId, target } = await own.newSession(flood(stop));
      const stalled = own.connect(sessionId, 'alice');
      await stalled.until(() => stalled.text.includes('READY'), 20_000, 'the pane');
      const first = await newClient([], own);
      pids.push(first);

      // It stops acknowledging; the flood starts.
      stalled.autoAck = false;
      await own.tmux.must(['send-keys', '-t', `=${target}:`, 'Enter'], 'send-keys');
      await eventually(() => statsOf(own, 'alice')?.parked || undefined);
      expect(statsOf(own, 'alice')).toMatchObject({ paused: true, parked: true });
      // tmux has no client for it any more while the flood runs, yet it still counts as a viewer.
      await eventually(async () => ((await clientPids(own)).length === 0 ? true : undefined));
      expect(alive(first)).toBe(false);
      expect(own.hub.counts()).toEqual({ viewers: 1, sessions: 1 });
      expect(stalled.closeCode).toBeUndefined();

      // The flood stops and the pane prints something new, which the parked viewer is not sent.
      writeFileSync(stop, '42');
      await eventually(
        async () =>
          (await own.tmux.run(['capture-pane', '-p', '-t', `=${target}:`])).stdout.includes('NOW-42') ||
          undefined,
      );
      await stalled.roundTrip();
      expect(stalled.text).not.toContain('NOW-42');

      // It reads again: a new client, whose attach redraws the screen as it is now.
      stalled.autoAck = true;
      stalled.ack();
      await stalled.until(() => stalled.text.includes('NOW-42'), 30_000, 'the redraw after the acks');
      const again = await newClient([], own);
      pids.push(again);
      expect(again).not.toBe(first);
      expect(statsOf(own, 'alice')).toMatchObject({ paused: false, parked: false });
      expect(stalled.closeCode).toBeUndefined();
    } finally {
      await own.close();
    }
    // close() ended the re-attached client too: no process of ours is left.
    for (const pid of pids) expect(alive(pid)).toBe(false);
    expect(own.hub.counts()).toEqual({ viewers: 0, sessions: 0 });
  });

  /** A viewer parked on a quiet pane (it never acknowledged the first screen). */
  async function parkedOn(
    argv: string[],
    principal = 'alice',
  ): Promise<{ c: TestClient; target: string; sessionId: string }> {
    const { sessionId, target } = await h.newSession(argv);
    const c = h.connect(sessionId, principal, { autoAck: false });
    await c.until(() => c.text.includes('READY'), 20_000, 'the pane');
    await eventually(() => statsOf(h, principal)?.parked || undefined);
    return { c, target, sessionId };
  }

  it('a session gone while its viewer is parked: the re-attach fails, the socket is closed 4410 with a reason', async () => {
    const { c, target } = await parkedOn(['sh', '-c', 'echo READY; exec sleep 600']);
    await h.tmux.must(['kill-session', '-t', `=${target}`], 'kill-session');
    c.ack();
    expect((await c.closed).code).toBe(4410);
    expect(c.message('closed')).toBeDefined();
    await eventually(() => (h.hub.counts().viewers === 0 ? true : undefined));
  });

  it('a session gone while its viewer is parked and never reads again: the poll ends it (its slot is freed)', async () => {
    const { c, target } = await parkedOn(['sh', '-c', 'echo READY; exec sleep 600']);
    await h.tmux.must(['kill-session', '-t', `=${target}`], 'kill-session');
    expect(await c.closed).toEqual({ code: 4410, reason: 'the tmux session ended' });
    await eventually(() => (h.hub.counts().viewers === 0 ? true : undefined));
    expect(h.hub.counts()).toEqual({ viewers: 0, sessions: 0 });
  });

  it('closeSession ends a parked viewer (4410, a reason)', async () => {
    const { c, sessionId } = await parkedOn(['sh', '-c', 'echo READY; exec sleep 600']);
    h.hub.closeSession(sessionId, 'the session ended');
    expect(await c.closed).toEqual({ code: 4410, reason: 'the session ended' });
    expect(c.message('closed')).toEqual({ t: 'closed', reason: 'the session ended' });
  });

  it('a parked writer still types (its keys go through the control client), and sees them once it reads', async () => {
    const argv = ['sh', '-c', 'echo READY; read y; echo "GOT-$y"; exec sleep 600'];
    const { sessionId } = await h.newSession(argv);
    h.setTakeover(sessionId, 'carol');
    const w = h.connect(sessionId, 'carol', { autoAck: false });
    await w.until(() => w.text.includes('READY'), 20_000, 'the pane');
    await eventually(() => statsOf(h, 'carol')?.parked || undefined);
    expect(statsOf(h, 'carol')?.role).toBe('writer');
    w.type('typed\r');
    const target = `loop-test-${sessionId}`;
    await eventually(
      async () =>
        (await h.tmux.run(['capture-pane', '-p', '-t', `=${target}:`])).stdout.includes('GOT-typed') ||
        undefined,
    );
    w.autoAck = true;
    w.ack();
    await w.until(() => w.text.includes('GOT-typed'), 30_000, 'the redraw after the acks');
    w.close();
    await w.closed;
  });
});
