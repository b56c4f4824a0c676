import type { Migration } from './index.js';

/**
 * The 1-hour part of each row's cache writes. Anthropic bills a 1-hour cache write at twice the
 * input price and a 5-minute one at 1.25×; Claude Code's transcripts and Anthropic's responses say
 * how many of a request's writes were which (`usage.cache_creation.ephemeral_1h_input_tokens`), and
 * the row is priced with it. A subset of `cache_creation_tokens`, never added to it: totals stay as
 * they are. Rows from before (and sources that do not split) hold 0 — all priced at the 5-minute rate.
 */
export const cacheWrite1h: Migration = {
  version: 18,
  name: 'cache-write-1h',
  sql: `
ALTER TABLE usage_ledger ADD COLUMN cache_creation_1h_tokens INTEGER NOT NULL DEFAULT 0;
`,
};
