import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain CommonJS module of bin/ (no types)
import { BUNDLE, READ_BUNDLE, readsOnly } from '../../bin/cli-load.js';
import type { LedgerEntry } from '../../src/core/ports/ledger.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { priceTable } from '../../src/ledger/pricing.js';
import { openDb } from '../../src/store/db.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import { makeProject, runCli } from '../helpers/cli.js';

const argv = (...args: string[]) => ['node', 'the-loop', ...args];

/** The reading commands, as a person types them: each runs from the read bundle. */
const SHAPES = [
  ['sessions', 'list'],
  ['sessions', 'list', '--all'],
  ['sessions', 'list', '--json'],
  ['sessions', 'list', '-w', 'github:octo/widgets#1'],
  ['sessions', 'list', '--help'],
  ['events', 'list'],
  ['events', 'list', '--json'],
  ['events', 'show', 'd-1'],
  ['events', 'show', 'd-none'],
  ['usage'],
  ['usage', '--json'],
  ['usage', '--by', 'model'],
  ['acts'],
  ['acts', '--json'],
  ['--data-dir', 'nowhere-yet', 'sessions', 'list'],
];

describe('the read bundle (dist/cli-read.cjs)', () => {
  it('serves exactly the reading commands; the rest go to the whole CLI', () => {
    for (const shape of SHAPES) expect(readsOnly(argv(...shape)), shape.join(' ')).toBe(true);
    expect(readsOnly(argv('-c', 'x.yaml', 'acts', '--json'))).toBe(true);
    for (const other of [
      ['sessions', 'show', 'x'],
      ['sessions', 'attach', 'x'],
      ['sessions', '--json', 'list'],
      ['sessions'],
      ['events', 'retry', 'x'],
      ['events'],
      ['usage', 'scan'],
      ['usage', '--json', 'scan', 'dir'],
      ['run', 'github:o/r#1', 'usage'],
      ['config', 'init'],
      ['serve'],
      ['help', 'usage'],
      ['--help'],
      [],
    ])
      expect(readsOnly(argv(...other)), other.join(' ')).toBe(false);
  });

  it('is the smaller file', () => {
    expect(statSync(READ_BUNDLE).size).toBeLessThan(statSync(BUNDLE).size * 0.6);
  });

  describe('answers each reading command as the whole CLI does (tsc’s dist/, unbundled)', () => {
    let project: ReturnType<typeof makeProject>;
    beforeAll(async () => {
      project = makeProject({ dataDir: 'data' });
      const db = openDb(join(project.dir, '.the-loop/data/the-loop.db'));
      const sessions = new SqliteSessionStore(db, { scrub: (t) => t });
      for (const n of [1, 2]) {
        const s = await sessions.create({
          workItem: `github:octo/widgets#${n}`,
          slug: `github-octo-widgets-${n}`,
          engine: 'claude',
          runner: 'process',
          engineSessionId: null,
          cwd: project.dir,
          credentialKind: null,
          credentialEnv: null,
        });
        // A turn running in this (live) process: nothing for a reader to recover.
        await sessions.beginTurn(s.id, { promptDigest: 'sha256:x', promptBytes: 1, meter: 'transcript' });
      }
      await new SqliteInbox(db).acceptMany([
        {
          id: 'd-1',
          source: 'github',
          event: 'issue_comment',
          action: 'created',
          body: '{"comment":{"body":"@the-loop hi"}}',
          routed: { action: 'ignore', workItem: 'github:octo/widgets#1', reason: 'seeded' },
        },
      ]);
      const at = new Date(Date.now() - 3_600_000).toISOString();
      const entry = (i: number, model: string): LedgerEntry => ({
        meter: 'transcript',
        sourceId: `req_${i}`,
        at,
        sessionId: null,
        workItem: 'github:octo/widgets#1',
        turnId: null,
        engine: 'claude',
        runner: 'process',
        model,
        usage: {
          inputTokens: 100,
          outputTokens: 20,
          cacheReadTokens: 300,
          cacheCreationTokens: 0,
          reasoningTokens: 0,
        },
        payer: { kind: 'subscription', id: null },
      });
      await new Ledger(new SqliteLedgerStore(db), priceTable()).add([
        entry(1, 'claude-opus-4-8'),
        entry(2, 'claude-haiku-4-5-20251001'),
        entry(3, 'claude-imaginary-9-9'),
      ]);
      db.close();
    });
    afterAll(() => project.cleanup());

    it.each(SHAPES.map((s) => [s.join(' '), s]))('%s', async (_name, shape) => {
      const read = await runCli(shape as string[], { cwd: project.dir });
      const whole = await runCli(shape as string[], { cwd: project.dir, env: { THE_LOOP_UNBUNDLED: '1' } });
      expect(read.stderr).not.toMatch(/internal error|unexpected error/);
      // usage --json names its window to the millisecond: the two runs' clocks differ there only.
      const same = (text: string) => text.replace(/"(since|until)": "[^"]*"/g, '"$1": "…"');
      expect({ code: read.code, stdout: same(read.stdout), stderr: read.stderr }).toEqual({
        code: whole.code,
        stdout: same(whole.stdout),
        stderr: whole.stderr,
      });
    });
  });
});
