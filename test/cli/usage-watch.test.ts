/**
 * Transcripts imported as they are written, through the real daemon and the real CLI: 10 MB appended
 * to a watched transcript show in `the-loop usage --json` counted once, also when the daemon is
 * restarted with a line half written; a usage.watch directory that does not exist is said at start
 * and the daemon runs all the same. (How fast: `npm run bench:watch`; tests assert no timing.)
 */
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { fakeEngineConfig, runCli } from '../helpers/cli.js';
import { type DaemonProcess, startDaemonProcess } from '../helpers/daemon.js';
import {
  addTotals,
  assistantLine,
  reportTotals,
  type Totals,
  transcriptBytes,
} from '../helpers/transcripts.js';

const SECRET = 'test-webhook-secret-0123456789abcdef';

let root: string;
let daemons: DaemonProcess[];

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'the-loop-usage-watch-'));
  daemons = [];
  // Claude Code's projects folder of this environment (CLAUDE_CONFIG_DIR), and a usage.watch one.
  mkdirSync(join(root, 'claude', 'projects', '-work-repo'), { recursive: true });
  mkdirSync(join(root, 'more', 'p'), { recursive: true });
  const config = {
    ...fakeEngineConfig(join(root, 'engine-state')),
    dataDir: 'data',
    webhook: { secret: SECRET },
    usage: { watch: ['more', join(root, 'not-there')] },
  };
  writeFileSync(join(root, 'config.yaml'), stringify(config));
});
afterEach(async () => {
  for (const d of daemons) await d.stop();
  rmSync(root, { recursive: true, force: true });
});

const env = () => ({ THE_LOOP_CONFIG: join(root, 'config.yaml'), CLAUDE_CONFIG_DIR: join(root, 'claude') });

async function startDaemon(): Promise<DaemonProcess> {
  const daemon = await startDaemonProcess({ cwd: root, env: env() });
  daemons.push(daemon);
  return daemon;
}

async function usageTotals(): Promise<Totals> {
  const res = await runCli(['usage', '--json'], { cwd: root, env: env() });
  expect(res.code, res.stderr).toBe(0);
  return reportTotals(JSON.parse(res.stdout));
}

/** Poll `usage --json` until the totals reach `expected` (no timing asserted), then check they stay. */
async function usageReaches(expected: Totals): Promise<void> {
  const end = Date.now() + 60_000;
  let have = await usageTotals();
  while (have.requests < expected.requests || have.output < expected.output) {
    if (Date.now() > end)
      throw new Error(`usage never reached ${JSON.stringify(expected)}: ${JSON.stringify(have)}`);
    await new Promise((r) => setTimeout(r, 200));
    have = await usageTotals();
  }
  await new Promise((r) => setTimeout(r, 500));
  expect(await usageTotals()).toEqual(expected);
}

describe('the daemon imports transcripts as they are written', () => {
  it('10 MB appended to a watched transcript show in usage --json, counted once', async () => {
    const file = join(root, 'claude', 'projects', '-work-repo', 'session-1.jsonl');
    const start = transcriptBytes(200_000, 'start');
    writeFileSync(file, start.text);
    const daemon = await startDaemon();
    expect(daemon.output()).toContain(`transcripts imported as written from ${join(root, 'more')}`);
    await usageReaches(start.totals);
    const big = transcriptBytes(10 * 1024 * 1024, 'big');
    appendFileSync(file, big.text);
    let expected = addTotals(start.totals, big.totals);
    await usageReaches(expected);
    // A usage.watch directory (relative to the config file), a new file in it.
    const more = transcriptBytes(100_000, 'more');
    writeFileSync(join(root, 'more', 'p', 'other.jsonl'), more.text);
    expected = addTotals(expected, more.totals);
    await usageReaches(expected);
    // The same requests again (a resumed session repeats its history) add nothing.
    appendFileSync(join(root, 'more', 'p', 'other.jsonl'), more.text);
    await usageReaches(expected);
  }, 180_000);

  it('a restart with a line half written counts it once, and catches up on what came meanwhile', async () => {
    const file = join(root, 'claude', 'projects', '-work-repo', 'session-2.jsonl');
    const first = transcriptBytes(5 * 1024 * 1024, 'r1');
    const line = assistantLine({ id: 'msg_split', input: 11, output: 13, cacheRead: 17, cacheCreation: 19 });
    writeFileSync(file, first.text + line.slice(0, 150));
    const daemon = await startDaemon();
    await usageReaches(first.totals);
    expect(await daemon.stop()).toBe(0);
    // While it is down: more of the line, then its end and more lines.
    appendFileSync(file, line.slice(150, 300));
    const second = await startDaemon();
    await usageReaches(first.totals);
    const rest = transcriptBytes(5 * 1024 * 1024, 'r2');
    await second.stop();
    appendFileSync(file, `${line.slice(300)}\n${rest.text}`);
    await startDaemon();
    const split = { requests: 1, input: 11, output: 13, cacheRead: 17, cacheCreation: 19 };
    await usageReaches(addTotals(addTotals(first.totals, split), rest.totals));
  }, 180_000);

  it('killed (SIGKILL) while it imports: the restart counts every request once', async () => {
    const file = join(root, 'more', 'p', 'killed.jsonl');
    writeFileSync(file, '');
    const daemon = await startDaemon();
    let expected = { requests: 0, input: 0, output: 0, cacheRead: 0, cacheCreation: 0 };
    for (const prefix of ['k1', 'k2', 'k3']) {
      const t = transcriptBytes(4 * 1024 * 1024, prefix);
      appendFileSync(file, t.text);
      expected = addTotals(expected, t.totals);
    }
    // Whatever it had imported by now (committed rows, a cursor saved or not), it dies here.
    daemon.child.kill('SIGKILL');
    await daemon.stop();
    await startDaemon();
    await usageReaches(expected);
  }, 180_000);

  it('a usage.watch directory that does not exist is a warning; the daemon starts and watches the rest', async () => {
    const daemon = await startDaemon();
    expect(daemon.output()).toMatch(
      /warning: usage\.watch: .*not-there does not exist \(yet\): watched once it does/,
    );
    const t = transcriptBytes(50_000, 'rest');
    writeFileSync(join(root, 'more', 'p', 's.jsonl'), t.text);
    await usageReaches(t.totals);
  }, 120_000);
});
