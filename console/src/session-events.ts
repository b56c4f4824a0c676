/**
 * A process session's turn events, as lines, as they stream. What an engine said is untrusted
 * text: every piece goes in as textContent.
 */
import type { EventView } from '../../src/console/protocol.js';
import { h } from './dom.js';
import { formatInt, formatUsd, oneLine } from './format.js';

const str = (v: unknown): string => (typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v));
const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

function usageLine(e: Record<string, unknown>): string {
  const u = (e.usage ?? {}) as Record<string, unknown>;
  const cost = typeof e.costUsd === 'number' ? ` · ${formatUsd(e.costUsd)}` : '';
  const model = typeof e.model === 'string' ? ` · ${e.model}` : '';
  return `${formatInt(num(u.inputTokens))} in · ${formatInt(num(u.outputTokens))} out${model}${cost}`;
}

/** The label and text of one event. */
function describe(event: EventView['event']): [string, string] {
  const e = event as Record<string, unknown>;
  switch (event.type) {
    case 'text':
      return ['text', str(e.text)];
    case 'tool-use':
      return ['tool', `${str(e.name)} ${oneLine(str(e.input), 400)}`];
    case 'tool-result':
      return [e.ok === false ? 'result (failed)' : 'result', str(e.summary)];
    case 'usage':
      return ['usage', usageLine(e)];
    case 'turn-end':
      return ['end', `${e.ok === false ? 'failed' : 'ok'}${e.message ? `: ${str(e.message)}` : ''}`];
    case 'error':
    case 'diagnostic':
      return [event.type, str(e.message)];
    case 'tool-refused':
      return ['refused', `${str(e.tool)}${e.byPolicy ? ' (by policy)' : ''}`];
    case 'attention':
      return [
        'attention',
        e.waiting ? `waiting for a person${e.message ? `: ${str(e.message)}` : ''}` : 'going on',
      ];
    case 'session':
      return ['session', `${str(e.engineSessionId)}${e.model ? ` · ${str(e.model)}` : ''}`];
    default:
      return [oneLine(event.type, 40), oneLine(JSON.stringify(event), 400)];
  }
}

/** Event types with a style of their own; the class never carries an engine's own words. */
const STYLED = new Set(['text', 'tool-use', 'tool-result', 'usage', 'turn-end', 'error', 'diagnostic']);

export function eventLine(view: EventView): HTMLLIElement {
  const [label, text] = describe(view.event);
  const kind = STYLED.has(view.event.type) ? view.event.type : 'other';
  return h(
    'li',
    { class: `event event-${kind}`, 'data-turn': view.turnId, 'data-seq': view.seq },
    h('span', { class: 'event-label' }, label),
    h('span', { class: 'event-text' }, text),
  );
}
