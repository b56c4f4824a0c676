/**
 * GitHub failing never touches the turn (issue 18): through a real daemon (the fake engine)
 * answering as a GitHub App against the fake GitHub API, each fault is a clear log line and a
 * visible state (`events show`), and the turn runs all the same: a deleted triggering comment (its
 * reaction 404s), GitHub refusing the tracking comment (403), 5xx answers (retried), an edit GitHub
 * will not take (422: the next state lands), an installation removed (no token can be minted), a
 * private key that does not parse, and a daemon shutdown mid-turn (its last edit says it runs again).
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { type AppDaemon, INSTALLATION, startAppDaemon } from '../helpers/github-app-daemon.js';

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
  let app: AppDaemon;
  const shown = async (id: string) =>
    JSON.parse((await app.cli(['events', 'show', id, '--json'])).stdout) as Shown;
  const log = () => readFileSync(join(app.root, 'data', 'the-loop.log'), 'utf8');
  const trigger = async (n: number, seed = true) => (await app.trigger(n, { seed })).id;
  const trackingOf = (n: number, id: string) => app.trackingOf(n, id);
  const until: AppDaemon['until'] = (what, probe, tries) => app.until(what, probe, tries);
  const settled: AppDaemon['settled'] = (id) => app.settled(id);

  beforeAll(async () => {
    app = await startAppDaemon({
      prefix: 'the-loop-gh-faults-',
      status: { editIntervalSeconds: 0.1 },
      pacing: { writeGapMs: 10, commentGapMs: 10 },
      dispatch: { closeGraceSeconds: 1 },
      engineEnv: (root) => ({ FAKE_ENGINE_HOLD_FILE: join(root, 'hold') }),
    });
  }, 60_000);

  afterAll(async () => app?.close());

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
    const text = (await app.cli(['events', 'show', id])).stdout;
    expect(text).toMatch(/github err\s+reaction: .*404/);
    expect(log()).toMatch(/could not react to the trigger/);
  }, 60_000);

  it('GitHub refusing the tracking comment (403): said once, the turn runs', async () => {
    app.github.failNext(
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
    expect(app.github.callsTo('POST', /\/issues\/31\/comments$/)).toHaveLength(1);
  }, 60_000);

  it('5xx answers are retried, and an edit GitHub will not take (422) leaves the next state to land', async () => {
    app.github.serverError({ method: 'PATCH', path: /\/issues\/comments\/\d+$/ }, 2);
    const id = await trigger(32);
    expect(await settled(id)).toBe('done');
    const c = await until('the comment to finish', async () => {
      const t = trackingOf(32, id);
      return t && /Finished/.test(t.body) ? t : undefined;
    });
    expect(app.github.calls.filter((x) => x.method === 'PATCH' && x.status >= 500).length).toBeGreaterThan(0);
    expect(c.body).toMatch(/Finished/);
    app.github.failNext(
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
    app.github.removeInstallation(INSTALLATION);
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
      cwd: app.root,
      env: { ...app.env(), THE_LOOP_APP_KEY: bad },
      timeoutMs: 30_000,
    });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/github\.app\.privateKey/);
    expect(res.stdout + res.stderr).not.toContain('not-a-key-canary-77Zq');
  }, 60_000);

  it('a daemon shutdown mid-turn: its last edit says the delivery runs again, never running', async () => {
    app.github.addInstallation(INSTALLATION, ['acme/widgets']);
    const hold = join(app.root, 'hold');
    writeFileSync(hold, '');
    const id = await trigger(35);
    await until('the comment to say running', async () =>
      /Running/.test(trackingOf(35, id)?.body ?? '') ? true : undefined,
    );
    await app.daemon.stop();
    const c = trackingOf(35, id);
    expect(c?.body).not.toMatch(/Running/);
    expect(c?.body).toMatch(/Queued.*runs again/);
    rmSync(hold);
    await app.restart();
    expect(await settled(id)).toBe('done');
    await until('the comment to finish', async () =>
      /Finished/.test(trackingOf(35, id)?.body ?? '') ? true : undefined,
    );
  }, 90_000);

  it('a failure after the comment was created (the head lookup 5xx) never makes a second comment', async () => {
    app.github.addPull('acme', 'widgets', 40, 'f00d'.padEnd(40, '0'));
    // The head of the pull request cannot be had for a while: the refresh that made the comment fails.
    app.github.failNext(
      { method: 'GET', path: /\/pulls\/40$/ },
      { status: 502, body: { message: 'bad gateway' } },
      4,
    );
    const { id } = await app.trigger(40, { pull: true });
    expect(await app.settled(id)).toBe('done');
    const run = await app.until(
      'the check run to complete',
      async () => {
        const r = app.github.checkRuns.find((x) => x.external_id === id);
        return r?.status === 'completed' ? r : undefined;
      },
      600,
    );
    expect(run.head_sha).toBe('f00d'.padEnd(40, '0'));
    const ours = app.github.comments('acme', 'widgets', 40).filter((c) => c.body.includes(`delivery=${id}`));
    expect(ours).toHaveLength(1);
    expect(ours[0]?.body).toMatch(/Finished/);
    expect(app.github.callsTo('POST', /\/issues\/40\/comments$/)).toHaveLength(1);
  }, 90_000);

  it('a failed delivery run again (events retry) reopens its comment: one comment, the new run said', async () => {
    const { id } = await app.trigger(41, { body: '@the-loop mode:crash please' });
    expect(await app.settled(id)).toBe('failed');
    await app.until('the comment to say failed', async () =>
      /Failed/.test(app.trackingOf(41, id)?.body ?? '') ? true : undefined,
    );
    const retried = await app.cli(['events', 'retry', id]);
    expect(retried.code, retried.stderr).toBe(0);
    expect(await app.settled(id)).toBe('failed');
    await app.until('the second run to be said', async () =>
      /Failed\*\* turn 2/.test(app.trackingOf(41, id)?.body ?? '') ? true : undefined,
    );
    const ours = app.github.comments('acme', 'widgets', 41).filter((c) => c.body.includes(`delivery=${id}`));
    expect(ours).toHaveLength(1);
    expect(ours[0]?.body).toMatch(/Failed\*\* turn 2/);
  }, 90_000);
});
