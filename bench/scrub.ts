/**
 * Throughput of the secret scrubber (every form: whole, runs of 12, reversed, base64) against the
 * anchor: the scrubber it replaced, which masked whole values only (`includes`, then split/join per
 * value), on the same text with the same secrets, measured side by side in the same run.
 *
 *   npm run bench:scrub            (MB = 10^6 characters; corpus ≈ 32 MB of recorded engine events)
 *
 * The corpus repeats real recorded Claude Code output (test/fixtures/streams/claude/*.jsonl), one
 * line at a time as the runners scrub it, with 8 keys registered and one planted every 1,000 lines.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SecretScrubber } from '../src/log/secret-scrubber.js';

const TARGET = Number(process.env.BENCH_BYTES ?? 32e6);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

const dir = join(import.meta.dirname, '../test/fixtures/streams/claude');
const sample = readdirSync(dir)
  .filter((f) => f.endsWith('.jsonl'))
  .flatMap((f) => readFileSync(join(dir, f), 'utf8').split('\n'))
  .filter((l) => l.trim() !== '');
const keys = Array.from({ length: 8 }, (_, i) => `sk-ant-api03-${i}${randomBytes(30).toString('base64url')}`);
const lines: string[] = [];
let size = 0;
while (size < TARGET) {
  for (const line of sample) {
    const planted =
      lines.length % 1000 === 0 ? `${line.slice(0, -1)},"k":"${keys[lines.length % 8]}"}` : line;
    lines.push(planted);
    size += planted.length;
  }
}

const anchorValues = new Set(keys);
function anchor(): number {
  let n = 0;
  for (const line of lines) {
    let out = line;
    for (const value of anchorValues) if (out.includes(value)) out = out.split(value).join('[secret]');
    n += out.length;
  }
  return n;
}

const scrubber = new SecretScrubber();
for (const key of keys) scrubber.add(key);
function ours(): number {
  let n = 0;
  for (const line of lines) n += scrubber.scrub(line).length;
  return n;
}

function time(fn: () => number): number {
  const start = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

anchor();
ours();
const a: number[] = [];
const o: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  a.push(time(anchor));
  o.push(time(ours));
}
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? Number.NaN;
const mb = size / 1e6;
const anchorMBs = mb / (median(a) / 1000);
const oursMBs = mb / (median(o) / 1000);
console.log(
  `corpus: ${mb.toFixed(1)} MB in ${lines.length.toLocaleString()} lines; 8 keys; ${ROUNDS} rounds, median`,
);
console.log(
  `anchor  whole values (includes + split/join)  ${anchorMBs.toFixed(1).padStart(7)} MB/s  (${median(a).toFixed(0)} ms)`,
);
console.log(
  `ours    every form (sampled 4-grams)          ${oursMBs.toFixed(1).padStart(7)} MB/s  (${median(o).toFixed(0)} ms)`,
);
console.log(`ratio   ours / anchor                         ${(oursMBs / anchorMBs).toFixed(2)}×`);
