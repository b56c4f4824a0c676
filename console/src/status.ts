/** A session's status as a badge, with why it is held in words. */
import type { ConsoleStatus, SessionRow } from '../../src/console/protocol.js';
import { h } from './dom.js';
import { formatDate } from './format.js';

/** Statuses a person's resume releases (a take over is released by hand back instead). */
const RESUMABLE: readonly ConsoleStatus[] = ['held', 'over-budget', 'breach', 'unaccounted', 'interrupted'];

export function isResumable(row: Pick<SessionRow, 'status' | 'takeover'>): boolean {
  return row.takeover === null && RESUMABLE.includes(row.status);
}

/** Statuses shown as needing attention. */
const ALERT: readonly ConsoleStatus[] = [
  'held',
  'over-budget',
  'breach',
  'unaccounted',
  'interrupted',
  'lost',
];

export function statusBadge(row: Pick<SessionRow, 'status' | 'takeover'>): HTMLSpanElement {
  const label = row.takeover ? 'taken over' : row.status;
  const kind = row.takeover ? 'takeover' : ALERT.includes(row.status) ? 'alert' : row.status;
  return h('span', { class: `badge badge-${kind}`, 'data-status': row.status }, label);
}

/** The badge and, when held or taken over, the reason under it. */
export function statusCell(row: SessionRow): HTMLElement {
  const reason = row.takeover
    ? `by ${row.takeover.by} since ${formatDate(row.takeover.since)}`
    : (row.heldReason ?? null);
  return h(
    'div',
    { class: 'status' },
    statusBadge(row),
    reason ? h('span', { class: 'reason' }, reason) : null,
  );
}
