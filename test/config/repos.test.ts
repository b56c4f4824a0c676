import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { policyOf, repoOf } from '../../src/config/repos.js';
import { routeEvent } from '../../src/github/route.js';
import { thrown } from '../helpers/check.js';
import { fixture } from '../helpers/daemon.js';

let dir: string;

beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-repos-')));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function load(yaml: string) {
  mkdirSync(join(dir, 'cfg'));
  writeFileSync(join(dir, 'cfg', 'config.yaml'), yaml);
  return loadConfig({ cwd: dir, env: {}, configPath: join(dir, 'cfg', 'config.yaml') });
}

describe('repository names in one case', () => {
  it('a work item finds its repository, policy and route in any letter case', () => {
    const { config } = load(`
repos:
  Octo/A-B:
    path: /src/a-b
    policy: { protectedBranches: [release] }
  octo/a_b:
    path: /src/a_b
`);
    expect(repoOf(config, 'github:octo/a-b#1')?.path).toBe('/src/a-b');
    expect(repoOf(config, 'github:OCTO/a-B#1')?.path).toBe('/src/a-b');
    expect(repoOf(config, 'github:Octo/A_B#1')?.path).toBe('/src/a_b');
    expect(repoOf(config, 'github:octo/a.b#1')).toBeUndefined();
    expect(policyOf(config, 'github:octo/a-b#3').protectedBranches).toContain('release');

    const delivery = fixture('issues.labeled') as Record<string, Record<string, unknown>>;
    delivery.repository = { ...delivery.repository, full_name: 'OCTO/a-B', name: 'a-B' };
    delivery.issue = { ...delivery.issue, number: 1 };
    const route = routeEvent('issues', delivery, {
      ...config,
      routing: { ...config.routing, triggers: { ...config.routing.triggers, labels: ['the-loop'] } },
    });
    expect(route).toMatchObject({ action: 'start', workItem: 'github:octo/a-b#1', repoPath: '/src/a-b' });
  });

  it('two repos: keys that differ only in letter case are refused when the config loads', () => {
    const error = thrown(() =>
      load(`
repos:
  octo/a-b: { path: /src/one }
  Octo/A-B: { path: /src/two }
`),
    );
    expect(error.code).toBe('config-invalid');
    expect(error.message).toContain(
      'repos: octo/a-b and Octo/A-B name the same repository (GitHub ignores letter case)',
    );
  });
});
