/**
 * Issue 12, "state outside the work tree": `the-loop config init && the-loop run …` in a fresh
 * repository leaves nothing for `git status` to see, and what an agent then adds, commits and pushes
 * carries nothing of the config or the data dir (checked on the remote). An install made with the old
 * default (state beside the config, in the repository) keeps its registry, is git-ignored, and warned
 * about. Real CLI, real git, real SQLite; the fake engine stands in for the model.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { fakeEngineConfig, runCli } from '../helpers/cli.js';
import { git, repoWithRemote } from '../helpers/git.js';

const WI = 'github:octo/widgets#15';

let root: string;
let engineState: string;
let env: Record<string, string>;

beforeAll(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-state-')));
  engineState = join(root, 'engine-state');
  mkdirSync(engineState);
  // The state home of this test, never the real ~/.local/state.
  env = { XDG_STATE_HOME: join(root, 'state') };
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Every path and every byte of every commit the remote holds. */
function published(remote: string): { paths: string[]; history: string } {
  const paths = new Set<string>();
  for (const commit of git(remote, 'rev-list', '--all').split('\n')) {
    for (const path of git(remote, 'ls-tree', '-r', '--name-only', commit).split('\n')) paths.add(path);
  }
  return { paths: [...paths].sort(), history: git(remote, 'log', '--all', '-p', '--format=%H %s') };
}

/** What an agent allowed to publish does in its working directory. */
function agentPublishes(work: string, file: string): void {
  writeFileSync(join(work, file), 'the fix\n');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', `add ${file}`);
  git(work, 'push', '-q', 'origin', 'HEAD:main');
}

describe('a fresh repository: config init, then run', () => {
  let work: string;
  let remote: string;
  let secret: string;
  let dataDir: string;
  const cli = (args: string[]) => runCli(args, { cwd: work, env });

  beforeAll(async () => {
    ({ work, remote } = repoWithRemote(root, 'widgets'));
    const init = await cli(['config', 'init']);
    expect(init.code, init.stderr).toBe(0);
    expect(init.stdout).toMatch(
      /Wrote .*widgets\/\.the-loop\/\.gitignore \(the config holds the webhook secret/,
    );
    expect(init.stdout).toMatch(
      /State \(registry, log, keys\) will live in .*\/state\/the-loop\/widgets-[0-9a-f]{8}\n/,
    );
    // The starter config, with the fake engine as the default (the secret stays as generated).
    const configPath = join(work, '.the-loop', 'config.yaml');
    const starter = parse(readFileSync(configPath, 'utf8')) as { webhook: { secret: string } };
    secret = starter.webhook.secret;
    writeFileSync(configPath, stringify({ ...starter, ...fakeEngineConfig(engineState) }));
    const run = await cli(['run', WI, 'hello from the repository']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe('');
    const check = JSON.parse((await cli(['config', 'check', '--json'])).stdout) as { dataDir: string };
    dataDir = check.dataDir;
  });

  it('keeps the state in the state home, outside the repository', () => {
    expect(dataDir).toMatch(new RegExp(`^${root}/state/the-loop/widgets-[0-9a-f]{8}$`));
    expect(existsSync(join(dataDir, 'the-loop.db'))).toBe(true);
    expect(existsSync(join(dataDir, 'the-loop.log'))).toBe(true);
    expect(existsSync(join(work, '.the-loop', 'the-loop.db'))).toBe(false);
    const db = new Database(join(dataDir, 'the-loop.db'), { readonly: true });
    try {
      expect(db.prepare('SELECT work_item, cwd FROM sessions').all()).toEqual([{ work_item: WI, cwd: work }]);
    } finally {
      db.close();
    }
  });

  it('doctor finds the config git-ignored and the data dir outside the repository', async () => {
    const doctor = await cli(['doctor', '--json']);
    const { state } = JSON.parse(doctor.stdout) as {
      state: { config: { workTree: string; ignored: boolean; secrets: string[] }; warnings: string[] };
    };
    expect(state.config).toMatchObject({ workTree: work, ignored: true, secrets: ['webhook.secret'] });
    expect(state.warnings).toEqual([]);
  });

  it('gives git status nothing to show', () => {
    expect(git(work, 'status', '--porcelain', '--untracked-files=all')).toBe('');
    expect(readFileSync(join(work, '.the-loop', '.gitignore'), 'utf8')).toBe('*\n');
  });

  it('publishes nothing of the config or the data dir when the agent adds, commits and pushes everything', () => {
    agentPublishes(work, 'fix.txt');
    const { paths, history } = published(remote);
    expect(paths).toEqual(['README.md', 'fix.txt']);
    expect(history).not.toContain(secret);
  });
});

describe('an install made with the old default (state beside the config, in the repository)', () => {
  let work: string;
  let remote: string;
  let legacy: string;
  const cli = (args: string[]) => runCli(args, { cwd: work, env });

  beforeAll(() => {
    ({ work, remote } = repoWithRemote(root, 'gadgets'));
    legacy = join(work, '.the-loop');
    mkdirSync(legacy);
    writeFileSync(join(legacy, 'config.yaml'), stringify(fakeEngineConfig(engineState)));
    // The registry an earlier version made there.
    new Database(join(legacy, 'the-loop.db')).close();
  });

  it('keeps using its registry, says it is in the repository, and git-ignores it', async () => {
    const run = await cli(['run', 'github:octo/gadgets#2', 'hello again']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/warning: the data dir .*gadgets\/\.the-loop is inside the git work tree/);
    expect(run.stderr).toMatch(/new installs keep state in .*\/state\/the-loop\/gadgets-[0-9a-f]{8}/);
    const list = JSON.parse((await cli(['sessions', 'list', '--json'])).stdout) as Array<{
      workItem: string;
    }>;
    expect(list.map((s) => s.workItem)).toEqual(['github:octo/gadgets#2']);
    // Nothing moved to the state home behind its back.
    const home = join(root, 'state', 'the-loop');
    expect(existsSync(home) ? readdirSync(home).filter((n) => n.startsWith('gadgets-')) : []).toEqual([]);
    expect(readFileSync(join(legacy, '.gitignore'), 'utf8')).toBe('*\n');
    expect(git(work, 'status', '--porcelain', '--untracked-files=all')).toBe('');
    agentPublishes(work, 'fix.txt');
    expect(published(remote).paths).toEqual(['README.md', 'fix.txt']);
    const doctor = await cli(['doctor']);
    expect(doctor.stdout).toMatch(/⚠ the data dir .*gadgets\/\.the-loop is inside the git work tree/);
  });
});
