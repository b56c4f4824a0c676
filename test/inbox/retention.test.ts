import { describe, expect, it } from 'vitest';
import type { DeliveryStatus } from '../../src/core/ports/inbox.js';
import {
  FINISHED_STATUSES,
  isPrunable,
  type RetentionCandidate,
  retentionCutoff,
} from '../../src/inbox/retention.js';

const NOW = new Date('2026-03-31T12:00:00.000Z');

describe('retentionCutoff', () => {
  it('is retainDays before now, as the inbox writes times', () => {
    expect(retentionCutoff(NOW, 30)).toBe('2026-03-01T12:00:00.000Z');
    expect(retentionCutoff(NOW, 1)).toBe('2026-03-30T12:00:00.000Z');
    expect(retentionCutoff(NOW, 3650)).toBe('2016-04-02T12:00:00.000Z');
  });

  it('0 keeps bodies forever: no cutoff', () => {
    expect(retentionCutoff(NOW, 0)).toBeUndefined();
  });

  it.each([-1, 1.5, Number.NaN])('refuses %s days', (days) => {
    expect(() => retentionCutoff(NOW, days)).toThrow(/whole number of days/);
  });
});

describe('isPrunable', () => {
  const cutoff = '2026-03-01T12:00:00.000Z';
  const old = '2026-02-01T00:00:00.000Z';
  const recent = '2026-03-20T00:00:00.000Z';
  const row = (fields: Partial<RetentionCandidate>): RetentionCandidate => ({
    status: 'done',
    receivedAt: old,
    updatedAt: old,
    prunedAt: null,
    ...fields,
  });

  it('finished deliveries older than the cutoff: every finished status', () => {
    expect(FINISHED_STATUSES).toEqual(['done', 'failed', 'rejected', 'ignored']);
    for (const status of FINISHED_STATUSES) expect(isPrunable(row({ status }), cutoff)).toBe(true);
  });

  it.each<DeliveryStatus>(['queued', 'running'])('never a %s delivery, however old', (status) => {
    expect(isPrunable(row({ status }), cutoff)).toBe(false);
  });

  it('not when it arrived or last changed after the cutoff (a failed delivery keeps its body after failing)', () => {
    expect(isPrunable(row({ receivedAt: recent, updatedAt: recent }), cutoff)).toBe(false);
    expect(isPrunable(row({ status: 'failed', updatedAt: recent }), cutoff)).toBe(false);
    // Exactly at the cutoff is not older than it.
    expect(isPrunable(row({ receivedAt: cutoff, updatedAt: cutoff }), cutoff)).toBe(false);
  });

  it('not twice', () => {
    expect(isPrunable(row({ prunedAt: '2026-03-02T00:00:00.000Z' }), cutoff)).toBe(false);
  });
});
