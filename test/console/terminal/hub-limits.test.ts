import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FLOW_HIGH } from '../../../src/console/terminal/flow-rules.js';
import { eventually, type Harness, startHarness, type TestClient } from './harness.js';

// Bad input the terminal socket contains: a viewer that never reads, a crowd, bad frames.
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ limits: { perSession: 16, total: 40 } });
});
afterAll(async () => {
  await h.close();
  expect(h.hub.counts()).toEqual({ viewers: 0, sessions: 0 });
});

const hello = (c: TestClient) => c.until(() => c.message('hello') !== undefined, 20_000, 'hello');

async function clientsOfServer(): Promise<number> {
  const r = await h.tmux.run(['list-clients', '-F', '#{client_pid}']);
  return r.stdout.split('\n').filter(Boolean).length;
}

describe('terminal hub: flow control', () => {
  /** A pane that prints 20 MB (15 MB of random bytes in base64) after a key, then signals `channel`. */
  const burst = (channel: string) => [
    'sh',
    '-c',
    // The pane's shell reaches our private server through $TMUX (tmux sets it in every pane).
    `echo READY; read x; head -c 15000000 /dev/urandom | base64 -w 200; echo BURST-DONE; tmux wait-for -S ${channel}; exec sleep 600`,
  ];

  it('a stalled viewer: a 20 MB burst in the pane finishes; what reached the socket stays bounded; acks bring the screen back', async () => {
    const channel = `burst-${Date.now()}`;
    const { sessionId, target } = await h.newSession(burst(channel));
    const stalled = h.connect(sessionId, 'alice', { autoAck: false });
    await stalled.until(() => stalled.text.includes('READY'), 20_000, 'the pane');
    await h.tmux.must(['send-keys', '-t', `=${target}:`, 'Enter'], 'send-keys');
    // The burst finishes while the viewer reads nothing (tmux never waits for a client).
    const done = await h.tmux.run(['wait-for', channel], { timeoutMs: 120_000 });
    expect(done.ok).toBe(true);
    // Bounded by the watermark plus the last coalesced frame (tmux itself sends a blocked client little).
    expect(stalled.received).toBeLessThan(FLOW_HIGH + 1024 * 1024);
    const before = stalled.received;
    stalled.autoAck = true;
    stalled.ack();
    await stalled.until(() => stalled.text.includes('BURST-DONE'), 30_000, 'the redraw after the acks');
    expect(stalled.received).toBeGreaterThan(before);
    stalled.close();
    await stalled.closed;
  });

  it('above the high watermark the pty is paused; below the low one it reads again', async () => {
    // Small watermarks, so that what tmux sends a stalled client passes the high one for sure.
    const small = await startHarness({ limits: { high: 16 * 1024, low: 4 * 1024 } });
    try {
      const channel = `burst-small-${Date.now()}`;
      const { sessionId, target } = await small.newSession(burst(channel));
      const stalled = small.connect(sessionId, 'alice', { autoAck: false });
      await stalled.until(() => stalled.text.includes('READY'), 20_000, 'the pane');
      await small.tmux.must(['send-keys', '-t', `=${target}:`, 'Enter'], 'send-keys');
      expect((await small.tmux.run(['wait-for', channel], { timeoutMs: 120_000 })).ok).toBe(true);
      const [paused] = small.hub.stats();
      expect(paused).toMatchObject({ sessionId, paused: true, acked: 0 });
      expect(paused?.sent).toBeGreaterThan(16 * 1024);
      // The client got all that was sent, and nothing more comes while it acknowledges nothing.
      await stalled.until(() => stalled.received === small.hub.stats()[0]?.sent, 20_000, 'what was sent');
      stalled.autoAck = true;
      stalled.ack();
      await stalled.until(() => stalled.text.includes('BURST-DONE'), 30_000, 'the redraw after the acks');
      await eventually(() => (small.hub.stats()[0]?.paused === false ? true : undefined));
      stalled.close();
      await stalled.closed;
    } finally {
      await small.close();
    }
  });

  it('an acknowledgement beyond what was sent is a bad frame, not a way to unpause', async () => {
    const { sessionId } = await h.newSession(['sleep', '600']);
    const c = h.connect(sessionId, 'alice', { autoAck: false });
    await hello(c);
    for (let i = 0; i <= 200; i++) c.sendJson({ t: 'ack', bytes: 1e12 });
    expect((await c.closed).code).toBe(1008);
  });
});

describe('terminal hub: a crowd', () => {
  it('1,000 viewers of one session: at most the cap get a terminal, the rest are refused with 4429, all cleaned up', async () => {
    const { sessionId } = await h.newSession(['sh', '-c', 'echo CROWD; exec sleep 600']);
    const crowd = Array.from({ length: 1000 }, () => h.connect(sessionId, 'alice'));
    const outcome = await Promise.all(
      crowd.map((c) =>
        Promise.race([
          hello(c).then(() => 'hello' as const),
          c.closed.then(({ code }) => (code === 4429 ? ('refused' as const) : (`closed ${code}` as const))),
        ]),
      ),
    );
    expect(outcome.filter((o) => o === 'hello')).toHaveLength(16);
    expect(outcome.filter((o) => o === 'refused')).toHaveLength(984);
    expect(h.hub.counts()).toEqual({ viewers: 16, sessions: 1 });
    // A viewer whose acks a crowd of 1,000 sockets held up past the park grace is re-attached on them.
    await eventually(async () => ((await clientsOfServer()) === 16 ? true : undefined));

    // Still healthy: another session's viewer is served at once.
    const other = await h.newSession(['sh', '-c', 'echo OTHER; exec sleep 600']);
    const c = h.connect(other.sessionId, 'bob');
    await c.until(() => c.text.includes('OTHER'), 20_000, 'the other session');

    for (const client of [...crowd, c]) client.close();
    await Promise.all([...crowd, c].map((client) => client.closed));
    await eventually(() => (h.hub.counts().viewers === 0 ? true : undefined));
    await eventually(async () => ((await clientsOfServer()) === 0 ? true : undefined));
    expect(h.hub.counts()).toEqual({ viewers: 0, sessions: 0 });
  });

  it('the total cap holds across sessions', async () => {
    const a = await h.newSession(['sleep', '600']);
    const b = await h.newSession(['sleep', '600']);
    const first = Array.from({ length: 16 }, () => h.connect(a.sessionId, 'alice'));
    await Promise.all(first.map(hello));
    const second = Array.from({ length: 30 }, () => h.connect(b.sessionId, 'alice'));
    const codes = await Promise.all(
      second.map((c) => Promise.race([hello(c).then(() => 0), c.closed.then(({ code }) => code)])),
    );
    // 40 in all: 16 on a, at most 16 of b's 30 (its own cap), and no more than 40 together.
    expect(codes.filter((code) => code === 0)).toHaveLength(16);
    expect(codes.filter((code) => code === 4429)).toHaveLength(14);
    for (const c of [...first, ...second]) c.close();
    await Promise.all([...first, ...second].map((c) => c.closed));
    await eventually(() => (h.hub.counts().viewers === 0 ? true : undefined));
  });
});

describe('terminal hub: bad frames', () => {
  let sessionId: string;
  beforeAll(async () => {
    ({ sessionId } = await h.newSession(['sleep', '600']));
  });

  it('an oversized frame closes the socket (ws maxPayload 64 KiB: 1009)', async () => {
    const c = h.connect(sessionId, 'alice');
    await hello(c);
    c.ws.send(JSON.stringify({ t: 'input', data: 'x'.repeat(70 * 1024) }));
    expect((await c.closed).code).toBe(1009);
  });

  it('a binary frame is ignored; a flood of binary garbage closes the socket with 1008', async () => {
    const c = h.connect(sessionId, 'alice');
    await hello(c);
    c.ws.send(Buffer.from([0xff, 0x00, 0x1b, 0x5b]));
    await c.roundTrip();
    expect(c.closeCode).toBeUndefined();
    for (let i = 0; i < 200; i++) c.ws.send(Buffer.from([i & 0xff, 0xfe]));
    expect((await c.closed).code).toBe(1008);
  });

  it.each([
    ['non-JSON', 'not json {'],
    ['unknown types', JSON.stringify({ t: 'exec', cmd: 'id' })],
    ['JSON that is no object', '42'],
    ['malformed messages', JSON.stringify({ t: 'resize', cols: 'wide' })],
  ])('a flood of %s closes the socket with 1008', async (_name, frame) => {
    const c = h.connect(sessionId, 'alice');
    await hello(c);
    for (let i = 0; i <= 200; i++) c.ws.send(frame);
    expect((await c.closed).code).toBe(1008);
  });

  it("a viewer's many keys are ignored, not counted as bad (the socket stays)", async () => {
    const c = h.connect(sessionId, 'alice');
    await hello(c);
    for (let i = 0; i < 500; i++) c.type('x');
    await c.roundTrip();
    expect(c.closeCode).toBeUndefined();
    c.close();
    await c.closed;
  });

  it('text that is not UTF-8 is refused by ws (1007)', async () => {
    const c = h.connect(sessionId, 'alice');
    await hello(c);
    c.ws.send(Buffer.from([0x22, 0xc3, 0x28, 0x22]), { binary: false });
    expect((await c.closed).code).toBe(1007);
  });
});
