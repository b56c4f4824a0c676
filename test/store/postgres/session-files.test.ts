/**
 * `session_files` (migration 23) and the hold a dead host's process-runner session gets (issue 17):
 * a save is fenced by the turn it follows (the turn's host, while it holds the lease at the turn's
 * epoch), never replaces a save made after a later turn, and reads back byte for byte; a reaped
 * host's interrupted process-runner session is held `interrupted` (not with `onHostLoss:
 * continue`; a tmux session is lost, not held; an earlier hold is kept).
 */
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Abandoned } from '../../../src/core/ports/hosts.js';
import { PgAbandon } from '../../../src/store/postgres/abandon.js';
import { PgSessionFiles } from '../../../src/store/postgres/session-files.js';
import { type Host, LEASE_SECONDS, newSession, sleep, turnEnd, turnInput, twoHosts } from './fence-setup.js';

const WI = 'github:octo/widgets#7';
const NAME = 'projects/-work-widgets/5b8f0c1e-9a57-4d0a-b1c2-0f1e2d3c4b5a.jsonl';
let a: Host;
let b: Host;
let close: () => Promise<void>;

beforeEach(async () => {
  ({ a, b, close } = await twoHosts());
});
afterEach(async () => close());

const file = (text: string, turnId: number) => {
  const body = Buffer.from(text, 'utf8');
  return {
    name: NAME,
    body,
    digest: createHash('sha256').update(body).digest('hex'),
    bytes: body.length,
    turnId,
  };
};

describe('session files', () => {
  it('saves after a turn, fenced by that turn, and never goes back to an earlier turn', async () => {
    await a.acquire(WI);
    const session = await a.sessions.create(newSession(WI));
    const t1 = await a.sessions.beginTurn(session.id, turnInput());
    await a.sessions.finishTurn(t1.id, turnEnd());
    const filesA = new PgSessionFiles(a.db, 'a');
    const filesB = new PgSessionFiles(b.db, 'b');
    // Bytes that are not UTF-8 survive as they are (a BYTEA).
    const odd = Buffer.concat([Buffer.from('{"a":1}\n'), Buffer.from([0xff, 0x00, 0xfe])]);
    expect(await filesA.save(session.id, { ...file('', t1.id), body: odd, bytes: odd.length })).toBe(true);
    expect((await filesB.load(session.id, NAME))?.body.equals(odd)).toBe(true);

    const t2 = await a.sessions.beginTurn(session.id, turnInput());
    await a.sessions.finishTurn(t2.id, turnEnd());
    expect(await filesA.save(session.id, file('turn two\n', t2.id))).toBe(true);
    // A late save of turn 1 does not replace turn 2's.
    expect(await filesA.save(session.id, file('turn one again\n', t1.id))).toBe(false);
    const [meta] = await filesB.list(session.id);
    expect(meta).toMatchObject({ name: NAME, turnId: t2.id, hostId: 'a', bytes: 9 });
    expect((await filesB.load(session.id, NAME))?.body.toString()).toBe('turn two\n');

    // Host b never writes for a's turn; neither does a once its lease has expired.
    expect(await filesB.save(session.id, file('forged\n', t2.id))).toBe(false);
    await sleep(LEASE_SECONDS * 1000 + 150);
    expect(await filesA.save(session.id, file('stale\n', t2.id))).toBe(false);
    expect((await filesB.load(session.id, NAME))?.body.toString()).toBe('turn two\n');
    expect(await filesB.load(session.id, 'projects/x/none.jsonl')).toBeUndefined();
  });
});

describe("a dead host's session", () => {
  async function aDiesMidTurn(runner: 'process' | 'tmux' = 'process') {
    await a.acquire(WI);
    const session = await a.sessions.create(newSession(WI, { runner }));
    const turn = await a.sessions.beginTurn(session.id, turnInput());
    await sleep(LEASE_SECONDS * 1000 + 150);
    const [abandoned] = await b.hosts.reapExpired(0);
    return { session, turn, abandoned: abandoned as Abandoned };
  }

  it('is held `interrupted` until a person resumes it', async () => {
    const { session, turn, abandoned } = await aDiesMidTurn();
    const settled = await new PgAbandon(b.db).interruptAbandoned(abandoned);
    expect(settled).toMatchObject({ turns: [turn.id], heldSessions: [session.id], lostSessions: [] });
    const held = await b.sessions.get(session.id);
    expect(held).toMatchObject({ status: 'active' });
    expect(held?.hold).toMatchObject({
      kind: 'interrupted',
      turnId: turn.id,
      hostId: 'a',
      reason: `host a died during turn ${turn.id}`,
    });
    // Settling again changes nothing.
    expect(await new PgAbandon(b.db).interruptAbandoned(abandoned)).toMatchObject({ heldSessions: [] });
  });

  it('is not held with onHostLoss: continue', async () => {
    const { session, abandoned } = await aDiesMidTurn();
    await new PgAbandon(b.db, { onHostLoss: 'continue' }).interruptAbandoned(abandoned);
    expect((await b.sessions.get(session.id))?.hold).toBeNull();
  });

  it('keeps a hold it already had', async () => {
    const { session, abandoned } = await aDiesMidTurn();
    const breach = {
      kind: 'breach' as const,
      reason: 'pushed to main',
      acts: [1],
      turnId: 1,
      since: '2026-01-01T00:00:00.000Z',
    };
    await b.sessions.setHold(session.id, breach);
    await new PgAbandon(b.db).interruptAbandoned(abandoned);
    expect((await b.sessions.get(session.id))?.hold).toEqual(breach);
  });

  it('a tmux session is lost, not held', async () => {
    const { session, abandoned } = await aDiesMidTurn('tmux');
    const settled = await new PgAbandon(b.db).interruptAbandoned(abandoned);
    expect(settled).toMatchObject({ heldSessions: [], lostSessions: [session.id] });
    expect((await b.sessions.get(session.id))?.hold).toBeNull();
  });
});
