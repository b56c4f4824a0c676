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

/**
 * What the daemon answered, in words. Its shape is the daemon's resume outcome (released, raised
 * and maybe still over, or not held); read loosely: the page only needs the gist.
 */
export function resumeResult(outcome: unknown): string {
  const o = (outcome ?? {}) as { kind?: unknown; again?: { reason?: unknown } | null };
  if (o.kind === 'not-held') return 'it was not held';
  if (o.kind === 'raised' && o.again) {
    const reason = typeof o.again.reason === 'string' ? `: ${o.again.reason}` : '';
    return `raised, but still over budget${reason}. Raise it further.`;
  }
  return o.kind === 'raised' ? 'raised and resumed' : 'resumed';
}

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
      .then((outcome) => {
        result.textContent = resumeResult(outcome);
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
