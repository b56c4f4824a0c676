/**
 * A bar chart of the usage groups, drawn as SVG nodes (no chart library, no inline style: geometry
 * in attributes, looks in console.css). Cost when anything is priced, else tokens. A group whose
 * cost is unknown gets no bar but an "unknown" mark: an empty bar would read as $0.
 */
import type { ReportGroup } from '../../src/core/ports/ledger.js';
import { s } from './dom.js';
import { formatGroupCost, formatInt } from './format.js';

const WIDTH = 720;
const HEIGHT = 260;
const PAD = { top: 16, right: 12, bottom: 56, left: 72 };

export type Metric = 'cost' | 'tokens';

const tokensOf = (g: ReportGroup) =>
  g.usage.inputTokens +
  g.usage.outputTokens +
  g.usage.cacheReadTokens +
  g.usage.cacheCreationTokens +
  g.usage.reasoningTokens;

export function chartMetric(groups: readonly ReportGroup[]): Metric {
  return groups.some((g) => g.costUsd !== null) ? 'cost' : 'tokens';
}

const metricOf = (g: ReportGroup, metric: Metric): number | null =>
  metric === 'cost' ? g.costUsd : tokensOf(g);

const label = (key: string) => (key.length > 12 ? `${key.slice(0, 11)}…` : key);

function axisLabel(value: number, metric: Metric): string {
  // The origin is a bare 0: "$0" on the page would read as a cost, and unknown is never $0.
  if (value === 0) return '0';
  return metric === 'cost' ? `$${value < 1 ? value.toFixed(2) : Math.round(value)}` : formatInt(value);
}

export function barChart(groups: readonly ReportGroup[], metric: Metric, title: string): SVGSVGElement {
  const max = Math.max(0, ...groups.map((g) => metricOf(g, metric) ?? 0));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const slot = groups.length > 0 ? plotW / groups.length : plotW;
  const barW = Math.max(2, Math.min(48, slot * 0.7));
  const baseY = PAD.top + plotH;
  const svg = s(
    'svg',
    { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: 'chart', role: 'img', 'aria-label': title },
    s('title', {}, title),
    s('line', { x1: PAD.left, y1: baseY, x2: WIDTH - PAD.right, y2: baseY, class: 'axis' }),
    s('line', { x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: baseY, class: 'axis' }),
    s(
      'text',
      { x: PAD.left - 6, y: PAD.top + 4, class: 'tick', 'text-anchor': 'end' },
      axisLabel(max, metric),
    ),
    s('text', { x: PAD.left - 6, y: baseY, class: 'tick', 'text-anchor': 'end' }, axisLabel(0, metric)),
  );
  groups.forEach((g, i) => {
    const cx = PAD.left + slot * i + slot / 2;
    const value = metricOf(g, metric);
    const shown = metric === 'cost' ? formatGroupCost(g) : `${formatInt(tokensOf(g))} tokens`;
    if (value === null) {
      svg.append(
        s(
          'text',
          { x: cx, y: baseY - 4, class: 'unknown-mark', 'text-anchor': 'middle' },
          '?',
          s('title', {}, `${g.key}: ${shown}`),
        ),
      );
    } else {
      const barH = max > 0 ? (value / max) * plotH : 0;
      svg.append(
        s(
          'rect',
          {
            x: cx - barW / 2,
            y: baseY - barH,
            width: barW,
            height: Math.max(barH, 0),
            class: 'bar',
            'data-key': g.key,
          },
          s('title', {}, `${g.key}: ${shown}`),
        ),
      );
    }
    svg.append(
      s(
        'text',
        {
          x: cx,
          y: baseY + 14,
          class: 'tick',
          'text-anchor': 'end',
          transform: `rotate(-35 ${cx} ${baseY + 14})`,
        },
        label(g.key),
      ),
    );
  });
  return svg;
}
