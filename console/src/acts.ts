/** The acts page: acts and breaches (GET /api/acts), and the held sessions with their Resume. */
import type { ActView, SessionRow } from '../../src/console/protocol.js';
import { actsTable } from './acts-table.js';
import { getJson } from './api.js';
import { showError, startPage } from './chrome.js';
import { byId, fill, h, note, table, td } from './dom.js';
import { resumeControl } from './resume.js';
import { isResumable, statusCell } from './status.js';

const params = new URLSearchParams(location.search);
let breachesOnly = params.get('breaches') === '1';
let lastHeld = '';

function heldTable(rows: readonly SessionRow[]): HTMLElement {
  const held = rows.filter(isResumable);
  if (held.length === 0) return note('No session is held.');
  return table(
    ['Work item', 'Status', 'Action'],
    held.map((row) =>
      h(
        'tr',
        { 'data-session': row.id },
        h('th', { scope: 'row' }, h('a', { href: `/sessions/${encodeURIComponent(row.id)}` }, row.workItem)),
        td(statusCell(row)),
        td(resumeControl(row)),
      ),
    ),
  );
}

function renderHeld(rows: readonly SessionRow[]): void {
  // Rebuilt only on change: a raise amount being typed survives the live updates.
  const json = JSON.stringify(rows.filter(isResumable));
  if (json === lastHeld) return;
  lastHeld = json;
  fill(byId('held'), heldTable(rows));
}

async function loadActs(): Promise<void> {
  const query = breachesOnly ? '?breaches=1' : '';
  history.replaceState(null, '', `/acts${query}`);
  try {
    const acts = await getJson<ActView[]>(`/api/acts${query}`);
    const breaches = acts.filter((a) => a.breach).length;
    fill(
      byId('acts'),
      h(
        'p',
        {},
        `${acts.length} act${acts.length === 1 ? '' : 's'}, ${breaches} breach${breaches === 1 ? '' : 'es'}.`,
      ),
      acts.length > 0 ? actsTable(acts, true) : note(breachesOnly ? 'No breaches.' : 'No acts recorded.'),
    );
  } catch (error) {
    showError(error);
  }
}

const filter = byId<HTMLInputElement>('breaches-only');
filter.checked = breachesOnly;
filter.addEventListener('change', () => {
  breachesOnly = filter.checked;
  void loadActs();
});

startPage({
  onMessage(message) {
    if (message.t === 'sessions') renderHeld(message.rows);
  },
});
getJson<SessionRow[]>('/api/sessions').then(renderHeld).catch(showError);
void loadActs();
