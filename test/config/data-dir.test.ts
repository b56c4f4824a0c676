import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stateReport, stateWarnings } from '../../src/cli/doctor-state.js';
import {
  chooseDataDir,
  type DataDirFacts,
  findWorkTree,
  ignoreInWorkTree,
  prepareDataDir,
  resolveDataDir,
  stateDirFor,
  stateHome,
} from '../../src/config/data-dir.js';
import { literalSecretPaths, loadConfig } from '../../src/config/load.js';
import { openBase } from '../../src/main-base.js';
import { git } from '../helpers/git.js';

let root: string;
let repo: string;
let state: string;
let env: Record<string, string>;

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-datadir-')));
  repo = join(root, 'widgets');
  state = join(root, 'state');
  mkdirSync(repo);
  git(repo, 'init', '-q', '-b', 'main');
  env = { XDG_STATE_HOME: state, HOME: join(root, 'home'), PATH: process.env.PATH ?? '/usr/bin:/bin' };
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const facts = (over: Partial<DataDirFacts> = {}): DataDirFacts => ({
  explicit: undefined,
  configDir: '/src/widgets/.the-loop',
  configDirWorkTree: null,
  registryBesideConfig: false,
  stateDir: '/home/me/.local/state/the-loop/widgets-0123abcd',
  registryInStateDir: false,
  ...over,
});

describe('chooseDataDir (pure)', () => {
  it('takes an explicit dir as given, whatever else is true', () => {
    expect(
      chooseDataDir(facts({ explicit: '/srv/loop', registryBesideConfig: true, configDirWorkTree: '/src' })),
    ).toEqual({ dataDir: '/srv/loop', source: 'explicit' });
  });

  it('keeps a registry already beside the config (an existing install), even in a work tree', () => {
    expect(chooseDataDir(facts({ registryBesideConfig: true, configDirWorkTree: '/src/widgets' }))).toEqual({
      dataDir: '/src/widgets/.the-loop',
      source: 'existing',
    });
  });

  it('puts the state of a config inside a work tree in the state home, and keeps it there', () => {
    const home = '/home/me/.local/state/the-loop/widgets-0123abcd';
    expect(chooseDataDir(facts({ configDirWorkTree: '/src/widgets' }))).toEqual({
      dataDir: home,
      source: 'state-home',
    });
    expect(chooseDataDir(facts({ registryInStateDir: true }))).toEqual({
      dataDir: home,
      source: 'state-home',
    });
  });

  it('keeps the state of a config outside any work tree beside it', () => {
    expect(chooseDataDir(facts())).toEqual({ dataDir: '/src/widgets/.the-loop', source: 'beside-config' });
  });
});

describe('the state home and the per-config directory in it', () => {
  it('is $XDG_STATE_HOME when absolute, else ~/.local/state', () => {
    expect(stateHome({ XDG_STATE_HOME: '/x/state', HOME: '/home/me' })).toBe('/x/state');
    expect(stateHome({ XDG_STATE_HOME: 'relative/state', HOME: '/home/me' })).toBe('/home/me/.local/state');
    expect(stateHome({ HOME: '/home/me' })).toBe('/home/me/.local/state');
  });

  it('is named after the repository, with a digest of the config dir: one per config dir', () => {
    const a = stateDirFor('/s', '/src/widgets/.the-loop', '/src/widgets');
    expect(a).toMatch(/^\/s\/the-loop\/widgets-[0-9a-f]{8}$/);
    expect(stateDirFor('/s', '/src/widgets/.the-loop', '/src/widgets')).toBe(a);
    expect(stateDirFor('/s', '/src/widgets/ops', '/src/widgets')).not.toBe(a);
    expect(stateDirFor('/s', '/src/wid gets;$(x)/.the-loop', null)).toMatch(
      /^\/s\/the-loop\/wid-gets-x-[0-9a-f]{8}$/,
    );
    expect(stateDirFor('/s', '/.the-loop', null)).toMatch(/^\/s\/the-loop\/config-[0-9a-f]{8}$/);
  });
});

describe('findWorkTree', () => {
  it('finds the work tree of a path in it (existing or not), and none outside or inside .git', () => {
    expect(findWorkTree(repo)).toBe(repo);
    expect(findWorkTree(join(repo, '.the-loop', 'not-yet'))).toBe(repo);
    expect(findWorkTree(join(repo, '.git', 'the-loop'))).toBeNull();
    expect(findWorkTree(state)).toBeNull();
  });

  it('knows a linked worktree by its .git file', () => {
    writeFileSync(join(repo, 'a.txt'), 'a\n');
    git(repo, 'add', 'a.txt');
    git(repo, '-c', 'user.name=t', '-c', 'user.email=t@example.test', 'commit', '-qm', 'a');
    const linked = join(root, 'linked');
    git(repo, 'worktree', 'add', '-q', linked);
    expect(findWorkTree(join(linked, 'sub'))).toBe(linked);
  });
});

describe('resolveDataDir', () => {
  it('a config in a repository: state in the state home, outside the work tree, no warning', () => {
    const place = resolveDataDir({ explicit: undefined, configDir: join(repo, '.the-loop'), env });
    expect(place.source).toBe('state-home');
    expect(place.dataDir).toMatch(new RegExp(`^${state}/the-loop/widgets-[0-9a-f]{8}$`));
    expect(place.workTree).toBeNull();
    expect(place.warnings).toEqual([]);
  });

  it('a moved checkout is told where its old state is, instead of silently starting an empty registry', () => {
    const first = resolveDataDir({ explicit: undefined, configDir: join(repo, '.the-loop'), env });
    prepareDataDir(first.dataDir, first.workTree, first.origin);
    expect(readFileSync(join(first.dataDir, 'origin'), 'utf8')).toBe(`${join(repo, '.the-loop')}\n`);
    writeFileSync(join(first.dataDir, 'the-loop.db'), '');
    // While the checkout is where it was: nothing to say, the same state dir.
    expect(resolveDataDir({ explicit: undefined, configDir: join(repo, '.the-loop'), env })).toMatchObject({
      dataDir: first.dataDir,
      warnings: [],
    });
    // Moved: a new state dir, and a warning naming the old one.
    mkdirSync(join(root, 'work'));
    renameSync(repo, join(root, 'work', 'widgets'));
    const moved = resolveDataDir({
      explicit: undefined,
      configDir: join(root, 'work', 'widgets', '.the-loop'),
      env,
    });
    expect(moved.dataDir).not.toBe(first.dataDir);
    expect(moved.warnings.join('\n')).toContain(`is in ${first.dataDir}: if this checkout moved from there`);
    // Another checkout of the same name that still exists is not a move: no warning.
    mkdirSync(join(root, 'again', 'widgets'), { recursive: true });
    git(join(root, 'again', 'widgets'), 'init', '-q');
    const origin = join(root, 'again', 'widgets', '.the-loop');
    mkdirSync(origin);
    writeFileSync(join(first.dataDir, 'origin'), `${origin}\n`);
    expect(
      resolveDataDir({ explicit: undefined, configDir: join(root, 'work', 'widgets', '.the-loop'), env })
        .warnings,
    ).toEqual([]);
  });

  it('an existing registry beside the config is kept, with a warning naming the work tree', () => {
    mkdirSync(join(repo, '.the-loop'));
    writeFileSync(join(repo, '.the-loop', 'the-loop.db'), '');
    const place = resolveDataDir({ explicit: undefined, configDir: join(repo, '.the-loop'), env });
    expect(place).toMatchObject({ source: 'existing', dataDir: join(repo, '.the-loop'), workTree: repo });
    expect(place.warnings.join('\n')).toMatch(
      /inside the git work tree .*widgets.*new installs keep state in/,
    );
  });

  it('an explicit dir inside a work tree is used, and warned about; the work tree root too, more loudly', () => {
    const place = resolveDataDir({ explicit: join(repo, 'state'), configDir: root, env });
    expect(place).toMatchObject({ source: 'explicit', dataDir: join(repo, 'state'), workTree: repo });
    expect(place.warnings).toHaveLength(1);
    const atRoot = resolveDataDir({ explicit: repo, configDir: root, env });
    expect(atRoot).toMatchObject({ source: 'explicit', dataDir: repo, workTree: repo });
    expect(atRoot.warnings.join('\n')).toMatch(
      /is the root of the git work tree .*cannot write a \.gitignore/,
    );
  });

  it('an install whose config and registry sit at a repository root keeps working (upgrade), warned', () => {
    writeFileSync(join(repo, 'the-loop.db'), '');
    const place = resolveDataDir({ explicit: undefined, configDir: repo, env });
    expect(place).toMatchObject({ source: 'existing', dataDir: repo, workTree: repo });
    expect(place.warnings.join('\n')).toMatch(/root of the git work tree.*new installs keep state in/);
  });

  it('a config outside any work tree keeps its state beside it', () => {
    const place = resolveDataDir({ explicit: undefined, configDir: join(root, 'ops'), env });
    expect(place).toMatchObject({ source: 'beside-config', dataDir: join(root, 'ops'), workTree: null });
  });
});

describe('loadConfig and openBase: the data dir in use', () => {
  it('loadConfig in a repository without a config file puts the state outside it', () => {
    const loaded = loadConfig({ cwd: repo, env });
    expect(loaded.dataDir.startsWith(`${state}/the-loop/widgets-`)).toBe(true);
    expect(loaded.logFile).toBe(join(loaded.dataDir, 'the-loop.log'));
    expect(loaded.dataDirWorkTree).toBeNull();
  });

  it('openBase git-ignores a data dir inside a work tree before writing in it: git status stays clean', async () => {
    const base = await openBase({ cwd: repo, env, dataDir: 'var/loop' });
    try {
      expect(base.loaded.warnings).toHaveLength(1);
      expect(readFileSync(join(repo, 'var/loop/.gitignore'), 'utf8')).toBe('*\n');
      expect(existsSync(join(repo, 'var/loop/the-loop.db'))).toBe(true);
    } finally {
      base.dispose();
    }
    expect(git(repo, 'status', '--porcelain', '--untracked-files=all')).toBe('');
  });

  it('ignoreInWorkTree leaves an existing .gitignore, and never writes one at a work tree root', () => {
    mkdirSync(join(repo, 'conf'));
    writeFileSync(join(repo, 'conf', '.gitignore'), 'secret.yaml\n');
    expect(ignoreInWorkTree(join(repo, 'conf'))).toBeNull();
    expect(readFileSync(join(repo, 'conf', '.gitignore'), 'utf8')).toBe('secret.yaml\n');
    expect(ignoreInWorkTree(repo)).toBeNull();
    expect(existsSync(join(repo, '.gitignore'))).toBe(false);
    mkdirSync(join(root, 'elsewhere'));
    expect(ignoreInWorkTree(join(root, 'elsewhere'))).toBeNull();
    expect(existsSync(join(root, 'elsewhere', '.gitignore'))).toBe(false);
  });
});

describe('secrets written into the config file, and what doctor says of them', () => {
  it('literalSecretPaths names literal secrets, not env: references or non-secret keys', () => {
    expect(
      literalSecretPaths({
        webhook: { secret: 'abc', path: '/gh' },
        credentials: {
          github: 'env:GH_TOKEN',
          anthropic: { value: 'sk-1', kind: 'api-key' },
          openai: 'sk-2',
        },
        engines: { claude: { env: { ANTHROPIC_BASE_URL: 'x', OPENAI_API_KEY: 'sk-3' }, binary: 'claude' } },
      }),
    ).toEqual([
      'webhook.secret',
      'credentials.anthropic.value',
      'credentials.openai',
      'engines.claude.env.OPENAI_API_KEY',
    ]);
    expect(literalSecretPaths({ webhook: { secret: 'env:S' } })).toEqual([]);
  });

  it('warns of a config holding a secret in a work tree until git ignores it; always of a data dir in one', async () => {
    const configPath = join(repo, 'loop', 'config.yaml');
    mkdirSync(join(repo, 'loop'));
    writeFileSync(configPath, 'webhook:\n  secret: s3cr3t-value-0123456789\n');
    const paths = {
      path: configPath,
      dataDir: join(state, 'x'),
      dataDirWorkTree: null,
      literalSecrets: ['webhook.secret'],
    };
    const before = await stateReport(paths, env);
    expect(before.config).toMatchObject({ workTree: repo, ignored: false, secrets: ['webhook.secret'] });
    expect(before.warnings).toHaveLength(1);
    expect(before.warnings[0]).toMatch(
      /holds secrets \(webhook\.secret\) and is inside the git work tree .* not git-ignored/,
    );

    expect(ignoreInWorkTree(join(repo, 'loop'))).toBe(join(repo, 'loop', '.gitignore'));
    const after = await stateReport(paths, env);
    expect(after.config.ignored).toBe(true);
    expect(after.warnings).toEqual([]);
    // Tracked anyway (added before the .gitignore, or forced): git publishes its changes.
    git(repo, 'add', '-f', configPath);
    expect((await stateReport(paths, env)).config.ignored).toBe(false);
    git(repo, 'rm', '-q', '--cached', configPath);
    // Secrets read from the environment: nothing to publish.
    expect((await stateReport({ ...paths, literalSecrets: [] }, env)).warnings).toEqual([]);

    const inRepo = { ...paths, dataDir: join(repo, 'data'), dataDirWorkTree: repo };
    expect((await stateReport(inRepo, env)).warnings.join('\n')).toMatch(
      /the data dir .*data is inside the git work tree/,
    );
  });

  it('warns all the same when git cannot say whether the config is ignored', () => {
    expect(
      stateWarnings({
        config: { path: '/r/c.yaml', workTree: '/r', secrets: ['webhook.secret'], ignored: null },
        dataDir: { path: '/s', workTree: null },
      })[0],
    ).toMatch(/git could not say/);
  });
});
