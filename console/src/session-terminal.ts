/**
 * A tmux session's live area: its terminal, who may type, and take over / hand back. Watching is
 * the default and is read-only (the daemon forwards nothing a viewer sends); taking over makes this
 * login the writer and holds the session's deliveries until hand back.
 */
import type { SessionDetail, SessionRow, TakeoverView } from '../../src/console/protocol.js';
import { postJson } from './api.js';
import { showError } from './chrome.js';
import { h } from './dom.js';
import { formatDate } from './format.js';
import { mountTerminal, type Role, type TerminalView } from './terminal.js';

interface State {
  role: Role;
  takeover: TakeoverView | null;
  closed: string | null;
}

function roleText(state: State): string {
  if (state.closed) return `terminal closed: ${state.closed}`;
  if (state.role === 'writer') return 'you are typing: deliveries are held';
  const t = state.takeover;
  return t
    ? `watching — read only · taken over by ${t.by} since ${formatDate(t.since)}`
    : 'watching — read only';
}

export function terminalSection(row: SessionRow): {
  section: HTMLElement;
  update(detail: SessionDetail): void;
} {
  const state: State = { role: 'viewer', takeover: row.takeover, closed: null };
  const roleLine = h('p', { id: 'role', class: 'role', role: 'status' });
  const take = h('button', { type: 'button', id: 'takeover' }, 'Take over');
  const back = h('button', { type: 'button', id: 'handback' }, 'Hand back');
  const fit = h('button', { type: 'button', id: 'fit' }, 'Fit to window');
  const container = h('div', { id: 'terminal', class: 'terminal' });
  const section = h(
    'section',
    { 'aria-labelledby': 'terminal-heading' },
    h('h2', { id: 'terminal-heading' }, 'Terminal'),
    roleLine,
    h('div', { class: 'controls' }, take, back, fit),
    container,
  );
  let view: TerminalView | undefined;
  const refresh = () => {
    roleLine.textContent = roleText(state);
    roleLine.dataset.role = state.closed ? 'closed' : state.role;
    // Offered while someone else types too: the daemon refuses, naming them — unless it is this
    // person from another login (after a daemon restart), who goes on typing.
    take.hidden = state.role === 'writer' || state.closed !== null;
    back.hidden = state.takeover === null && state.role !== 'writer';
    fit.hidden = state.role !== 'writer';
  };
  const act = (button: HTMLButtonElement, path: string) => {
    button.addEventListener('click', () => {
      button.disabled = true;
      postJson(`/api/sessions/${encodeURIComponent(row.id)}/${path}`)
        .catch(showError)
        .finally(() => {
          button.disabled = false;
        });
    });
  };
  act(take, 'takeover');
  act(back, 'handback');
  fit.addEventListener('click', () => view?.fit());
  refresh();
  return {
    section,
    update(detail) {
      state.takeover = detail.session.takeover;
      // Mounted once the section is in the document: xterm.js measures its cells there.
      view ??= mountTerminal(container, row.id, {
        onRole(role, takeover) {
          state.role = role;
          state.takeover = takeover;
          refresh();
        },
        onClosed(reason) {
          state.closed = reason;
          refresh();
        },
      });
      refresh();
    },
  };
}
