/**
 * The usage page: GET /api/usage?by=…&since=…, totals, a chart, the groups, and what the totals
 * leave out ("Not included": unmetered runs, unpriced models). Unknown is never shown as $0.
 */
import type { GroupBy, ReportGroup, UsageReport } from '../../src/core/ports/ledger.js';
import { getJson } from './api.js';
import { showError, startPage } from './chrome.js';
import { byId, fill, h, note, table, td } from './dom.js';
import { formatDate, formatGroupCost, formatInt } from './format.js';
import { barChart, chartMetric } from './usage-chart.js';

const GROUPINGS: readonly [GroupBy, string][] = [
  ['day', 'Day'],
  ['engine', 'Engine'],
  ['model', 'Model'],
  ['payer', 'Payer'],
  ['work-item', 'Work item'],
];
const PERIODS = ['7d', '30d', '90d'];

const params = new URLSearchParams(location.search);
let by: GroupBy = GROUPINGS.some(([g]) => g === params.get('by')) ? (params.get('by') as GroupBy) : 'day';
let since = PERIODS.includes(params.get('since') ?? '') ? (params.get('since') as string) : '7d';

const tokens = (g: ReportGroup) =>
  g.usage.inputTokens +
  g.usage.outputTokens +
  g.usage.cacheReadTokens +
  g.usage.cacheCreationTokens +
  g.usage.reasoningTokens;

function totals(report: UsageReport): HTMLElement {
  const t = report.total;
  const missing: string[] = [];
  const n = report.notIncluded;
  if (n.unmeteredCount > 0)
    missing.push(`${n.unmeteredCount} unmetered run${n.unmeteredCount === 1 ? '' : 's'}`);
  if (n.unpricedRows > 0)
    missing.push(`cost of ${n.unpricedRows} unpriced row${n.unpricedRows === 1 ? '' : 's'}`);
  return h(
    'p',
    { id: 'totals', class: 'totals' },
    `${formatDate(report.since)} → ${formatDate(report.until)}: `,
    h('strong', {}, `${formatInt(tokens(t))} tokens`),
    ` in ${formatInt(t.turns)} turn${t.turns === 1 ? '' : 's'} (${formatInt(t.rows)} ledger rows) · estimated cost `,
    h('strong', { class: t.costUsd === null && t.rows > 0 ? 'unknown' : null }, formatGroupCost(t)),
    missing.length > 0 ? ` · not included: ${missing.join(', ')}` : '',
  );
}

function groupsTable(report: UsageReport): HTMLElement {
  if (report.groups.length === 0) return note('No metered usage in this period.');
  const label = GROUPINGS.find(([g]) => g === report.by)?.[1] ?? report.by;
  return table(
    [
      label,
      'Turns',
      'Rows',
      'Input',
      'Output',
      'Cache read',
      'Cache write',
      'Reasoning',
      'Est. cost',
      'Basis',
    ],
    report.groups.map((g) =>
      h(
        'tr',
        {},
        h('th', { scope: 'row' }, g.key),
        td(formatInt(g.turns), true),
        td(formatInt(g.rows), true),
        td(formatInt(g.usage.inputTokens), true),
        td(formatInt(g.usage.outputTokens), true),
        td(formatInt(g.usage.cacheReadTokens), true),
        td(formatInt(g.usage.cacheCreationTokens), true),
        td(formatInt(g.usage.reasoningTokens), true),
        td(formatGroupCost(g), true),
        td(g.costBases.join(' + ') || '-'),
      ),
    ),
  );
}

function notIncluded(report: UsageReport): HTMLElement {
  const n = report.notIncluded;
  const section = h(
    'section',
    { id: 'not-included', 'aria-labelledby': 'ni-heading' },
    h('h2', { id: 'ni-heading' }, 'Not included'),
    h('p', {}, 'Cost unknown, not in the totals above.'),
  );
  if (n.unmetered.length === 0 && n.unpricedRows === 0)
    section.append(note('Nothing: every run was measured and priced.'));
  if (n.unmetered.length > 0) {
    section.append(
      table(
        ['Unmetered runs', 'Engine', 'Runner', 'Reason', 'Last'],
        n.unmetered.map((u) =>
          h(
            'tr',
            {},
            td(formatInt(u.count), true),
            td(u.engine ?? '?'),
            td(u.runner ?? '?'),
            td(u.reason),
            td(formatDate(u.last)),
          ),
        ),
      ),
    );
  }
  if (n.unpricedRows > 0) {
    section.append(
      h(
        'p',
        { class: 'unpriced' },
        `Cost of ${formatInt(n.unpricedRows)} row${n.unpricedRows === 1 ? '' : 's'} of models without a list price: `,
        ...n.unpricedModels.flatMap((m, i) => [i > 0 ? ', ' : '', h('code', {}, m)]),
        '. Their tokens are counted above; add prices under pricing: in the config.',
      ),
    );
  }
  return section;
}

function controls(): HTMLElement {
  const tabs = GROUPINGS.map(([g, text]) => {
    const button = h(
      'button',
      { type: 'button', 'aria-pressed': g === by ? 'true' : 'false', 'data-by': g },
      text,
    );
    button.addEventListener('click', () => {
      by = g;
      void load();
    });
    return button;
  });
  const select = h(
    'select',
    { id: 'since' },
    ...PERIODS.map((p) => h('option', { value: p, selected: p === since }, `last ${p}`)),
  );
  select.addEventListener('change', () => {
    since = select.value;
    void load();
  });
  return h(
    'div',
    { class: 'controls' },
    h('div', { role: 'group', 'aria-label': 'Group by', class: 'tabs' }, ...tabs),
    h('label', { for: 'since' }, 'Period '),
    select,
  );
}

function render(report: UsageReport): void {
  const metric = chartMetric(report.groups);
  const title = `${metric === 'cost' ? 'Estimated cost' : 'Tokens'} by ${report.by}`;
  fill(
    byId('content'),
    controls(),
    totals(report),
    h('figure', {}, barChart(report.groups, metric, title), h('figcaption', {}, title)),
    groupsTable(report),
    notIncluded(report),
    h(
      'p',
      { class: 'aside' },
      'Costs are estimates, not charges: engine-reported, or list-price at its stated date.',
    ),
  );
}

async function load(): Promise<void> {
  history.replaceState(null, '', `/usage?by=${by}&since=${since}`);
  try {
    render(
      await getJson<UsageReport>(
        `/api/usage?by=${encodeURIComponent(by)}&since=${encodeURIComponent(since)}`,
      ),
    );
  } catch (error) {
    showError(error);
  }
}

startPage();
void load();
