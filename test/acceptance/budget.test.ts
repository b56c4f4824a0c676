import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { fakeEngineConfig, runCli } from '../helpers/cli.js';
import {
  type DaemonProcess,
  fixture,
  followDeliveries,
  sendDelivery,
  startDaemonProcess,
} from '../helpers/daemon.js';

/**
 * Budgets, through a real daemon and signed webhooks: a session with a 2-turn ceiling runs two
 * turns; the third delivery is held (queued, with the reason), the session shows `over-budget`;
 * `the-loop sessions resume --raise 1` releases it and it runs.
 */
const SECRET = 'webhook-secret-for-budgets-0123456789';
const WI = 'github:acme/widgets#15';

describe('budgets: a 2-turn ceiling holds the third delivery until resume --raise', () => {
  let root: string;
  let daemon: DaemonProcess;
  let env: Record<string, string>;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-budget-'));
    const state = join(root, 'engine-state');
    const repo = join(root, 'widgets');
    mkdirSync(state);
    mkdirSync(repo);
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        ...fakeEngineConfig(state),
        dataDir: 'data',
        webhook: { secret: SECRET },
        routing: { triggers: { labels: ['the-loop'] } },
        repos: { 'acme/widgets': { path: repo } },
        budgets: { session: { maxTurns: 2 } },
        dispatch: { pollSeconds: 0.2 },
      }),
    );
    env = { THE_LOOP_CONFIG: join(root, 'config.yaml') };
    daemon = await startDaemonProcess({ cwd: root, env });
  }, 60_000);

  afterAll(async () => {
    await daemon?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  const cli = (args: string[]) => runCli(args, { cwd: root, env });
  const { delivery, until, settled } = followDeliveries(cli);

  it('runs two turns, holds the third, and releases it on resume --raise', async () => {
    const first = await sendDelivery(daemon.webhookUrl, SECRET, 'issues', fixture('issues.labeled'));
    expect(await settled(first.id)).toBe('done');
    const second = await sendDelivery(
      daemon.webhookUrl,
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
    );
    expect(await settled(second.id)).toBe('done');

    // The ceiling is reached after the second turn: the session shows it at once.
    const list = await cli(['sessions', 'list']);
    expect(list.stdout).toMatch(/github:acme\/widgets#15\s+fake\s+process\s+-\s+over-budget\s+2/);

    const third = await sendDelivery(
      daemon.webhookUrl,
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
    );
    expect(third.status).toBe(202);
    const held = await until('the third delivery to be held', async () => {
      const d = await delivery(third.id);
      return d.reason?.startsWith('held: ') ? d : undefined;
    });
    expect(held).toMatchObject({ status: 'queued' });
    expect(held.reason).toMatch(/turn ceiling reached: 2 turns of 2 turns \(session\)/);
    // Held, not run: still two turns.
    const show = JSON.parse((await cli(['sessions', 'show', WI, '--json'])).stdout) as {
      session: { hold: { kind: string; dimension: string; used: number; limit: number } | null };
      turns: unknown[];
    };
    expect(show.turns).toHaveLength(2);
    expect(show.session.hold).toMatchObject({ kind: 'over-budget', dimension: 'turns', used: 2, limit: 2 });
    const text = await cli(['sessions', 'show', WI]);
    expect(text.stdout).toMatch(/held, over-budget: turn ceiling reached/);

    // Resuming needs a raise, in the ceiling's unit; bad amounts are refused and change nothing.
    const bare = await cli(['sessions', 'resume', WI]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/over budget.*\n.*--raise <turns>/s);
    for (const bad of ['0', '-1', '1.5', 'lots', '1e99']) {
      const res = await cli(['sessions', 'resume', WI, '--raise', bad]);
      expect(res.code, bad).toBe(2);
      expect(res.stderr).toMatch(/--raise takes a positive whole number of turns/);
    }
    expect((await delivery(third.id)).status).toBe('queued');

    const resumed = await cli(['sessions', 'resume', WI, '--raise', '1']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(/resumed; session ceiling raised by 1 turns/);
    expect(await settled(third.id)).toBe('done');
    expect((await delivery(third.id)).reason).toBeNull();
    const after = JSON.parse((await cli(['sessions', 'show', WI, '--json'])).stdout) as {
      session: { hold: unknown; budgetRaise: Record<string, number> };
      turns: unknown[];
    };
    expect(after.turns).toHaveLength(3);
    expect(after.session.budgetRaise).toEqual({ turns: 1 });
    // The raised ceiling (3) is reached again: held again, and says so.
    expect(after.session.hold).toMatchObject({ kind: 'over-budget', used: 3, limit: 3 });
  }, 120_000);

  it('`the-loop run` on a held session says why and leaves the delivery queued', async () => {
    const res = await cli(['run', WI, 'one more thing']);
    expect(res.code).toBe(1);
    expect(res.stdout).toMatch(/⏸ held: turn ceiling reached: 3 turns of 3 turns \(session\)/);
    expect(res.stdout).toMatch(/the-loop sessions resume github:acme\/widgets#15 --raise <amount>/);
    // A second one, queued behind the first held delivery, says so too (it never hangs).
    const again = await cli(['run', WI, 'and another']);
    expect(again.code).toBe(1);
    expect(again.stdout).toMatch(/⏸ held: turn ceiling reached/);
  }, 60_000);
});
