/** The sessions page: every session, updating from the live socket's `sessions` messages. */
import type { SessionRow } from '../../src/console/protocol.js';
import { getJson } from './api.js';
import { renderBanner, showError, startPage } from './chrome.js';
import { byId, fill, h, note, table, td } from './dom.js';
import { formatCost, formatDate, formatInt, formatTokens } from './format.js';
import { resumeControl } from './resume.js';
import { statusCell } from './status.js';

const HEADERS = [
  'Work item',
  'Engine',
  'Runner',
  'Status',
  'Turns',
  'Tokens',
  'Est. cost',
  'Last turn',
  'Action',
];

function costCell(row: SessionRow): HTMLTableCellElement {
  const cell = td(formatCost(row.costUsd, row.unpricedRows), true);
  if (row.costUsd === null) cell.classList.add('unknown');
  // Priced turns plus unmetered ones: the sum leaves those out, so say so next to it.
  if (row.unmeteredTurns > 0 && row.costUsd !== null) {
    cell.append(h('span', { class: 'aside' }, ` + ${row.unmeteredTurns} unmetered`));
  }
  return cell;
}

function sessionRow(row: SessionRow): HTMLTableRowElement {
  return h(
    'tr',
    { 'data-session': row.id, class: row.takeover ? 'taken-over' : null },
    h('th', { scope: 'row' }, h('a', { href: `/sessions/${encodeURIComponent(row.id)}` }, row.workItem)),
    td(row.engine),
    td(row.runner),
    td(statusCell(row)),
    td(formatInt(row.turns), true),
    td(formatTokens(row.tokens), true),
    costCell(row),
    td(formatDate(row.lastTurnAt ?? row.createdAt)),
    td(resumeControl(row)),
  );
}

/**
 * Rows are kept while their data is the same, so a live update does not wipe a raise amount being
 * typed into another row (or move the focus).
 */
const built = new Map<string, { json: string; tr: HTMLTableRowElement }>();

function rowFor(row: SessionRow): HTMLTableRowElement {
  const json = JSON.stringify(row);
  const known = built.get(row.id);
  if (known && known.json === json) return known.tr;
  const tr = sessionRow(row);
  built.set(row.id, { json, tr });
  return tr;
}

function render(rows: readonly SessionRow[]): void {
  const content = byId('content');
  byId('count').textContent = `${rows.length} session${rows.length === 1 ? '' : 's'}`;
  if (rows.length === 0) {
    built.clear();
    fill(content, note('No sessions yet: a webhook delivery to a routed work item starts one.'));
    return;
  }
  const trs = rows.map(rowFor);
  const ids = new Set(rows.map((row) => row.id));
  for (const id of built.keys()) if (!ids.has(id)) built.delete(id);
  const body = content.querySelector('tbody');
  if (body) reorder(body, trs);
  else fill(content, table(HEADERS, trs));
}

/** Put the rows in order, moving only what moved (a moved node loses the focus). */
function reorder(body: HTMLTableSectionElement, trs: readonly HTMLTableRowElement[]): void {
  let cursor = body.firstElementChild;
  for (const tr of trs) {
    if (tr === cursor) cursor = cursor.nextElementSibling;
    else body.insertBefore(tr, cursor);
  }
  while (cursor) {
    const next = cursor.nextElementSibling;
    cursor.remove();
    cursor = next;
  }
}

let gotLive = false;
startPage({
  onMessage(message) {
    if (message.t !== 'sessions') return;
    gotLive = true;
    render(message.rows);
  },
});
getJson<SessionRow[]>('/api/sessions')
  .then((rows) => {
    // The live socket may have answered first, with newer rows: keep those.
    if (gotLive) return;
    render(rows);
    renderBanner(rows);
  })
  .catch(showError);
