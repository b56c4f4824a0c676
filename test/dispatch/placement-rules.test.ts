import { describe, expect, it } from 'vitest';
import type { HostRecord } from '../../src/core/ports/hosts.js';
import { fits, placeWorkItem, shouldAcquire } from '../../src/dispatch/placement-rules.js';

const host = (id: string, over: Partial<HostRecord> = {}): HostRecord => ({
  id,
  labels: ['tmux'],
  engines: ['claude', 'codex'],
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

const needs = (labels: string[] = [], engine = 'claude') => ({ labels, engine });

describe('placeWorkItem', () => {
  it('no hosts, or none that fits → null', () => {
    expect(placeWorkItem({ needs: needs(), hosts: [], self: 'a' })).toBeNull();
    expect(placeWorkItem({ needs: needs(['gpu']), hosts: [host('a')], self: 'a' })).toBeNull();
    expect(placeWorkItem({ needs: needs([], 'ollama'), hosts: [host('a')], self: 'a' })).toBeNull();
  });

  it('only a host with every needed label and the engine', () => {
    const hosts = [
      host('a', { labels: [] }),
      host('b', { labels: ['tmux'], engines: ['codex'] }),
      host('c', { labels: ['tmux', 'gpu'], leases: 5, capacity: 1 }),
    ];
    expect(placeWorkItem({ needs: needs(['tmux']), hosts, self: 'a' })).toBe('c');
    expect(placeWorkItem({ needs: needs(['tmux', 'gpu']), hosts, self: 'a' })).toBe('c');
    expect(placeWorkItem({ needs: needs([]), hosts, self: 'a' })).toBe('a');
  });

  it('a lease kept for a move target: that host while it is up, whatever its load; else by load', () => {
    const hosts = [host('a'), host('b', { leases: 9 }), host('c', { status: 'down' })];
    expect(placeWorkItem({ needs: needs(), hosts, self: 'a', reservedFor: 'b' })).toBe('b');
    expect(placeWorkItem({ needs: needs(), hosts, self: 'b', reservedFor: 'b' })).toBe('b');
    expect(placeWorkItem({ needs: needs(), hosts, self: 'a', reservedFor: 'c' })).toBe('a');
    expect(placeWorkItem({ needs: needs(), hosts, self: 'a', reservedFor: 'gone' })).toBe('a');
    expect(placeWorkItem({ needs: needs(), hosts, self: 'a', reservedFor: undefined })).toBe('a');
  });

  it('only up hosts (not draining, not down), and never one of capacity 0', () => {
    const hosts = [
      host('a', { status: 'draining' }),
      host('b', { status: 'down' }),
      host('c', { capacity: 0 }),
      host('d', { leases: 9 }),
    ];
    expect(placeWorkItem({ needs: needs(), hosts, self: 'a' })).toBe('d');
    expect(placeWorkItem({ needs: needs(), hosts: hosts.slice(0, 3), self: 'a' })).toBeNull();
  });

  it('the least loaded by leases per capacity, exactly; ties by id', () => {
    const hosts = [
      host('c', { leases: 2, capacity: 4 }),
      host('b', { leases: 1, capacity: 3 }),
      host('a', { leases: 1, capacity: 2 }),
    ];
    // c: 0.5, b: 0.333…, a: 0.5
    expect(placeWorkItem({ needs: needs(), hosts, self: 'c' })).toBe('b');
    const tied = [
      host('c', { leases: 3, capacity: 6 }),
      host('b', { leases: 1, capacity: 2 }),
      host('x', { leases: 2, capacity: 4 }),
    ];
    expect(placeWorkItem({ needs: needs(), hosts: tied, self: 'x' })).toBe('b');
    expect(placeWorkItem({ needs: needs(), hosts: [host('z'), host('y')], self: 'z' })).toBe('y');
  });

  it('a host silent too long is passed over, but never the deciding host itself', () => {
    const hosts = [host('a', { silentSeconds: 30 }), host('b', { silentSeconds: 2, leases: 1 })];
    expect(placeWorkItem({ needs: needs(), hosts, self: 'b', silentAfter: 10 })).toBe('b');
    expect(placeWorkItem({ needs: needs(), hosts, self: 'a', silentAfter: 10 })).toBe('a');
    expect(placeWorkItem({ needs: needs(), hosts, self: 'b' })).toBe('a');
  });

  it('every host computes the same answer from the same list, whatever its order', () => {
    const hosts = [host('a', { leases: 1 }), host('b'), host('c')];
    const answers = ['a', 'b', 'c'].map((self) =>
      placeWorkItem({ needs: needs(), hosts: [...hosts].reverse(), self }),
    );
    expect(answers).toEqual(['b', 'b', 'b']);
  });
});

describe('fits and shouldAcquire', () => {
  it('fits: status, capacity, engine, labels', () => {
    expect(fits(host('a'), needs(['tmux']))).toBe(true);
    expect(fits(host('a', { status: 'down' }), needs())).toBe(false);
  });

  it('shouldAcquire: only the host the placement named', () => {
    expect(shouldAcquire('a', 'a')).toBe(true);
    expect(shouldAcquire('a', 'b')).toBe(false);
    expect(shouldAcquire('a', null)).toBe(false);
  });
});
