/**
 * Answering on GitHub (issue 18), end to end: `the-loop serve` as a GitHub App against a fake GitHub
 * API over HTTP (test/fixtures/fake-github.ts: comments with every body they had, reactions, check
 * runs, every call recorded), the real Claude Code CLI against the mock Anthropic API, signed
 * webhooks. A comment gets its eyes, then one comment edited in place through queued → running →
 * finished; a second trigger shows queued behind the first; a pull request gets a check run; a
 * held session's comment says what releases it; our own comment starts nothing; a SIGKILL mid-turn
 * leaves no "running" comment once the daemon is back.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { stringify } from 'yaml';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { BOT_LOGIN, FakeGitHub } from '../fixtures/fake-github.js';
import { type GitUpstream, startGitUpstream } from '../fixtures/git-upstream.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi } from '../fixtures/mock-apis/types.js';
import { canaryFormsIn, canaryLeaksUnder } from '../helpers/canary.js';
import { runCli } from '../helpers/cli.js';
import {
  type DaemonProcess,
  fixture,
  followDeliveries,
  sendDelivery,
  startDaemonProcess,
} from '../helpers/daemon.js';
import { githubCheckout } from '../helpers/git.js';
import { realBinary } from './helpers.js';

const SECRET = 'test-webhook-secret-github-status-0123';
const API_KEY = `sk-ant-status-canary-${process.pid}-Hq72Lm`;
const APP_ID = 4242;
const INSTALLATION = 77;
const HEAD = 'c0ffee'.padEnd(40, '0');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const KEY_PEM = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
/** The installation token the fake mints first: the only credential the git upstream accepts. */
const MINTED = `ghs_${randomBytes(18).toString('hex')}`;

describe('the daemon answers on GitHub as an App', () => {
  let root: string;
  let repo: string;
  let mock: MockApi;
  let github: FakeGitHub;
  let upstream: GitUpstream;
  let daemon: DaemonProcess;
  const env = () => ({
    THE_LOOP_CONFIG: join(root, 'config.yaml'),
    ANTHROPIC_API_KEY: API_KEY,
    THE_LOOP_APP_KEY: KEY_PEM,
  });
  const cli = (args: string[]) => runCli(args, { cwd: root, env: env() });
  const { delivery, until, settled } = followDeliveries(cli);

  let nextComment = 9_000_000;
  /** A comment by octocat (a member) on issue #n, there on the fake so it can be reacted to. */
  function comment(n: number, body: string, who?: { login: string; type: string; app?: number }) {
    // biome-ignore lint/suspicious/noExplicitAny: a fixture payload, edited freely.
    const payload = fixture('issue_comment.created') as Record<string, any>;
    const id = nextComment++;
    payload.issue.number = n;
    payload.comment.id = id;
    payload.comment.body = body;
    payload.installation = { id: INSTALLATION };
    if (who) {
      payload.comment.user = { login: who.login, type: who.type };
      payload.sender = payload.comment.user;
      if (who.app) payload.comment.performed_via_github_app = { id: who.app, slug: 'the-loop-app' };
    }
    github.addComment('acme', 'widgets', n, body, { id, login: who?.login ?? 'octocat' });
    return { payload, id };
  }
  /** Our tracking comments on issue #n (the ones carrying the hidden marker). */
  const tracking = (n: number) =>
    github.comments('acme', 'widgets', n).filter((c) => c.body.includes('<!-- the-loop:status'));
  const trackingOf = (n: number, deliveryId: string) =>
    tracking(n).find((c) => c.body.includes(`delivery=${deliveryId}`));
  const send = (event: string, payload: unknown) => sendDelivery(daemon.webhookUrl, SECRET, event, payload);

  function writeConfig() {
    const home = prepareClaudeHome(join(root, 'engine'), mock.url);
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        dataDir: 'data',
        webhook: { secret: SECRET },
        gateway: { port: 0, github: { url: upstream.url, apiUrl: github.url } },
        console: { port: 0, publicOrigin: 'https://loop.example.test' },
        usage: { watchClaude: false },
        defaults: { engine: 'claude', backstopSeconds: 180, killGraceSeconds: 2 },
        dispatch: { pollSeconds: 0.2 },
        budgets: { session: { maxTurns: 2 } },
        repos: { 'acme/widgets': { path: repo } },
        engines: { claude: { binary: realBinary('claude'), env: home.env } },
        github: {
          app: { id: APP_ID, privateKey: 'env:THE_LOOP_APP_KEY' },
          status: { editIntervalSeconds: 0.3 },
          pacing: { writeGapMs: 20, commentGapMs: 20 },
        },
      }),
    );
  }

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-gh-status-'));
    github = await FakeGitHub.start({
      appId: APP_ID,
      publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
      tokenOf: (id, n) => (id === INSTALLATION && n === 1 ? MINTED : `ghs_other_${id}_${n}_abcdefghijklmnop`),
    });
    upstream = await startGitUpstream({ token: MINTED });
    repo = await githubCheckout(upstream, join(root, 'widgets'), 'acme', 'widgets');
    github.addInstallation(INSTALLATION, ['acme/widgets']);
    github.addPull('acme', 'widgets', 16, HEAD);
    // Keyed by prompt (each once): whatever other requests Claude Code makes, each turn gets its step.
    mock = await startAnthropicMock({
      byPrompt: [
        // #15, first comment: a checklist, then a slow answer (time for a second comment).
        {
          contains: 'fix the empty state',
          step: {
            kind: 'tool',
            name: 'TodoWrite',
            input: {
              todos: [
                { content: 'Find the crash', status: 'completed', activeForm: 'Finding the crash' },
                { content: 'Fix the empty state', status: 'in_progress', activeForm: 'Fixing it' },
              ],
            },
          },
        },
        {
          contains: 'fix the empty state',
          step: { kind: 'shell', command: 'git push origin HEAD:refs/heads/loop-15' },
        },
        {
          contains: 'fix the empty state',
          step: { kind: 'text', text: 'Fixed the empty state.', delayMs: 4000 },
        },
        // #16, the pull request: a push through the gateway, as the App.
        {
          contains: 'review this',
          step: { kind: 'shell', command: 'git push origin HEAD:refs/heads/loop-16' },
        },
        { contains: 'review this', step: { kind: 'text', text: 'Pushed loop-16.' } },
        // #17: the daemon dies while the model thinks; the run again after the restart is answered.
        { contains: 'take your time', step: { kind: 'text', text: 'Never sent.', delayMs: 600_000 } },
      ],
    });
    writeConfig();
    daemon = await startDaemonProcess({ cwd: root, env: env() });
  }, 120_000);

  afterAll(async () => {
    await daemon?.stop();
    await mock?.close();
    await github?.close();
    await upstream?.close();
    rmSync(root, { recursive: true, force: true });
  });

  let firstId = '';
  let secondId = '';

  it('reacts to the trigger, and a second trigger while the first runs shows queued behind it', async () => {
    const first = comment(15, '@the-loop fix the empty state');
    const sent = await send('issue_comment', first.payload);
    expect(sent.status).toBe(202);
    firstId = sent.id;
    await until('the eyes reaction', async () =>
      github.reactions.find((r) => r.target.kind === 'issue-comment' && r.target.id === first.id)
        ? true
        : undefined,
    );
    expect(
      github.reactions.find((r) => r.target.kind === 'issue-comment' && r.target.id === first.id),
    ).toMatchObject({
      content: 'eyes',
    });
    // Running (the checklist in it), then a second comment arrives while the model is slow.
    await until('the first comment to say running', async () =>
      /Running/.test(trackingOf(15, firstId)?.body ?? '') ? true : undefined,
    );
    const second = comment(15, '@the-loop also add a test');
    const sent2 = await send('issue_comment', second.payload);
    secondId = sent2.id;
    const queued = await until('the second to say queued behind the first', async () => {
      const c = trackingOf(15, secondId);
      return c && /Queued/.test(c.body) ? c : undefined;
    });
    expect(queued.body).toMatch(/behind turn 1/);
    expect(await settled(firstId)).toBe('done');
    expect(await settled(secondId)).toBe('done');
  }, 240_000);

  it('edits one comment per turn in place: queued → running → finished, with end reason, cost basis and checklist', async () => {
    const c = await until('the first comment to be finished', async () => {
      const t = trackingOf(15, firstId);
      return t && /Finished/.test(t.body) ? t : undefined;
    });
    // One comment per delivery, created once (POST) and then only edited (PATCH).
    expect(tracking(15).filter((x) => x.body.includes(`delivery=${firstId}`))).toHaveLength(1);
    const history = c.edits.join('\n---\n');
    const firstQueued = c.edits.findIndex((b) => /Queued|Starting/.test(b));
    const firstRunning = c.edits.findIndex((b) => /Running/.test(b));
    const finished = c.edits.findIndex((b) => /Finished/.test(b));
    expect(firstQueued, history).toBeGreaterThanOrEqual(0);
    expect(firstRunning, history).toBeGreaterThan(firstQueued);
    expect(finished, history).toBeGreaterThan(firstRunning);
    expect(c.body).toMatch(/succeeded/);
    expect(c.body).toMatch(/result/);
    expect(c.body).toMatch(/Fix the empty state/);
    expect(c.body).toMatch(/list-price|engine-reported/);
    // Its acts: the push through the gateway, with the commit it left the branch at.
    const pushed = upstream.refs('acme', 'widgets')['refs/heads/loop-15'] ?? 'none';
    expect(c.body).toContain('refs/heads/loop-15');
    expect(c.body).toContain(pushed.slice(0, 12));
    expect(c.body).not.toMatch(/\$0(?![.,]\d*[1-9])/);
    expect(c.body).toContain('https://loop.example.test/sessions/');
    expect(c.body).not.toContain(API_KEY);
    // Every call was made as the App's installation.
    for (const call of github.calls.filter((x) => x.path.startsWith('/repos/')))
      expect(call.auth, `${call.method} ${call.path}`).toBe('installation');
  }, 60_000);

  it('holds the third delivery over budget, and the comment says what releases it', async () => {
    const third = comment(15, '@the-loop one more');
    const sent = await send('issue_comment', third.payload);
    const held = await until('the third comment to say held', async () => {
      const c = trackingOf(15, sent.id);
      return c && /Held/.test(c.body) ? c : undefined;
    });
    expect(held.body).toMatch(/over budget/);
    expect(held.body).toMatch(/sessions resume github:acme\/widgets#15 --raise/);
    expect((await delivery(sent.id)).status).toBe('queued');
  }, 60_000);

  it('a pull request turn gets a check run completed with a conclusion and a link', async () => {
    // biome-ignore lint/suspicious/noExplicitAny: a fixture payload, edited freely.
    const pr = fixture('pull_request.opened') as Record<string, any>;
    pr.pull_request.number = 16;
    pr.pull_request.body = '@the-loop review this';
    pr.pull_request.head.sha = HEAD;
    pr.installation = { id: INSTALLATION };
    const sent = await send('pull_request', pr);
    expect(await settled(sent.id)).toBe('done');
    const run = await until('the check run to complete', async () => {
      const r = github.checkRuns.find((x) => x.external_id === sent.id);
      return r?.status === 'completed' ? r : undefined;
    });
    expect(run).toMatchObject({ head_sha: HEAD, conclusion: 'success' });
    expect(run.details_url).toMatch(/^https:\/\/loop\.example\.test\/sessions\//);
    // The agent's push went through the gateway with the App's installation token, and the
    // tracking comment lists it with the commit it left the branch at.
    const pushed = upstream.refs('acme', 'widgets')['refs/heads/loop-16'];
    expect(pushed).toMatch(/^[0-9a-f]{40}$/);
    const receive = upstream.requests.filter((r) => r.path.includes('git-receive-pack'));
    expect(receive.length).toBeGreaterThan(0);
    for (const r of receive) expect(r.authorized).toBe(true);
    const c = tracking(16).find((x) => x.body.includes(`delivery=${sent.id}`));
    expect(c?.body).toMatch(/Finished/);
    expect(c?.body).toContain('refs/heads/loop-16');
    expect(c?.body).toContain((pushed ?? '').slice(0, 12));
    expect(github.reactions.some((r) => r.target.kind === 'issue' && r.target.number === 16)).toBe(true);
  }, 120_000);

  it('our own comment mentioning @the-loop starts nothing (recorded as ignored)', async () => {
    const before = mock.modelTurns().length;
    const own = comment(18, '@the-loop this is our own status comment', { login: BOT_LOGIN, type: 'Bot' });
    const sent = await send('issue_comment', own.payload);
    expect(sent.status).toBe(202);
    const d = await until('the delivery to be settled', async () => {
      const x = await delivery(sent.id);
      return x.status !== 'queued' ? x : undefined;
    });
    expect(d.status).toBe('ignored');
    expect(d.reason).toMatch(/our own/);
    const viaApp = comment(18, '@the-loop via the app', { login: 'someone', type: 'User', app: APP_ID });
    const sent2 = await send('issue_comment', viaApp.payload);
    expect((await delivery(sent2.id)).status).toBe('ignored');
    await sleep(500);
    expect(mock.modelTurns().length).toBe(before);
    expect(tracking(18)).toHaveLength(0);
  }, 60_000);

  it('a crash mid-turn (SIGKILL) leaves no comment saying running after the daemon restarts', async () => {
    onTestFailed(() => {
      console.log(readFileSync(join(root, 'data', 'the-loop.log'), 'utf8').slice(-12000));
      console.log(
        JSON.stringify(
          tracking(17).map((c) => c.edits),
          null,
          1,
        ).slice(-4000),
      );
    });
    const c = comment(17, '@the-loop take your time');
    const sent = await send('issue_comment', c.payload);
    await until('the comment to say running', async () =>
      /Running/.test(trackingOf(17, sent.id)?.body ?? '') ? true : undefined,
    );
    // Mid-turn: the model has the request (and will not answer it).
    await until('the model request', async () =>
      mock.modelTurns().some((r) => JSON.stringify(r.body).includes('take your time')) ? true : undefined,
    );
    daemon.child.kill('SIGKILL');
    await new Promise((r) => daemon.child.once('exit', r));
    daemon = await startDaemonProcess({ cwd: root, env: env() });
    // The run again fails or succeeds (the mock's script is spent: 'reply n'); either way it ends.
    await settled(sent.id);
    const final = await until('the comment to leave running', async () => {
      const t = trackingOf(17, sent.id);
      return t && !/Running/.test(t.body) && !/Queued/.test(t.body) ? t : undefined;
    });
    expect(final.body).toMatch(/Finished|Failed|Interrupted/);
    // It was running when the daemon died (turn 1), and what ended is the run again (turn 2).
    expect(final.edits.some((b) => /Running\*\* turn 1/.test(b))).toBe(true);
    expect(final.body).toMatch(/turn 2/);
    for (const t of [...tracking(15), ...tracking(16), ...tracking(17)])
      expect(t.body).not.toMatch(/\*\*Running/);
  }, 240_000);

  it("the App's key, its installation token and the API key appear nowhere: data dir, engine home, comments, checks, output", async () => {
    // A line of the key's body: long enough to be the key, short enough to be found if it leaked.
    const keyLine = KEY_PEM.split('\n')[5] ?? '';
    expect(keyLine.length).toBeGreaterThan(40);
    for (const secret of [MINTED, keyLine, API_KEY]) {
      expect(canaryLeaksUnder(join(root, 'data'), secret), secret.slice(0, 12)).toEqual([]);
      expect(canaryLeaksUnder(join(root, 'engine'), secret), secret.slice(0, 12)).toEqual([]);
      expect(canaryLeaksUnder(repo, secret), secret.slice(0, 12)).toEqual([]);
      const said = JSON.stringify([
        github.comments('acme', 'widgets', 15),
        github.checkRuns,
        github.calls.map((c) => c.body),
      ]);
      expect(canaryFormsIn(said, secret)).toEqual([]);
      expect(canaryFormsIn(daemon.output(), secret)).toEqual([]);
    }
  }, 60_000);
});
