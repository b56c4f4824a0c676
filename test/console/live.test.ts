/**
 * The live socket (/ws/live) on a real listener: the list on connect and then only when it
 * changes; a watched session's detail and its new events, past a cursor; malformed and oversized
 * client frames ignored, and a flood of them closing the socket (1008).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { EventView, SessionRow } from '../../src/console/protocol.js';
import { WS_PROTOCOL } from '../../src/console/protocol.js';
import {
  type Calls,
  type Rig,
  ROW,
  recordingDeps,
  SESSION,
  startRig,
  TOKEN,
  until,
  wsAttempt,
} from './server-rig.js';

let rig: Rig;
afterEach(async () => {
  await rig?.close();
});

const newCalls = (): Calls => ({
  resume: [],
  takeOver: [],
  handBack: [],
  notified: 0,
  attached: [],
  setTakeover: [],
});

async function openLive(r: Rig) {
  const opened = await wsAttempt(r, '/ws/live', {
    protocols: [WS_PROTOCOL],
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  if (!('ws' in opened)) throw new Error(`refused ${opened.status}`);
  return opened;
}

const parsed = (messages: string[]) =>
  messages.map((m) => JSON.parse(m) as { t: string } & Record<string, unknown>);

describe('the live socket', () => {
  it('sends the list on connect, then only when it changed', async () => {
    let rows: SessionRow[] = [ROW];
    rig = await startRig({ deps: recordingDeps(newCalls(), () => rows) });
    const live = await openLive(rig);
    await until('the first list', () => live.messages.length === 1);
    await new Promise((r) => setTimeout(r, 200));
    expect(live.messages).toHaveLength(1);
    rows = [{ ...ROW, status: 'running' }];
    await until('the changed list', () => live.messages.length === 2);
    expect(parsed(live.messages)[1]).toMatchObject({ t: 'sessions', rows: [{ status: 'running' }] });
    live.ws.close();
    await until('no clients', () => rig.server.stats().live === 0);
  });

  it("sends a watched session's detail and its events after the cursor", async () => {
    const events: EventView[] = [{ turnId: 1, seq: 1, at: 'a', event: { type: 'text', text: 'one' } }];
    const cursors: unknown[] = [];
    const deps = recordingDeps(newCalls());
    deps.turnEvents = async (_id, after) => {
      cursors.push(after);
      return events.filter((e) => !after || e.turnId > after.turnId || e.seq > after.seq);
    };
    rig = await startRig({ deps });
    const live = await openLive(rig);
    live.ws.send(JSON.stringify({ t: 'watch', sessionId: SESSION }));
    await until('detail and events', () => parsed(live.messages).some((m) => m.t === 'events'));
    expect(parsed(live.messages).find((m) => m.t === 'session')).toMatchObject({
      detail: { session: { id: SESSION } },
    });
    events.push({ turnId: 1, seq: 2, at: 'b', event: { type: 'text', text: 'two' } });
    await until('the next event', () => parsed(live.messages).filter((m) => m.t === 'events').length === 2);
    const sent = parsed(live.messages).filter((m) => m.t === 'events');
    expect(sent.map((m) => (m.events as EventView[]).map((e) => e.seq))).toEqual([[1], [2]]);
    expect(cursors).toContainEqual({ turnId: 1, seq: 1 });
    live.ws.close();
  });

  it('ignores bad frames and closes on a flood of them', async () => {
    rig = await startRig();
    const live = await openLive(rig);
    await until('the first list', () => live.messages.length === 1);
    const closed = new Promise<number>((resolve) => live.ws.once('close', (code) => resolve(code)));
    live.ws.send('not json');
    live.ws.send(JSON.stringify({ t: 'watch', sessionId: '../../etc' }));
    live.ws.send(Buffer.from([0, 1, 2]));
    live.ws.send(JSON.stringify({ t: 'watch', sessionId: SESSION, pad: 'x'.repeat(5000) }));
    await new Promise((r) => setTimeout(r, 100));
    expect(parsed(live.messages).some((m) => m.t === 'session')).toBe(false);
    for (let i = 0; i < 210; i++) live.ws.send('{}');
    expect(await closed).toBe(1008);
  });
});
