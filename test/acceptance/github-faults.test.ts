/**
 * GitHub failing never touches the turn (issue 18): through a real daemon (the fake engine)
 * answering as a GitHub App against the fake GitHub API, each fault is a clear log line and a
 * visible state (`events show`), and the turn runs all the same: a deleted triggering comment (its
 * reaction 404s), GitHub refusing the tracking comment (403), 5xx answers (retried), an edit GitHub
 * will not take (422: the next state lands), an installation removed (no token can be minted).
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { stringify } from 'yaml';
import { FakeGitHub } from '../fixtures/fake-github.js';
import { fakeEngineConfig, runCli } from '../helpers/cli.js';
import {
  type DaemonProcess,
  fixture,
  followDeliveries,
  sendDelivery,
  startDaemonProcess,
} from '../helpers/daemon.js';

const SECRET = 'test-webhook-secret-github-faults-0123';
const APP_ID = 6161;
const INSTALLATION = 91;
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const KEY_PEM = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

interface Shown {
  delivery: { status: string };
  github: {
    reacted: boolean;
    commentId: number | null;
    phase: string | null;
    final: boolean;
    lastError: string | null;
  } | null;
}

describe('GitHub failing: a log line and a visible state, never a lost turn', () => {
  let root: string;
  let github: FakeGitHub;
  let daemon: DaemonProcess;
  const env = () => ({ THE_LOOP_CONFIG: join(root, 'config.yaml'), THE_LOOP_APP_KEY: KEY_PEM });
  const cli = (args: string[]) => runCli(args, { cwd: root, env: env() });
  const { until, settled } = followDeliveries(cli);
  const shown = async (id: string) =>
    JSON.parse((await cli(['events', 'show', id, '--json'])).stdout) as Shown;
  const log = () => readFileSync(join(root, 'data', 'the-loop.log'), 'utf8');
  let nextId = 8_000_000;

  /** A comment trigger on issue #n; `seed: false` leaves the comment out of the fake (deleted). */
  async function trigger(n: number, seed = true) {
    // biome-ignore lint/suspicious/noExplicitAny: a fixture payload, edited freely.
    const payload = fixture('issue_comment.created') as Record<string, any>;
    payload.issue.number = n;
    // Far from the ids the fake gives its own comments (it counts on from the largest it has).
    payload.comment.id = nextId;
    nextId += 100_000;
    payload.installation = { id: INSTALLATION };
    if (seed) github.addComment('acme', 'widgets', n, payload.comment.body, { id: payload.comment.id });
    const sent = await sendDelivery(daemon.webhookUrl, SECRET, 'issue_comment', payload);
    expect(sent.status).toBe(202);
    return sent.id;
  }
  const trackingOf = (n: number, id: string) =>
    github.comments('acme', 'widgets', n).find((c) => c.body.includes(`delivery=${id}`));

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-gh-faults-'));
    const state = join(root, 'engine-state');
    const repo = join(root, 'widgets');
    mkdirSync(state);
    mkdirSync(repo);
    github = await FakeGitHub.start({
      appId: APP_ID,
      publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    });
    github.addInstallation(INSTALLATION, ['acme/widgets']);
    const base = fakeEngineConfig(state, {
      env: { FAKE_ENGINE_STATE: state, FAKE_ENGINE_HOLD_FILE: join(root, 'hold') },
    }) as {
      gateway: Record<string, unknown>;
    };
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        ...base,
        gateway: { ...base.gateway, github: { apiUrl: github.url } },
        dataDir: 'data',
        webhook: { secret: SECRET },
        repos: { 'acme/widgets': { path: repo } },
        dispatch: { pollSeconds: 0.2, closeGraceSeconds: 1 },
        github: {
          app: { id: APP_ID, privateKey: 'env:THE_LOOP_APP_KEY' },
          status: { editIntervalSeconds: 0.1 },
          pacing: { writeGapMs: 10, commentGapMs: 10 },
        },
      }),
    );
    daemon = await startDaemonProcess({ cwd: root, env: env() });
  }, 60_000);

  afterAll(async () => {
    await daemon?.stop();
    await github?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('a deleted triggering comment: no reaction (404, said), the turn runs and its comment ends finished', async () => {
    const id = await trigger(30, false);
    expect(await settled(id)).toBe('done');
    const c = await until('the comment to finish', async () =>
      /Finished/.test(trackingOf(30, id)?.body ?? '') ? true : undefined,
    );
    expect(c).toBe(true);
    const s = await until('the row to be final', async () => {
      const x = await shown(id);
      return x.github?.final ? x : undefined;
    });
    expect(s.github?.lastError).toMatch(/reaction: .*404/);
    const text = (await cli(['events', 'show', id])).stdout;
    expect(text).toMatch(/github err\s+reaction: .*404/);
    expect(log()).toMatch(/could not react to the trigger/);
  }, 60_000);

  it('GitHub refusing the tracking comment (403): said once, the turn runs', async () => {
    github.failNext(
      { method: 'POST', path: /\/issues\/31\/comments$/ },
      { status: 403, body: { message: 'Resource not accessible by integration' } },
      10,
    );
    const id = await trigger(31);
    expect(await settled(id)).toBe('done');
    const s = await until('the row to say why', async () => {
      const x = await shown(id);
      return x.github?.lastError ? x : undefined;
    });
    expect(s.delivery.status).toBe('done');
    expect(s.github?.lastError).toMatch(/comment: .*403/);
    expect(log()).toMatch(/GitHub refused the tracking comment.*issues: write/);
    // Given up for this delivery: one refused create, not one per state.
    expect(github.callsTo('POST', /\/issues\/31\/comments$/)).toHaveLength(1);
  }, 60_000);

  it('5xx answers are retried, and an edit GitHub will not take (422) leaves the next state to land', async () => {
    onTestFailed(() => {
      console.log(
        github.calls
          .slice(-30)
          .map((c) => `${c.at} ${c.method} ${c.path} ${c.status}`)
          .join('\n'),
      );
      console.log(
        log()
          .split('\n')
          .filter((l) => /GitHub|rate|retry/.test(l))
          .slice(-20)
          .join('\n'),
      );
    });
    github.serverError({ method: 'PATCH', path: /\/issues\/comments\/\d+$/ }, 2);
    const id = await trigger(32);
    expect(await settled(id)).toBe('done');
    const c = await until('the comment to finish', async () => {
      const t = trackingOf(32, id);
      return t && /Finished/.test(t.body) ? t : undefined;
    });
    expect(github.calls.filter((x) => x.method === 'PATCH' && x.status >= 500).length).toBeGreaterThan(0);
    expect(c.body).toMatch(/Finished/);
    github.failNext(
      { method: 'PATCH', path: /\/issues\/comments\/\d+$/ },
      { status: 422, body: { message: 'Validation Failed' } },
      1,
    );
    const id2 = await trigger(33);
    expect(await settled(id2)).toBe('done');
    await until('the second comment to finish despite the refused edit', async () =>
      /Finished/.test(trackingOf(33, id2)?.body ?? '') ? true : undefined,
    );
  }, 60_000);

  it('an installation removed mid-session: no token, said in the log and the row; the turn runs', async () => {
    github.removeInstallation(INSTALLATION);
    const id = await trigger(34);
    expect(await settled(id)).toBe('done');
    const s = await until('the row to say why', async () => {
      const x = await shown(id);
      return x.github?.lastError ? x : undefined;
    });
    expect(s.delivery.status).toBe('done');
    expect(s.github?.lastError).toMatch(/404|installation/i);
    expect(log()).toMatch(/GitHub status/);
    expect(trackingOf(34, id)).toBeUndefined();
  }, 60_000);

  it('a private key that does not parse: serve refuses to start, naming the setting, never printing the key', async () => {
    const bad = '-----BEGIN RSA PRIVATE KEY-----\nnot-a-key-canary-77Zq\n-----END RSA PRIVATE KEY-----\n';
    const res = await runCli(['serve', '--port', '0'], {
      cwd: root,
      env: { ...env(), THE_LOOP_APP_KEY: bad },
      timeoutMs: 30_000,
    });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/github\.app\.privateKey/);
    expect(res.stdout + res.stderr).not.toContain('not-a-key-canary-77Zq');
  }, 60_000);

  it('a daemon shutdown mid-turn: its last edit says the delivery runs again, never running', async () => {
    github.addInstallation(INSTALLATION, ['acme/widgets']);
    const hold = join(root, 'hold');
    writeFileSync(hold, '');
    const id = await trigger(35);
    await until('the comment to say running', async () =>
      /Running/.test(trackingOf(35, id)?.body ?? '') ? true : undefined,
    );
    await daemon.stop();
    const c = trackingOf(35, id);
    expect(c?.body).not.toMatch(/Running/);
    expect(c?.body).toMatch(/Queued.*runs again/);
    rmSync(hold);
    daemon = await startDaemonProcess({ cwd: root, env: env() });
    expect(await settled(id)).toBe('done');
    await until('the comment to finish', async () =>
      /Finished/.test(trackingOf(35, id)?.body ?? '') ? true : undefined,
    );
  }, 90_000);
});
