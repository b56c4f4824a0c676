/**
 * `the-loop run` asks the workspace's git dirs ahead of its turn, but only after recovery stopped
 * orphaned engines (one could still change .git meanwhile), and drops that answer when a turn is
 * adopted (its engine runs on in the workspace).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { configSchema } from '../../src/config/schema.js';
import { type App, createApp } from '../../src/main.js';
import { guardProbes } from '../../src/main-guard.js';
import { startRunDispatch } from '../../src/main-run.js';
import { fakeEngineConfig } from '../helpers/cli.js';

const asked = vi.hoisted(() => ({ cwds: [] as string[] }));
// The operator's identity, asked without blocking by warm(), would land in the kept results after the
// test has removed its dir (git answers after dispose), making it again: answered at once here.
vi.mock('../../src/gateway/session-files.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/gateway/session-files.js')>();
  return { ...real, operatorGitIdentityAsync: () => Promise.resolve({}) };
});
vi.mock('../../src/guard/sandbox-view.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/guard/sandbox-view.js')>();
  return {
    ...real,
    workspaceGitDirs: (cwd: string) => {
      asked.cwds.push(cwd);
      return Promise.resolve([]);
    },
  };
});

let root: string;
let app: App | undefined;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'the-loop-run-warm-'));
  asked.cwds = [];
});
afterEach(() => {
  app?.dispose();
  app = undefined;
  rmSync(root, { recursive: true, force: true });
});

describe('the git dirs asked ahead of a run', () => {
  it('are asked after recovery, not before', async () => {
    const state = join(root, 'state');
    mkdirSync(state);
    const configPath = join(root, 'config.yaml');
    writeFileSync(configPath, stringify(fakeEngineConfig(state)));
    app = await createApp({
      cwd: root,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: root },
      configPath,
    });
    const order: string[] = [];
    const orphanTurns = app.store.orphanTurns.bind(app.store);
    app.store.orphanTurns = (...args) => {
      order.push('recovery');
      return orphanTurns(...args);
    };
    const warm = app.guard.warm.bind(app.guard);
    app.guard.warm = (hint) => {
      order.push(hint?.cwd ? `warm ${hint.cwd}` : 'warm');
      return warm(hint);
    };
    const run = await startRunDispatch(app, {
      workItem: 'github:acme/widgets#1',
      deliveryId: 'none',
      onEvent: () => {},
      onSession: () => {},
      cwd: root,
    });
    await run.close();
    expect(order).toEqual(['warm', 'recovery', `warm ${root}`]);
  });

  it('are dropped when a turn is adopted: the next turn asks git again', () => {
    const config = configSchema.parse({ sandbox: { mode: 'auto' }, gateway: { enabled: false } });
    const env = { PATH: process.env.PATH, HOME: root, THE_LOOP_PROBE_CACHE: '0' };
    const probes = guardProbes({ config }, env);
    void probes.warm({ cwd: '/ws' });
    void probes.gitDirs('/ws');
    expect(asked.cwds).toEqual(['/ws']);
    void probes.warm({ cwd: '/ws' });
    probes.forgetWarmed();
    void probes.gitDirs('/ws');
    expect(asked.cwds).toEqual(['/ws', '/ws', '/ws']);
  });
});
