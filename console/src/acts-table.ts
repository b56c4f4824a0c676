/** Acts as a table (the acts page, and each turn on the session page); breaches stand out. */
import type { ActView } from '../../src/console/protocol.js';
import { h, table, td } from './dom.js';
import { formatDate } from './format.js';

function actRow(act: ActView, withSession: boolean): HTMLTableRowElement {
  return h(
    'tr',
    { class: act.breach ? 'breach' : null, 'data-act': act.id },
    td(formatDate(act.at)),
    withSession
      ? td(
          h(
            'a',
            { href: `/sessions/${encodeURIComponent(act.sessionId)}` },
            act.workItem,
            act.turnSeq === null ? '' : ` · turn ${act.turnSeq}`,
          ),
        )
      : null,
    td(act.source),
    td(act.kind),
    td(act.tool),
    td(h('code', { class: 'command' }, act.command)),
    td(act.outcome),
    td(h('span', { class: `verdict verdict-${act.verdict}` }, act.verdict)),
    td(act.rule ?? '-'),
    td(
      h(
        'div',
        {},
        act.breach ? h('strong', { class: 'badge badge-alert' }, 'breach') : null,
        act.evasion ? h('span', { class: 'reason' }, `evasion: ${act.evasion}`) : null,
      ),
    ),
  );
}

export function actsTable(acts: readonly ActView[], withSession: boolean): HTMLTableElement {
  const headers = ['When', ...(withSession ? ['Session'] : []), 'Source', 'Kind', 'Tool', 'Command'];
  return table(
    [...headers, 'Outcome', 'Verdict', 'Rule', 'Breach'],
    acts.map((act) => actRow(act, withSession)),
  );
}
