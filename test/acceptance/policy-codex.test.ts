/**
 * A breach, with an engine that has no pre-tool hook: the real Codex CLI (process runner) against its
 * mock, through a real daemon and signed webhooks, pushes to the protected `main` of a repository
 * whose `origin` is a local bare repository. The act is found in the turn's events and recorded as a
 * breach; the session is paused (`sessions list`, `acts`); the next webhook delivery is held; `the-loop
 * sessions resume` releases it and it runs.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { prepareCodexHome } from '../fixtures/engine-homes/codex.js';
import { startOpenAIMock } from '../fixtures/mock-apis/openai.js';
import type { MockApi } from '../fixtures/mock-apis/types.js';
import { runCli } from '../helpers/cli.js';
import {
  type DaemonProcess,
  fixture,
  followDeliveries,
  sendDelivery,
  startDaemonProcess,
} from '../helpers/daemon.js';
import { git, remoteHead, repoWithRemote } from '../helpers/git.js';
import { realBinary } from './helpers.js';

const SECRET = 'webhook-secret-for-breaches-0123456789';
const WI = 'github:acme/widgets#15';

describe('a breach by an engine without hooks (Codex) pauses the session until resume', () => {
  let root: string;
  let repo: string;
  let remote: string;
  let daemon: DaemonProcess;
  let mock: MockApi;
  let env: Record<string, string>;
  let canary: string;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-breach-'));
    ({ work: repo, remote } = repoWithRemote(root, 'widgets'));

    mock = await startOpenAIMock({
      script: [
        { kind: 'shell', command: 'git push origin main' },
        { kind: 'text', text: 'Pushed.' },
        { kind: 'text', text: 'Second turn, after the resume.' },
      ],
    });
    const home = prepareCodexHome(join(root, 'engine'), mock.url, repo);
    canary = `canary-breach-${Math.random().toString(36).slice(2)}-SECRET`;
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        dataDir: 'data',
        defaults: { engine: 'codex', backstopSeconds: 120, killGraceSeconds: 2 },
        // Without the gateway and the sandbox, a forbidden act is found after the turn: a breach.
        // (Through the gateway it is refused at the wire: test/acceptance/gateway-*.test.ts.)
        gateway: { enabled: false },
        sandbox: { mode: 'none' },
        webhook: { secret: SECRET },
        routing: { engine: 'codex', triggers: { labels: ['the-loop'] } },
        repos: { 'acme/widgets': { path: repo } },
        dispatch: { pollSeconds: 0.2 },
        engines: { codex: { binary: realBinary('codex'), env: { ...home.env, GIT_TERMINAL_PROMPT: '0' } } },
      }),
    );
    env = { THE_LOOP_CONFIG: join(root, 'config.yaml'), [home.credentialEnv]: canary };
    daemon = await startDaemonProcess({ cwd: root, env });
  }, 120_000);

  afterAll(async () => {
    await daemon?.stop();
    await mock?.close();
    rmSync(root, { recursive: true, force: true });
  });

  const cli = (args: string[]) => runCli(args, { cwd: root, env });
  const { delivery, until, settled } = followDeliveries(cli);

  it('records the push to main as a breach, holds the next delivery, and releases it on resume', async () => {
    const first = await sendDelivery(daemon.webhookUrl, SECRET, 'issues', fixture('issues.labeled'));
    expect(await settled(first.id)).toBe('done');
    // It happened: the remote's main moved to the local commit.
    expect(remoteHead(remote)).toBe(git(repo, 'rev-parse', 'HEAD'));

    const acts = JSON.parse((await cli(['acts', '--json'])).stdout) as Array<{
      kind: string;
      outcome: string;
      verdict: string;
      breach: boolean;
      engine: string;
      detail: { branches?: string[]; protected?: boolean };
    }>;
    expect(acts).toHaveLength(1);
    expect(acts[0]).toMatchObject({
      kind: 'git-push',
      outcome: 'succeeded',
      verdict: 'deny',
      breach: true,
      engine: 'codex',
      detail: { branches: ['main'], protected: true },
    });
    const actsText = await cli(['acts']);
    expect(actsText.stdout).toMatch(/1 act · 1 breach/);
    expect(actsText.stdout).toMatch(/git-push\s+succeeded\s+BREACH/);

    // Paused: shown in sessions list and show.
    const list = await cli(['sessions', 'list']);
    expect(list.stdout).toMatch(/github:acme\/widgets#15\s+codex\s+process\s+-\s+breach/);
    const show = JSON.parse((await cli(['sessions', 'show', WI, '--json'])).stdout) as {
      session: { hold: { kind: string; reason: string } | null };
      turns: unknown[];
    };
    expect(show.session.hold).toMatchObject({ kind: 'breach' });
    expect(show.session.hold?.reason).toMatch(/protected branch main/);

    // The next delivery is held, not run.
    const second = await sendDelivery(
      daemon.webhookUrl,
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
    );
    expect(second.status).toBe(202);
    const held = await until('the next delivery to be held', async () => {
      const d = await delivery(second.id);
      return d.reason?.startsWith('held: ') ? d : undefined;
    });
    expect(held).toMatchObject({ status: 'queued' });
    expect(held.reason).toMatch(/protected branch main/);
    expect(mock.modelTurns()).toHaveLength(2);

    // A person resumes it: the held delivery runs.
    const resumed = await cli(['sessions', 'resume', WI]);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(/resumed after the policy breach/);
    expect(await settled(second.id)).toBe('done');
    expect(mock.modelTurns()).toHaveLength(3);
    const after = JSON.parse((await cli(['sessions', 'show', WI, '--json'])).stdout) as {
      session: { hold: unknown };
      turns: unknown[];
    };
    expect(after.session.hold).toBeNull();
    expect(after.turns).toHaveLength(2);
  }, 240_000);
});
