/**
 * Answering on GitHub under load (issue 18): a burst of 50 triggers on 50 issues, through a real
 * daemon (the fake engine) answering as a GitHub App against the fake GitHub API. Every trigger gets
 * its reaction and one tracking comment that ends finished; the writes keep the configured pacing
 * (a lower bound on the gap between two writes, and between two comments); a secondary rate limit
 * with `retry-after` delays the edit it hit and loses none.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

const SECRET = 'test-webhook-secret-github-pacing-0123';
const APP_ID = 5151;
const INSTALLATION = 88;
const WRITE_GAP = 60;
const COMMENT_GAP = 120;
const BURST = 50;
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });

describe('a burst of 50 triggers, paced, with a secondary rate limit on the way', () => {
  let root: string;
  let github: FakeGitHub;
  let daemon: DaemonProcess;
  const env = () => ({
    THE_LOOP_CONFIG: join(root, 'config.yaml'),
    THE_LOOP_APP_KEY: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  });
  const cli = (args: string[]) => runCli(args, { cwd: root, env: env() });
  const { until, settled } = followDeliveries(cli);

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-gh-pacing-'));
    const state = join(root, 'engine-state');
    const repo = join(root, 'widgets');
    mkdirSync(state);
    mkdirSync(repo);
    github = await FakeGitHub.start({
      appId: APP_ID,
      publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    });
    github.addInstallation(INSTALLATION, ['acme/widgets']);
    const base = fakeEngineConfig(state) as { gateway: Record<string, unknown> };
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        ...base,
        gateway: { ...base.gateway, github: { apiUrl: github.url } },
        dataDir: 'data',
        webhook: { secret: SECRET },
        repos: { 'acme/widgets': { path: repo } },
        dispatch: { pollSeconds: 0.2, concurrency: 4 },
        github: {
          app: { id: APP_ID, privateKey: 'env:THE_LOOP_APP_KEY' },
          status: { editIntervalSeconds: 0.2 },
          pacing: { writeGapMs: WRITE_GAP, commentGapMs: COMMENT_GAP },
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

  it('reacts to each, ends each comment finished, keeps the gaps, and waits out retry-after', async () => {
    // The first edit of a tracking comment meets a secondary rate limit (retry after 1 s).
    github.secondaryLimit({ method: 'PATCH', path: /\/issues\/comments\/\d+$/ }, 1);
    const sent = await Promise.all(
      Array.from({ length: BURST }, async (_, k) => {
        const n = 100 + k;
        // biome-ignore lint/suspicious/noExplicitAny: a fixture payload, edited freely.
        const payload = fixture('issue_comment.created') as Record<string, any>;
        payload.issue.number = n;
        payload.comment.id = 7_000_000 + k;
        payload.installation = { id: INSTALLATION };
        github.addComment('acme', 'widgets', n, payload.comment.body, { id: payload.comment.id });
        const r = await sendDelivery(daemon.webhookUrl, SECRET, 'issue_comment', payload);
        expect(r.status).toBe(202);
        return { n, id: r.id, comment: payload.comment.id as number };
      }),
    );
    for (const s of sent) expect(await settled(s.id)).toBe('done');
    const finals = await until(
      'every tracking comment to say finished',
      async () => {
        const out = sent.map((s) =>
          github.comments('acme', 'widgets', s.n).filter((c) => c.body.includes(`delivery=${s.id}`)),
        );
        return out.every((cs) => cs.length === 1 && /Finished/.test(cs[0]?.body ?? '')) ? out : undefined;
      },
      1200,
    );
    // One comment each, created once.
    expect(finals.flat()).toHaveLength(BURST);
    // Each trigger has its eyes.
    for (const s of sent)
      expect(
        github.reactions.some((r) => r.target.kind === 'issue-comment' && r.target.id === s.comment),
      ).toBe(true);

    // The rate-limited edit was sent again after its retry-after, and nothing was lost.
    const limited = github.calls.find((c) => c.status === 403 && c.method === 'PATCH');
    expect(limited).toBeDefined();
    const again = github.calls.find(
      (c) =>
        c.method === 'PATCH' && c.path === limited?.path && c.at > (limited?.at ?? 0) && c.status === 200,
    );
    expect(again).toBeDefined();
    expect((again?.at ?? 0) - (limited?.at ?? 0)).toBeGreaterThanOrEqual(900);

    // Pacing: writes one at a time, at least WRITE_GAP apart (arrival times; a little slack for the
    // trip), comments at least COMMENT_GAP apart.
    const writes = github.calls.filter((c) => c.method !== 'GET' && c.path.startsWith('/repos/'));
    const gaps = writes.slice(1).map((c, i) => c.at - (writes[i]?.at ?? 0));
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(WRITE_GAP * 0.75);
    const creates = writes.filter((c) => c.method === 'POST' && /\/issues\/\d+\/comments$/.test(c.path));
    expect(creates).toHaveLength(BURST);
    const createGaps = creates.slice(1).map((c, i) => c.at - (creates[i]?.at ?? 0));
    expect(Math.min(...createGaps)).toBeGreaterThanOrEqual(COMMENT_GAP * 0.75);
  }, 300_000);
});
