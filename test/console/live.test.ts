/**
 * The live socket (/ws/live) on a real listener: the list on connect and then only when it
 * changes; a watched session's detail and its new events, past a cursor shared by every page on it
 * (one read a tick, a page joining late sent the latest without a read); watch frames past 10 a
 * second, malformed and oversized ones ignored, and a flood of them closing the socket (1008).
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

  it("reads a watched session's events once per tick for all its pages; a late page gets the latest without a read", async () => {
    const events: EventView[] = [{ turnId: 1, seq: 1, at: 'a', event: { type: 'text', text: 'one' } }];
    const cursors: unknown[] = [];
    let rowReads = 0;
    const deps = recordingDeps(newCalls(), () => {
      rowReads++;
      return [ROW];
    });
    deps.turnEvents = async (_id, after) => {
      cursors.push(after);
      return events.filter((e) => !after || e.turnId > after.turnId || e.seq > after.seq);
    };
    rig = await startRig({ deps });
    const pages = [await openLive(rig), await openLive(rig), await openLive(rig)];
    for (const page of pages) page.ws.send(JSON.stringify({ t: 'watch', sessionId: SESSION }));
    const seqs = (page: { messages: string[] }) =>
      parsed(page.messages)
        .filter((m) => m.t === 'events')
        .flatMap((m) => (m.events as EventView[]).map((e) => e.seq));
    await until('every page its first events', () => pages.every((p) => seqs(p).length === 1));
    events.push({ turnId: 1, seq: 2, at: 'b', event: { type: 'text', text: 'two' } });
    await until('every page the next event', () => pages.every((p) => seqs(p).length === 2));
    const late = await openLive(rig);
    late.ws.send(JSON.stringify({ t: 'watch', sessionId: SESSION }));
    await until('the late page its events', () => seqs(late).length === 2);
    for (const page of [...pages, late]) expect(seqs(page)).toEqual([1, 2]);
    expect(parsed(late.messages).find((m) => m.t === 'session')).toMatchObject({
      detail: { session: { id: SESSION } },
    });
    // One read without a cursor (the session's first), and one per tick for all four pages: about
    // as many as the list's reads (both tick every 50 ms here), not four times as many.
    expect(cursors.filter((c) => c === undefined)).toHaveLength(1);
    expect(cursors.length).toBeLessThanOrEqual(rowReads + 3);
    expect(rig.server.stats()).toMatchObject({ live: 4 });
  });

  it('honours at most 10 frames a second: the rest are ignored and counted bad', async () => {
    rig = await startRig();
    const live = await openLive(rig);
    await until('the first list', () => live.messages.length === 1);
    for (let i = 0; i < 10; i++) live.ws.send(JSON.stringify({ t: 'watch', sessionId: null }));
    live.ws.send(JSON.stringify({ t: 'watch', sessionId: SESSION }));
    await new Promise((r) => setTimeout(r, 300));
    expect(parsed(live.messages).some((m) => m.t === 'session')).toBe(false);
    await new Promise((r) => setTimeout(r, 800));
    live.ws.send(JSON.stringify({ t: 'watch', sessionId: SESSION }));
    await until('the detail', () => parsed(live.messages).some((m) => m.t === 'session'));
    const closed = new Promise<number>((resolve) => live.ws.once('close', (code) => resolve(code)));
    // Well-formed, but far too many: a page never sends so many, a loop does.
    for (let i = 0; i < 250; i++) live.ws.send(JSON.stringify({ t: 'watch', sessionId: SESSION }));
    expect(await closed).toBe(1008);
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
