import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { FakeGitHub } from '../fixtures/fake-github.js';
import { fakeEngineConfig, runCli } from './cli.js';
import { type DaemonProcess, fixture, followDeliveries, sendDelivery, startDaemonProcess } from './daemon.js';

/**
 * A real daemon (`the-loop serve`, the fake engine) answering as a GitHub App against the fake GitHub
 * API (issue 18): the App's key in the daemon's environment, one installation on acme/widgets, and
 * signed comment triggers whose comments the fake holds (so they can be reacted to).
 */
export interface AppDaemon {
  root: string;
  github: FakeGitHub;
  daemon: DaemonProcess;
  env: () => Record<string, string>;
  cli: (args: string[]) => ReturnType<typeof runCli>;
  until: ReturnType<typeof followDeliveries>['until'];
  settled: ReturnType<typeof followDeliveries>['settled'];
  /** A comment by a member on issue #n, sent signed; `seed: false` leaves it off the fake (deleted). */
  trigger(
    n: number,
    options?: { seed?: boolean; id?: number; pull?: boolean; body?: string },
  ): Promise<{ id: string; comment: number }>;
  /** Our tracking comment of a delivery on issue #n. */
  trackingOf(n: number, deliveryId: string): ReturnType<FakeGitHub['comments']>[number] | undefined;
  restart(): Promise<void>;
  close(): Promise<void>;
}

const SECRET = 'test-webhook-secret-github-app-daemon-01';
export const APP_ID = 6161;
export const INSTALLATION = 91;

export async function startAppDaemon(options: {
  prefix: string;
  status: Record<string, unknown>;
  pacing: { writeGapMs: number; commentGapMs: number };
  dispatch?: Record<string, unknown>;
  /** More of the fake engine's environment (given the test's root directory). */
  engineEnv?: (root: string) => Record<string, string>;
}): Promise<AppDaemon> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const root = mkdtempSync(join(tmpdir(), options.prefix));
  const state = join(root, 'engine-state');
  const repo = join(root, 'widgets');
  mkdirSync(state);
  mkdirSync(repo);
  const github = await FakeGitHub.start({
    appId: APP_ID,
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  });
  github.addInstallation(INSTALLATION, ['acme/widgets']);
  const base = fakeEngineConfig(state, {
    env: { FAKE_ENGINE_STATE: state, ...options.engineEnv?.(root) },
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
      dispatch: { pollSeconds: 0.2, ...options.dispatch },
      github: {
        app: { id: APP_ID, privateKey: 'env:THE_LOOP_APP_KEY' },
        status: options.status,
        pacing: options.pacing,
      },
    }),
  );
  const env = () => ({
    THE_LOOP_CONFIG: join(root, 'config.yaml'),
    THE_LOOP_APP_KEY: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  });
  const cli = (args: string[]) => runCli(args, { cwd: root, env: env() });
  const { until, settled } = followDeliveries(cli);
  // Far from the ids the fake gives its own comments (it counts on from the largest it holds).
  let nextComment = 8_000_000;
  const handle: AppDaemon = {
    root,
    github,
    daemon: await startDaemonProcess({ cwd: root, env: env() }),
    env,
    cli,
    until,
    settled,
    trigger: async (n, o = {}) => {
      // biome-ignore lint/suspicious/noExplicitAny: a fixture payload, edited freely.
      const payload = fixture('issue_comment.created') as Record<string, any>;
      const comment = o.id ?? nextComment;
      nextComment += 100_000;
      payload.issue.number = n;
      payload.comment.id = comment;
      if (o.body !== undefined) payload.comment.body = o.body;
      payload.installation = { id: INSTALLATION };
      // A comment on a pull request (its payload names no head: the daemon asks GitHub for it).
      if (o.pull)
        payload.issue.pull_request = { url: `https://api.github.com/repos/acme/widgets/pulls/${n}` };
      if (o.seed !== false) github.addComment('acme', 'widgets', n, payload.comment.body, { id: comment });
      const sent = await sendDelivery(handle.daemon.webhookUrl, SECRET, 'issue_comment', payload);
      if (sent.status !== 202) throw new Error(`delivery refused: ${sent.status} ${sent.text}`);
      return { id: sent.id, comment };
    },
    trackingOf: (n, deliveryId) =>
      github.comments('acme', 'widgets', n).find((c) => c.body.includes(`delivery=${deliveryId}`)),
    restart: async () => {
      await handle.daemon.stop();
      handle.daemon = await startDaemonProcess({ cwd: root, env: env() });
    },
    close: async () => {
      await handle.daemon.stop();
      await github.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
  return handle;
}
