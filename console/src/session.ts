/**
 * The session page (/sessions/<id>): the session, its turns, and live either its terminal (tmux)
 * or its turn events (process). The live socket watches it: `session` replaces the detail,
 * `events` appends lines.
 */
import type { EventView, LiveMessage, SessionDetail } from '../../src/console/protocol.js';
import { getJson } from './api.js';
import { showError, startPage } from './chrome.js';
import { byId, fill, h, note } from './dom.js';
import { formatCost, formatDate, formatInt, formatTokens } from './format.js';
import { resumeControl } from './resume.js';
import { eventLine } from './session-events.js';
import { terminalSection } from './session-terminal.js';
import { turnSection } from './session-turns.js';
import { statusCell } from './status.js';

const sessionId = decodeURIComponent(location.pathname.split('/')[2] ?? '');
/** A long turn streams many events: the page keeps the latest ones. */
const MAX_EVENTS = 2000;

let current: SessionDetail | undefined;
let lastSummary = '';
let lastTurns = '';
let liveArea: { update(detail: SessionDetail): void } | undefined;
const seen = new Set<string>();

function summary(detail: SessionDetail): HTMLElement {
  const row = detail.session;
  const dl = h(
    'dl',
    { class: 'summary' },
    h('dt', {}, 'Status'),
    h('dd', {}, statusCell(row)),
    ...[
      ['Engine', row.engine],
      ['Runner', row.tmuxTarget ? `${row.runner} (${row.tmuxTarget})` : row.runner],
      ['Turns', formatInt(row.turns)],
      ['Tokens', formatTokens(row.tokens)],
      ['Est. cost', formatCost(row.costUsd, row.unpricedRows)],
      ['Unmetered turns', formatInt(row.unmeteredTurns)],
      ['Created', formatDate(row.createdAt)],
      ['Last turn', formatDate(row.lastTurnAt)],
    ].flatMap(([term, value]) => [h('dt', {}, term ?? ''), h('dd', {}, value ?? '')]),
  );
  return h('div', {}, dl, resumeControl(row));
}

function eventsSection(): { section: HTMLElement; update(detail: SessionDetail): void } {
  const section = h(
    'section',
    { 'aria-labelledby': 'events-heading' },
    h('h2', { id: 'events-heading' }, 'Events'),
    h('ol', { id: 'events', class: 'events', 'aria-live': 'off' }),
  );
  return { section, update: () => undefined };
}

function appendEvents(events: readonly EventView[]): void {
  const list = document.getElementById('events');
  if (!list) return;
  const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
  for (const event of events) {
    const key = `${event.turnId}.${event.seq}`;
    if (seen.has(key)) continue;
    seen.add(key);
    list.append(eventLine(event));
  }
  while (list.childElementCount > MAX_EVENTS) list.firstElementChild?.remove();
  if (atBottom) list.scrollTop = list.scrollHeight;
}

function render(detail: SessionDetail): void {
  current = detail;
  const row = detail.session;
  byId('title').textContent = `Session ${row.workItem}`;
  const content = byId('content');
  if (!liveArea) {
    const area = row.tmuxTarget ? terminalSection(row) : eventsSection();
    liveArea = area;
    fill(
      content,
      h('section', { id: 'summary', 'aria-label': 'Summary' }),
      area.section,
      h(
        'section',
        { 'aria-labelledby': 'turns-heading' },
        h('h2', { id: 'turns-heading' }, 'Turns'),
        h('div', { id: 'turns' }),
      ),
    );
  }
  // Rebuilt only on change: a raise amount being typed survives the live updates of other fields.
  const summaryJson = JSON.stringify(row);
  if (summaryJson !== lastSummary) {
    lastSummary = summaryJson;
    fill(byId('summary'), summary(detail));
  }
  liveArea.update(detail);
  const turnsJson = JSON.stringify(detail.turns);
  if (turnsJson === lastTurns) return;
  lastTurns = turnsJson;
  const turns = byId('turns');
  if (detail.turns.length === 0) fill(turns, note('No turns yet.'));
  else fill(turns, ...[...detail.turns].sort((a, b) => b.seq - a.seq).map(turnSection));
}

function onMessage(message: LiveMessage): void {
  if (message.t === 'session' && message.detail.session.id === sessionId) render(message.detail);
  else if (message.t === 'sessions' && current) {
    // The list changes first (a take over, a hold): the summary follows it before the detail does.
    const row = message.rows.find((r) => r.id === sessionId);
    if (row && JSON.stringify(row) !== JSON.stringify(current.session)) render({ ...current, session: row });
  } else if (message.t === 'events' && message.sessionId === sessionId) appendEvents(message.events);
  else if (message.t === 'error') showError(message.message);
}

if (!sessionId) showError('No session named in the address.');
else {
  startPage({ watch: sessionId, onMessage });
  getJson<SessionDetail>(`/api/sessions/${encodeURIComponent(sessionId)}`)
    .then((detail) => {
      if (!current) render(detail);
    })
    .catch(showError);
}
