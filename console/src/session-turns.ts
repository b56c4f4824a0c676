/** A session's turns: how each ended, what it used and cost (or that the cost is unknown), its acts. */
import type { TurnView } from '../../src/console/protocol.js';
import { actsTable } from './acts-table.js';
import { h } from './dom.js';
import { formatCost, formatDate, formatInt } from './format.js';

function usageText(turn: TurnView): string {
  const u = turn.usage;
  if (!u) return turn.meter === 'none' ? 'not measured (unmetered engine)' : 'no usage reported';
  return `${formatInt(u.inputTokens)} in · ${formatInt(u.outputTokens)} out · ${formatInt(u.cacheReadTokens)} cache read · ${formatInt(u.cacheWriteTokens)} cache write`;
}

function pair(term: string, value: string, cls?: string): HTMLElement[] {
  return [h('dt', {}, term), h('dd', cls ? { class: cls } : {}, value)];
}

export function turnSection(turn: TurnView): HTMLElement {
  return h(
    'article',
    { class: 'turn', 'data-turn': turn.seq },
    h('h3', {}, `Turn ${turn.seq} · ${turn.status}`, turn.endReason ? ` · ${turn.endReason}` : ''),
    h(
      'dl',
      {},
      ...pair('Started', formatDate(turn.startedAt)),
      ...pair('Ended', formatDate(turn.endedAt)),
      ...pair('Model', turn.model ?? 'unknown'),
      ...pair('Meter', turn.meter),
      ...pair('Usage', usageText(turn)),
      ...pair(
        'Est. cost',
        formatCost(turn.costUsd, turn.unpricedRows, turn.costBasis),
        turn.costUsd === null ? 'unknown' : undefined,
      ),
    ),
    turn.error ? h('p', { class: 'error', role: 'note' }, h('strong', {}, 'Error: '), turn.error) : null,
    turn.warnings.length > 0
      ? h('ul', { class: 'warnings' }, ...turn.warnings.map((w) => h('li', {}, w)))
      : null,
    turn.acts.length > 0
      ? h('details', {}, h('summary', {}, `${turn.acts.length} act(s)`), actsTable(turn.acts, false))
      : null,
  );
}
