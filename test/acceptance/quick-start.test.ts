/**
 * Issue 16, part 6: a fresh clone, `npm ci`, then each command of the README's Quick start, in
 * order, as written.
 *
 * The repository is cloned at HEAD (what is not committed is not in the clone: that is the point)
 * and the ```sh block of the clone's own README is read line by line (quick-start-script.ts: no
 * shell; a line it does not understand fails the test). `npm ci` installs and builds the clone
 * (the `prepare` script) from the npm cache; the `npx the-loop` lines run the clone's CLI with the
 * real Claude Code CLI (the clone's devDependency) in the default configuration `config init`
 * writes — sandbox, gateway, bypass permissions — against the local mock Anthropic API
 * (ANTHROPIC_BASE_URL: the gateway's upstream). The `export …=…` placeholders get fake, canary-like
 * values that must appear in no output and no file the commands leave.
 *
 * The first `npx the-loop` installs the clone into the npm cache's _npx directory as a link and
 * runs its `prepare` script (a second build): npm's way to run a project's own bin. The test removes
 * that entry afterwards.
 *
 * The environment is a new user's: a temporary HOME (with ~/src/widgets, a git repository of one
 * commit), XDG dirs and TMPDIR under the test's directory, the system PATH (not this checkout's
 * node_modules/.bin), and none of the npm_* variables an `npm test` run would pass down.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi } from '../fixtures/mock-apis/types.js';
import { ROOT } from '../helpers/cli.js';
import { type QuickStartStep, readQuickStart } from './quick-start-script.js';

const WI = 'github:octo/widgets#15';
const ANSWERS = [
  'The CI fails on main: quick-start answer one.',
  'Fixed, PR opened: quick-start answer two.',
];
/** Fake credentials shaped like real ones (the scrubber must know them by shape, too). */
const FAKE_KEY = `sk-ant-api03-${randomBytes(30).toString('base64url')}-quickstartAA`;
const FAKE_GH = `ghp_${randomBytes(18).toString('hex')}`;

/** Generous: `npm ci` builds better-sqlite3 (and what has no prebuild) and then the CLI, on a busy machine. */
const NPM_CI_TIMEOUT_MS = 15 * 60_000;
const COMMAND_TIMEOUT_MS = 3 * 60_000;

interface Ran {
  step: Extract<QuickStartStep, { kind: 'run' }>;
  code: number | null;
  stdout: string;
  stderr: string;
  seconds: number;
}

interface Context {
  clone: string;
  home: string;
  stateHome: string;
  sessionShortId?: string;
}

/**
 * What each README command promises, by command line (the executable `npx` aside). Every entry must
 * meet its command: a README edit that drops or changes one fails the test until this list follows.
 */
const PROMISES: Array<{ command: string; check: (r: Ran, c: Context) => void }> = [
  {
    command: 'npm ci',
    check: (_r, c) => {
      // The `prepare` script built the CLI the next lines run.
      expect(existsSync(join(c.clone, 'dist/cli.cjs')), 'npm ci built dist/cli.cjs').toBe(true);
    },
  },
  {
    command: 'the-loop config init',
    check: (r, c) => {
      expect(r.stdout).toContain(`Wrote ${join(c.clone, '.the-loop/config.yaml')}`);
      expect(existsSync(join(c.clone, '.the-loop/config.yaml'))).toBe(true);
    },
  },
  {
    command: 'the-loop doctor',
    // claude is found (the clone's node_modules/.bin, through npx) and answers its version.
    check: (r) => expect(r.stdout).toMatch(/^claude \(default\)\s+ok\s+\d+\.\d+\.\d+ \(Claude Code\)/m),
  },
  {
    command: `the-loop run ${WI} --cwd ~/src/widgets Why does the CI fail on main?`,
    check: (r, c) => {
      const created = /new session ([0-9a-f]{8})/.exec(r.stdout);
      expect(created, 'the first run creates a session').not.toBeNull();
      c.sessionShortId = created?.[1];
      expect(r.stdout).toContain(`cwd ${join(c.home, 'src/widgets')}`);
      expect(r.stdout).toContain(ANSWERS[0]);
      expect(r.stdout).toMatch(/turn 1 succeeded/);
    },
  },
  {
    command: `the-loop run ${WI} Fix it and open a PR.`,
    check: (r, c) => {
      expect(r.stdout).not.toContain('new session');
      expect(r.stdout).toContain(`session ${c.sessionShortId}`);
      expect(r.stdout).toContain(ANSWERS[1]);
      expect(r.stdout).toMatch(/turn 2 succeeded/);
    },
  },
  {
    command: 'the-loop sessions list',
    check: (r, c) =>
      expect(r.stdout).toMatch(new RegExp(`^${WI}\\s+claude\\s+process\\s.*\\b${c.sessionShortId}$`, 'm')),
  },
  {
    command: `the-loop sessions show ${WI}`,
    check: (r, c) => {
      expect(r.stdout).toMatch(new RegExp(`^Session ${c.sessionShortId}-`, 'm'));
      expect(r.stdout).toMatch(new RegExp(`work item\\s+${WI}`));
      expect(r.stdout).toMatch(/^\s+1\. succeeded · result/m);
      expect(r.stdout).toMatch(/^\s+2\. succeeded · result/m);
    },
  },
  {
    command: `the-loop sessions logs ${WI} --turn 2`,
    check: (r) => {
      expect(r.stdout).toMatch(/── turn 2 · /);
      expect(r.stdout).toContain(ANSWERS[1]);
      expect(r.stdout).not.toContain('turn 1');
      expect(r.stdout).not.toContain(ANSWERS[0]);
    },
  },
  {
    command: `the-loop sessions close ${WI}`,
    check: (r, c) => expect(r.stdout).toContain(`${WI}: session ${c.sessionShortId} closed`),
  },
];

/** The command line a promise is keyed by: argv joined, `npx` dropped, HOME written `~` again. */
const commandOf = (argv: string[], home: string) =>
  (argv[0] === 'npx' ? argv.slice(1) : argv)
    .map((w) => (w === home || w.startsWith(`${home}/`) ? `~${w.slice(home.length)}` : w))
    .join(' ');

/**
 * Run one command (argv, no shell) in its own process group, so that a timeout stops what it
 * started too (npm's install scripts, node-gyp): only that group, which is ours.
 */
function runStep(
  step: Ran['step'],
  options: { cwd: string; env: Record<string, string>; timeoutMs: number },
): Promise<Ran> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const [file = '', ...args] = step.argv;
    const child = spawn(file, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      reject(
        new Error(`README line ${step.line} timed out: ${step.source}\nstdout: ${stdout}\nstderr: ${stderr}`),
      );
    }, options.timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`README line ${step.line} did not start (${error.message}): ${step.source}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ step, code, stdout, stderr, seconds: (performance.now() - started) / 1000 });
    });
  });
}

/** Every file under `dir` that holds one of `needles` (its raw bytes), as `path: needle`. */
function filesHolding(dir: string, needles: string[]): string[] {
  if (!existsSync(dir)) return [];
  const found: string[] = [];
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    const bytes = readFileSync(path);
    for (const needle of needles) if (bytes.includes(needle)) found.push(`${path}: ${needle.slice(0, 12)}…`);
  }
  return found;
}

/**
 * npx runs a project's own bin by installing the project, as a link, into the npm cache's _npx
 * directory (and running its `prepare` script there): remove the entries that point at `dir`.
 */
function removeNpxEntriesOf(npmCache: string, dir: string): void {
  const npxCache = join(npmCache, '_npx');
  if (!existsSync(npxCache)) return;
  for (const entry of readdirSync(npxCache)) {
    try {
      const manifest = JSON.parse(readFileSync(join(npxCache, entry, 'package.json'), 'utf8')) as {
        _npx?: { packages?: unknown[] };
      };
      if (manifest._npx?.packages?.includes(dir))
        rmSync(join(npxCache, entry), { recursive: true, force: true });
    } catch {
      // Not one of npx's entries, or another process's being written: not ours to touch.
    }
  }
}

/** Live processes whose command line names a path under `dir` (Linux /proc), as `pid: argv`. */
function processesUnder(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      if (argv.includes(dir)) found.push(`${pid}: ${argv}`);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** The system PATH: this checkout's node_modules/.bin (an `npm test` run puts it first) left out. */
const systemPath = () =>
  (process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin')
    .split(':')
    .filter((p) => p !== '' && !p.endsWith('node_modules/.bin'))
    .join(':');

describe("the README's Quick start, on a fresh clone", () => {
  let root: string;
  let mock: MockApi;
  let context: Context;
  let env: Record<string, string>;
  const ran: Ran[] = [];

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-quickstart-'));
    const home = join(root, 'home');
    const clone = join(root, 'the-loop');
    const widgets = join(home, 'src/widgets');
    mkdirSync(widgets, { recursive: true });
    mkdirSync(join(root, 'tmp'));
    const git = (cwd: string, ...args: string[]) =>
      execFileSync('git', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    git(widgets, 'init', '-q', '-b', 'main');
    writeFileSync(join(widgets, 'README.md'), '# widgets\n');
    git(widgets, 'add', 'README.md');
    git(widgets, '-c', 'user.name=Widget Dev', '-c', 'user.email=dev@widgets.test', 'commit', '-qm', 'one');
    git(root, 'clone', '-q', ROOT, clone);
    mock = await startAnthropicMock({ script: ANSWERS.map((text) => ({ kind: 'text' as const, text })) });
    context = { clone, home, stateHome: join(root, 'state') };
    env = {
      PATH: systemPath(),
      HOME: home,
      LANG: 'C.UTF-8',
      TMPDIR: join(root, 'tmp'),
      XDG_STATE_HOME: context.stateHome,
      XDG_CONFIG_HOME: join(home, '.config'),
      XDG_CACHE_HOME: join(home, '.cache'),
      XDG_DATA_HOME: join(home, '.local/share'),
      // As root, Claude Code bypasses permissions only where it is told it is sandboxed.
      IS_SANDBOX: '1',
      // The engine's API, as a user behind a proxy would set it: the gateway forwards there.
      ANTHROPIC_BASE_URL: mock.url,
      // Nothing but the model requests (no update checks, no telemetry): nothing leaves the machine.
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
      // npm as .ci/run uses it (Node's headers from the system), from the machine's npm cache.
      npm_config_nodedir: process.env.npm_config_nodedir ?? '/usr',
      npm_config_cache: process.env.npm_config_cache ?? join(homedir(), '.npm'),
      npm_config_prefer_offline: 'true',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_update_notifier: 'false',
      npm_config_logs_dir: join(root, 'npm-logs'),
    };
  }, 120_000);

  afterAll(async () => {
    await mock?.close();
    if (env) removeNpxEntriesOf(env.npm_config_cache ?? '', context.clone);
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it(
    'runs every command of the block in order, each exiting 0 with what the README promises',
    async () => {
      const readme = readFileSync(join(context.clone, 'README.md'), 'utf8');
      const steps = readQuickStart(readme, {
        home: context.home,
        placeholders: { ANTHROPIC_API_KEY: FAKE_KEY, GH_TOKEN: FAKE_GH },
      });
      const met = new Set<string>();
      for (const step of steps) {
        if (step.kind === 'export') {
          env[step.name] = step.value;
          continue;
        }
        const timeoutMs =
          commandOf(step.argv, context.home) === 'npm ci' ? NPM_CI_TIMEOUT_MS : COMMAND_TIMEOUT_MS;
        const r = await runStep(step, { cwd: context.clone, env, timeoutMs });
        ran.push(r);
        const what = `README line ${step.line}: ${step.source}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
        expect(r.code, what).toBe(0);
        const promise = PROMISES.find((p) => p.command === commandOf(step.argv, context.home));
        if (promise) {
          met.add(promise.command);
          try {
            promise.check(r, context);
          } catch (error) {
            throw new Error(`${what}\n${(error as Error).message}`);
          }
        }
      }
      const unmet = PROMISES.filter((p) => !met.has(p.command)).map((p) => p.command);
      expect(unmet, "commands this test checks that the README's Quick start no longer runs").toEqual([]);
      console.info(
        `quick start: ${ran.map((r) => `${commandOf(r.step.argv, context.home).slice(0, 40)} ${r.seconds.toFixed(1)} s`).join(' · ')}`,
      );
    },
    NPM_CI_TIMEOUT_MS + 12 * COMMAND_TIMEOUT_MS,
  );

  it('turns went to the mock through the gateway, which held the key; the second resumed the first', () => {
    const turns = mock.modelTurns();
    expect(turns).toHaveLength(2);
    expect(turns.map((t) => t.headers['x-api-key'])).toEqual([FAKE_KEY, FAKE_KEY]);
    const second = JSON.stringify(turns[1]?.body);
    expect(second).toContain('Why does the CI fail on main?');
    expect(second).toContain(ANSWERS[0]);
    expect(turns[0]?.headers['x-claude-code-session-id']).toBe(turns[1]?.headers['x-claude-code-session-id']);
  });

  it('leaves the session closed, its two turns kept', async () => {
    const shown = await runStep(
      { kind: 'run', line: 0, source: 'check', argv: ['npx', 'the-loop', 'sessions', 'show', WI, '--json'] },
      { cwd: context.clone, env, timeoutMs: COMMAND_TIMEOUT_MS },
    );
    ran.push(shown);
    expect(shown.code, shown.stderr).toBe(0);
    const show = JSON.parse(shown.stdout) as { session: { status: string }; turns: Array<{ seq: number }> };
    expect(show.session.status).toBe('closed');
    expect(show.turns.map((t) => t.seq)).toEqual([1, 2]);
    // …and nothing the commands started still runs (a gateway, an engine, a build).
    expect(processesUnder(root)).toEqual([]);
  });

  it('shows the fake credentials in no output and no file the commands left', () => {
    expect(ran.length).toBeGreaterThan(0);
    for (const r of ran) {
      for (const secret of [FAKE_KEY, FAKE_GH]) {
        expect(
          r.stdout.includes(secret) || r.stderr.includes(secret),
          `${r.step.source} printed a secret`,
        ).toBe(false);
      }
    }
    const dirs = [join(context.clone, '.the-loop'), context.stateHome, context.home, join(root, 'tmp')];
    // The registry is where the grep looks (the state dir config init named), not somewhere else.
    const stateFiles = readdirSync(context.stateHome, { recursive: true }).map(String);
    expect(stateFiles.some((f) => f.endsWith('/the-loop.db'))).toBe(true);
    expect(dirs.flatMap((d) => filesHolding(d, [FAKE_KEY, FAKE_GH]))).toEqual([]);
  });
});
