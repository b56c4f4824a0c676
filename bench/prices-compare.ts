/**
 * bench:prices' comparison: `the-loop usage --json --by model` against `ccusage daily --json
 * --by-agent`, model by model (models matched by their price-table key: `claude-sonnet-4-5-20250929`
 * is `claude-sonnet-4-5`).
 *
 * The kinds differ between the tools, so totals are compared, and each kind where both have it:
 * ours are disjoint — input without the cache, output without reasoning, reasoning apart — while
 * ccusage shows OpenAI's output with its reasoning (as OpenAI counts it) and Gemini's without its
 * thoughts (only in the agent's total). Per model, ccusage's total is its kinds plus what its agent's
 * total holds besides them (when the agent used that one model).
 */
import { modelKey, priceTable } from '../src/ledger/pricing.js';
import type { LongContext } from './prices-corpus.js';

interface Tokens {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  /** Ours: reasoning; ccusage: its agent's total beyond the kinds it shows (Gemini's thoughts). */
  other: number;
}

export interface ModelRow {
  name: string;
  tokens: Tokens;
  cost: number | null;
  /** ccusage: no price for it (`missingPricing`). */
  missing?: boolean;
}

type Json = Record<string, unknown>;
const num = (v: unknown) => (typeof v === 'number' ? v : 0);

export function ours(json: string): { rows: ModelRow[]; unpriced: string[]; dataset: string } {
  const r = JSON.parse(json) as {
    groups: Array<{ key: string; usage: Record<string, number>; costUsd: number | null }>;
    notIncluded: { unpricedModels: string[] };
    prices?: { dataset?: { name: string; version: string; date: string } };
  };
  const d = r.prices?.dataset;
  return {
    rows: r.groups.map((g) => ({
      name: g.key,
      tokens: {
        input: num(g.usage.inputTokens),
        output: num(g.usage.outputTokens),
        cacheRead: num(g.usage.cacheReadTokens),
        cacheWrite: num(g.usage.cacheCreationTokens),
        other: num(g.usage.reasoningTokens),
      },
      cost: g.costUsd,
    })),
    unpriced: r.notIncluded.unpricedModels,
    dataset: d ? `${d.name} ${d.version} (${d.date})` : 'unknown',
  };
}

export function theirs(json: string): ModelRow[] {
  const r = JSON.parse(json) as { daily: Array<{ agents?: Json[] }> };
  const byModel = new Map<string, ModelRow>();
  for (const day of r.daily) {
    for (const agent of day.agents ?? []) {
      const models = (agent.modelBreakdowns as Json[] | undefined) ?? [];
      const kinds = ['inputTokens', 'outputTokens', 'cacheReadTokens', 'cacheCreationTokens'];
      const beyond = num(agent.totalTokens) - kinds.reduce((s, k) => s + num(agent[k]), 0);
      for (const m of models) {
        const name = String(m.modelName);
        const row = byModel.get(name) ?? {
          name,
          tokens: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, other: 0 },
          cost: 0,
          missing: false,
        };
        row.tokens.input += num(m.inputTokens);
        row.tokens.output += num(m.outputTokens);
        row.tokens.cacheRead += num(m.cacheReadTokens);
        row.tokens.cacheWrite += num(m.cacheCreationTokens);
        if (models.length === 1) row.tokens.other += beyond;
        row.cost = (row.cost ?? 0) + num(m.cost);
        row.missing = row.missing === true || m.missingPricing === true;
        byModel.set(name, row);
      }
    }
  }
  return [...byModel.values()];
}

const n = (x: number) => String(x).replace(/\B(?=(\d{3})+$)/g, ',');
const usd = (x: number | null) => (x === null ? 'unknown' : `$${x.toFixed(6)}`);
const total = (t: Tokens) => t.input + t.output + t.cacheRead + t.cacheWrite + t.other;
const pct = (a: number, b: number) => `${(((a - b) / b) * 100).toFixed(3)}%`;

function sum(rows: ModelRow[]): Tokens {
  const t: Tokens = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, other: 0 };
  for (const r of rows) for (const k of Object.keys(t) as Array<keyof Tokens>) t[k] += r.tokens[k];
  return t;
}

/**
 * What the long-context requests add to our cost beyond ccusage's way: the dataset (as Anthropic
 * bills) prices every token of a request whose input passes 200k at the long-context rates; LiteLLM's
 * tiers, which ccusage applies, count each kind on its own and only beyond 200k of that kind.
 */
function longContextExtra(key: string, requests: LongContext[]): number {
  const table = priceTable();
  let extra = 0;
  for (const r of requests) {
    if (modelKey(r.model) !== key) continue;
    const rate = table.lookup(r.model, r.at);
    if (rate) extra += rate.cost(r.usage, true) - rate.cost(r.usage, false);
  }
  return extra;
}

export function compare(mine: ReturnType<typeof ours>, cc: ModelRow[], longContext: LongContext[]): void {
  const keys = [...new Set([...mine.rows, ...cc].map((r) => modelKey(r.name)))].sort();
  console.log(
    `\n${'model'.padEnd(22)} ${'tokens (ours: in / out / reasoning / cache read / cache write)'.padEnd(52)} ${'total'.padStart(9)} ${'ccusage'.padStart(9)} eq   ${'the-loop'.padStart(11)} ${'ccusage 20'.padStart(11)}  diff`,
  );
  let allEqual = true;
  const notes: string[] = [];
  for (const key of keys) {
    const a = mine.rows.filter((r) => modelKey(r.name) === key);
    const b = cc.filter((r) => modelKey(r.name) === key);
    const [ta, tb] = [sum(a), sum(b)];
    // Input and cache kinds mean the same in both; output and reasoning are compared in the total.
    const equal =
      a.length > 0 &&
      b.length > 0 &&
      total(ta) === total(tb) &&
      ta.input === tb.input &&
      ta.cacheRead === tb.cacheRead &&
      ta.cacheWrite === tb.cacheWrite;
    if (a.length > 0 && b.length > 0) allEqual &&= equal;
    const costA =
      a.length === 0 || a.some((r) => r.cost === null) ? null : a.reduce((s, r) => s + (r.cost ?? 0), 0);
    const missing = b.some((r) => r.missing === true);
    const costB = b.length === 0 || missing ? null : b.reduce((s, r) => s + (r.cost ?? 0), 0);
    const diff = costA !== null && costB !== null && costB > 0 ? pct(costA, costB) : '—';
    const kinds = [ta.input, ta.output, ta.other, ta.cacheRead, ta.cacheWrite].map(n).join(' / ');
    console.log(
      `${key.padEnd(22)} ${(a.length ? kinds : '—').padEnd(52)} ${(a.length ? n(total(ta)) : '—').padStart(9)} ${(b.length ? n(total(tb)) : '—').padStart(9)} ${a.length && b.length ? (equal ? 'yes' : 'NO ') : '—  '}  ${usd(costA).padStart(11)} ${(b.length === 0 ? '—' : missing ? 'unpriced' : usd(costB)).padStart(11)}  ${diff}`,
    );
    const extra = longContextExtra(key, longContext);
    if (costA !== null && costB !== null && extra > 0) {
      notes.push(
        `${key}: its request(s) over 200k input tokens cost $${extra.toFixed(6)} more by the dataset's rule (every token of the request at the long-context rate, as Anthropic bills) than by LiteLLM's per-kind tiers ccusage applies (none of the request's kinds passes 200k on its own); without that: $${(costA - extra).toFixed(6)} vs $${costB.toFixed(6)}, ${pct(costA - extra, costB)}`,
      );
    }
  }
  console.log(`\ntoken totals equal for every model both count: ${allEqual ? 'yes' : 'NO'}`);
  console.log(
    "(a model only one side has: the gateway meters every response, also Gemini CLI's routing call, which its chat file does not record)",
  );
  for (const note of notes) console.log(`difference explained — ${note}`);
  console.log(`unknown to the-loop (named under "Not included"): ${mine.unpriced.join(', ') || 'none'}`);
  console.log(
    `the-loop prices from ${mine.dataset}; ccusage 20.0.24 from its bundled LiteLLM table (--offline)`,
  );
}
