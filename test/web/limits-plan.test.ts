import { describe, expect, it } from 'vitest';
import {
  admitBytes,
  arrivalRate,
  type HeldBody,
  sheddable,
  shedForConnection,
} from '../../src/web/limits-plan.js';

const MB = 1024 * 1024;
const body = (id: number, reserved: number, received: number, startedAt: number): HeldBody => ({
  id,
  reserved,
  received,
  startedAt,
});

describe('arrivalRate', () => {
  it('is bytes per second since the body started, a young body counted over the grace period', () => {
    expect(arrivalRate(body(1, 0, 2 * MB, 0), 2_000, 1_000)).toBe(MB);
    // 100 ms old with 1 MB: counted over the 1 s grace, not as 10 MB/s.
    expect(arrivalRate(body(1, 0, MB, 900), 1_000, 1_000)).toBe(MB);
    expect(arrivalRate(body(1, 0, 0, 1_000), 1_000, 0)).toBe(0);
  });
});

describe('sheddable', () => {
  it('lists bodies past the grace period, slowest first, the older first on a tie', () => {
    const list = [
      body(1, 20 * MB, 4 * MB, 0), // 1 MB/s
      body(2, 20 * MB, 40_000, 1_000), // 10 kB/s
      body(3, 20 * MB, 40_000, 0), // 10 kB/s over 4 s: slower
      body(4, 20 * MB, 0, 3_500), // younger than the grace period
    ];
    expect(sheddable(list, 4_000, 1_000).map((b) => b.id)).toEqual([3, 2, 1]);
    expect(sheddable(list, 4_000, 1_000, 3).map((b) => b.id)).toEqual([2, 1]);
  });
});

describe('admitBytes', () => {
  const now = 10_000;
  const grace = 1_000;
  it('admits what fits without shedding', () => {
    const bodies = [body(1, 20 * MB, MB, 0)];
    expect(admitBytes({ bodies, id: 9, need: 40 * MB, budget: 64 * MB, now, graceMs: grace })).toEqual({
      admit: true,
      shed: [],
    });
  });

  it('sheds the slowest bodies, and only as many as make room', () => {
    const bodies = [
      body(1, 20 * MB, 15 * MB, 0), // fast
      body(2, 20 * MB, 100, 0), // slowest
      body(3, 20 * MB, MB, 0),
    ];
    const d = admitBytes({ bodies, id: 9, need: 20 * MB, budget: 64 * MB, now, graceMs: grace });
    expect(d).toEqual({ admit: true, shed: [2] });
    const more = admitBytes({ bodies, id: 9, need: 40 * MB, budget: 64 * MB, now, graceMs: grace });
    expect(more).toEqual({ admit: true, shed: [2, 3] });
  });

  it('refuses, shedding nothing, when even shedding all it may would not make room', () => {
    const bodies = [body(1, 30 * MB, 0, 0), body(2, 30 * MB, 0, now - 10)]; // 2 is in its grace period
    expect(admitBytes({ bodies, id: 9, need: 40 * MB, budget: 64 * MB, now, graceMs: grace })).toEqual({
      admit: false,
    });
  });

  it('then sheds young bodies larger than itself, largest first: big young bodies cannot hold the budget', () => {
    // Three 20 MB bodies in their grace period fill the budget; a 10 kB delivery still gets in.
    const young = [
      body(1, 20 * MB, 0, now - 100),
      body(2, 21 * MB, 0, now - 50),
      body(3, 20 * MB, 0, now - 10),
    ];
    expect(admitBytes({ bodies: young, id: 9, need: 10_000, budget: 61 * MB, now, graceMs: grace })).toEqual({
      admit: true,
      shed: [2],
    });
    // Past the grace period the slowest goes first, before any young one.
    const mixed = [...young, body(4, MB, 0, 0)];
    expect(admitBytes({ bodies: mixed, id: 9, need: 2 * MB, budget: 62 * MB, now, graceMs: grace })).toEqual({
      admit: true,
      shed: [4, 2],
    });
    // A young body no larger than the newcomer is kept: the newcomer is refused.
    const small = [body(1, 64 * 1024, 0, now - 10)];
    expect(
      admitBytes({ bodies: small, id: 9, need: 64 * 1024, budget: 100 * 1024, now, graceMs: grace }),
    ).toEqual({
      admit: false,
    });
  });

  it('never sheds the body asking, and does not count what it holds already twice', () => {
    // Body 1 grows from 10 to 30 MB: its own 10 MB are already in the list.
    const bodies = [body(1, 10 * MB, 10 * MB, 0), body(2, 20 * MB, 0, 0)];
    expect(admitBytes({ bodies, id: 1, need: 30 * MB, budget: 50 * MB, now, graceMs: grace })).toEqual({
      admit: true,
      shed: [],
    });
    expect(admitBytes({ bodies, id: 1, need: 40 * MB, budget: 50 * MB, now, graceMs: grace })).toEqual({
      admit: true,
      shed: [2],
    });
    expect(admitBytes({ bodies, id: 1, need: 60 * MB, budget: 50 * MB, now, graceMs: grace })).toEqual({
      admit: false,
    });
  });

  it('refuses a body larger than the whole budget', () => {
    expect(admitBytes({ bodies: [], id: 1, need: 65 * MB, budget: 64 * MB, now, graceMs: grace })).toEqual({
      admit: false,
    });
  });
});

describe('shedForConnection', () => {
  const base = { cap: 4, bodies: [] as HeldBody[], now: 10_000, graceMs: 1_000 };
  it('does nothing within the cap', () => {
    expect(shedForConnection({ ...base, open: 4, waiting: true })).toEqual({ kind: 'none' });
  });

  it('past the cap sheds a connection waiting for its headers first', () => {
    const bodies = [body(7, MB, 0, 0)];
    expect(shedForConnection({ ...base, bodies, open: 5, waiting: true })).toEqual({ kind: 'waiting' });
  });

  it('then the slowest body past its grace period', () => {
    const bodies = [body(7, MB, MB, 0), body(8, MB, 10, 0), body(9, MB, 0, 9_900)];
    expect(shedForConnection({ ...base, bodies, open: 5, waiting: false })).toEqual({ kind: 'body', id: 8 });
  });

  it('else refuses the newcomer: streams and young bodies are not cut for it', () => {
    const bodies = [body(9, MB, 0, 9_900)];
    expect(shedForConnection({ ...base, bodies, open: 5, waiting: false })).toEqual({ kind: 'refuse' });
    expect(shedForConnection({ ...base, open: 5, waiting: false })).toEqual({ kind: 'refuse' });
  });
});
