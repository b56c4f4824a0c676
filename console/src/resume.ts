/**
 * Resume a held session (POST /api/sessions/<id>/resume, with the page's ticket). An over-budget
 * session needs its ceiling raised: the amount is in the ceiling's unit (turns, tokens or dollars),
 * as `the-loop sessions resume --raise` takes it; the server checks it and says what is wrong.
 */
import type { SessionRow } from '../../src/console/protocol.js';
import { postJson } from './api.js';
import { h } from './dom.js';
import { isResumable } from './status.js';

let counter = 0;

export function resumeControl(row: SessionRow, onDone?: () => void): HTMLElement | null {
  if (!isResumable(row)) return null;
  const id = `raise-${++counter}`;
  const needsRaise = row.status === 'over-budget';
  const input = needsRaise
    ? h('input', { id, name: 'raise', type: 'text', inputmode: 'decimal', required: true, size: 8 })
    : null;
  const result = h('span', { class: 'result', role: 'status' });
  const button = h('button', { type: 'submit' }, 'Resume');
  const form = h(
    'form',
    { class: 'resume', 'data-session': row.id },
    input ? h('label', { for: id }, 'Raise by ') : null,
    input,
    button,
    result,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const raise = input?.value.trim();
    button.disabled = true;
    result.textContent = 'resuming…';
    postJson(`/api/sessions/${encodeURIComponent(row.id)}/resume`, raise ? { raise } : {})
      .then(() => {
        result.textContent = 'resumed';
        onDone?.();
      })
      .catch((error: unknown) => {
        result.textContent = error instanceof Error ? error.message : String(error);
        result.classList.add('error');
      })
      .finally(() => {
        button.disabled = false;
      });
  });
  return form;
}
