/**
 * Throughput of the Claude stream-json path (LineReader + schema-checked parser → TurnEvents) against
 * the anchor: plain `JSON.parse` of the same lines, measured side by side in the same run.
 *
 *   npm run bench:parse            (MB = 10^6 bytes; corpus ≈ 64 MB of recorded events)
 *
 * The corpus repeats real recorded Claude Code output (test/fixtures/streams/claude/*.jsonl), so the
 * mix of init, assistant, tool_result and result events is what the engine really prints. Every line
 * is validated: by the parser's quick checks, which accept exactly what its zod schemas accept
 * (test/engines/protocols/claude-checks.test.ts), and by the schemas for anything they refuse.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROTOCOL_REGISTRY } from '../src/engines/protocols/index.js';
import { LineReader } from '../src/engines/protocols/line-reader.js';

const TARGET_BYTES = Number(process.env.BENCH_BYTES ?? 64e6);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CHUNK = 64 * 1024; // what a pipe typically delivers

const dir = join(import.meta.dirname, '../test/fixtures/streams/claude');
const sample = readdirSync(dir)
  .filter((f) => f.endsWith('.jsonl'))
  .map((f) => readFileSync(join(dir, f), 'utf8'))
  .join('')
  .split('\n')
  .filter((l) => l.trim() !== '');
const lines: string[] = [];
let bytes = 0;
while (bytes < TARGET_BYTES) {
  for (const line of sample) {
    lines.push(line);
    bytes += Buffer.byteLength(line) + 1;
  }
}
const corpus = Buffer.from(`${lines.join('\n')}\n`);
const chunks: Buffer[] = [];
for (let i = 0; i < corpus.length; i += CHUNK) chunks.push(corpus.subarray(i, i + CHUNK));

function anchor(): number {
  // The floor: decode each line and JSON.parse it, nothing else (lines pre-split, no validation).
  let n = 0;
  for (const line of lines) if (JSON.parse(line)) n += 1;
  return n;
}

function ours(): number {
  let events = 0;
  const parser = PROTOCOL_REGISTRY['claude-stream-json'].create();
  const reader = new LineReader({
    maxLineBytes: 16 * 1024 * 1024,
    onLine: (line) => {
      events += parser.push(line).length;
    },
    onOversized: () => {},
  });
  for (const chunk of chunks) reader.push(chunk);
  reader.end();
  return events;
}

function time(fn: () => number): { ms: number; out: number } {
  const start = process.hrtime.bigint();
  const out = fn();
  return { ms: Number(process.hrtime.bigint() - start) / 1e6, out };
}

// Warm up both paths (JIT), then alternate rounds so drift affects both equally.
anchor();
ours();
const a: number[] = [];
const o: number[] = [];
let events = 0;
for (let r = 0; r < ROUNDS; r++) {
  a.push(time(anchor).ms);
  const run = time(ours);
  o.push(run.ms);
  events = run.out;
}
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? Number.NaN;
const mb = corpus.length / 1e6;
const anchorMBs = mb / (median(a) / 1000);
const oursMBs = mb / (median(o) / 1000);
console.log(
  `corpus: ${mb.toFixed(1)} MB, ${lines.length.toLocaleString()} lines from ${sample.length} recorded events; ${ROUNDS} rounds, median`,
);
console.log(
  `anchor  JSON.parse per line          ${anchorMBs.toFixed(1).padStart(7)} MB/s  (${median(a).toFixed(0)} ms)`,
);
console.log(
  `ours    LineReader + claude parser   ${oursMBs.toFixed(1).padStart(7)} MB/s  (${median(o).toFixed(0)} ms, ${events.toLocaleString()} turn events)`,
);
console.log(
  `ratio   ours / anchor                ${(oursMBs / anchorMBs).toFixed(2)}× (time ${(median(o) / median(a)).toFixed(2)}× the anchor's)`,
);
