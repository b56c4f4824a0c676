/**
 * `npm run bench:prune`: inbox retention on a long history. N finished deliveries, all older than
 * the retention period, are pruned batch by batch as the daemon does (100 rows per transaction);
 * printed: the slowest batch (how long the daemon's event loop waits at most), the median batch, and
 * the whole pass. The anchor is a batch's share of the history: a pass that re-read every row per
 * batch would grow with N² (the slowest batch grows with N); this one stays flat.
 *
 *   BENCH_PRUNE_ROWS=200000 npm run bench:prune
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDb } from '../src/store/db.js';
import { SqliteInbox } from '../src/store/sqlite/inbox.js';

const ROWS = Number(process.env.BENCH_PRUNE_ROWS ?? 200_000);
const NOW = new Date('2026-03-31T12:00:00.000Z');
const OLD = new Date(NOW.getTime() - 40 * 24 * 60 * 60 * 1000);

async function seed(inbox: SqliteInbox, rows: number): Promise<void> {
  const body = JSON.stringify({ pad: 'x'.repeat(2000) });
  await inbox.acceptMany(
    Array.from({ length: rows }, (_, i) => ({
      id: `d-${i}`,
      source: 'github' as const,
      event: 'issue_comment',
      action: 'created',
      body,
      routed: { action: 'ignore' as const, workItem: 'github:octo/widgets#1', reason: 'ignored: bench' },
    })),
  );
}

async function run(
  rows: number,
): Promise<{ batches: number; maxMs: number; medianMs: number; totalMs: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-bench-prune-'));
  try {
    const db = openDb(join(dir, 'the-loop.db'));
    const inbox = new SqliteInbox(db, { now: () => OLD });
    await seed(inbox, rows);
    const times: number[] = [];
    const started = performance.now();
    for (;;) {
      const t = performance.now();
      const report = await inbox.prune({ retainDays: 30, now: NOW });
      times.push(performance.now() - t);
      if (!report.more) break;
    }
    const totalMs = performance.now() - started;
    db.close();
    const sorted = [...times].sort((a, b) => a - b);
    return {
      batches: times.length,
      maxMs: sorted[sorted.length - 1] ?? 0,
      medianMs: sorted[Math.floor(sorted.length / 2)] ?? 0,
      totalMs,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const small = await run(Math.max(1000, Math.floor(ROWS / 10)));
const large = await run(ROWS);
const fmt = (n: number) => n.toFixed(1);
console.log(
  `inbox prune, ${ROWS / 10} and ${ROWS} finished old deliveries (2 KB bodies), 100 rows per batch`,
);
console.log(
  `  ${ROWS / 10} rows: ${small.batches} batches, slowest ${fmt(small.maxMs)} ms, median ${fmt(small.medianMs)} ms, total ${fmt(small.totalMs)} ms`,
);
console.log(
  `  ${ROWS} rows: ${large.batches} batches, slowest ${fmt(large.maxMs)} ms, median ${fmt(large.medianMs)} ms, total ${fmt(large.totalMs)} ms`,
);
console.log(
  `  median batch at 10× the history: ${fmt(large.medianMs / small.medianMs)}× (flat ≈ 1×; a pass that re-reads the history ≈ 10×)`,
);
