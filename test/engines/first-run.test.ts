/**
 * First-run dialogs answered in Claude Code's config file before its TUI starts: real files in a
 * temporary directory, read back as Claude Code would read them.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { answerFirstRun, claudeConfigFile } from '../../src/engines/first-run.js';
import { thrown } from '../helpers/check.js';

let root: string;
let home: string;
let cwd: string;

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-first-run-')));
  home = join(root, 'home');
  cwd = join(root, 'work', 'widgets');
  mkdirSync(home, { recursive: true });
  mkdirSync(cwd, { recursive: true });
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

interface ClaudeJson {
  hasCompletedOnboarding?: unknown;
  projects?: Record<string, Record<string, unknown>>;
  [key: string]: unknown;
}

const read = (file: string): ClaudeJson => JSON.parse(readFileSync(file, 'utf8')) as ClaudeJson;
const mode = (file: string): number => statSync(file).mode & 0o777;

describe('claudeConfigFile', () => {
  it('CLAUDE_CONFIG_DIR wins over HOME; else HOME', () => {
    expect(claudeConfigFile({ CLAUDE_CONFIG_DIR: '/cfg/claude', HOME: '/home/u' })).toBe(
      '/cfg/claude/.claude.json',
    );
    expect(claudeConfigFile({ HOME: '/home/u' })).toBe('/home/u/.claude.json');
    // An empty or relative CLAUDE_CONFIG_DIR is not a place: HOME is used.
    expect(claudeConfigFile({ CLAUDE_CONFIG_DIR: '', HOME: '/home/u' })).toBe('/home/u/.claude.json');
    expect(claudeConfigFile({ CLAUDE_CONFIG_DIR: 'rel/dir', HOME: '/home/u' })).toBe('/home/u/.claude.json');
  });

  it('neither an absolute CLAUDE_CONFIG_DIR nor an absolute HOME → config-invalid', () => {
    for (const env of [{}, { HOME: '' }, { HOME: 'home/u' }, { CLAUDE_CONFIG_DIR: 'rel', HOME: 'rel' }]) {
      const error = thrown(() => claudeConfigFile(env));
      expect(error.code).toBe('config-invalid');
      expect(error.message).toContain('CLAUDE_CONFIG_DIR');
      expect(error.hint).toBeDefined();
    }
  });
});

describe('answerFirstRun (claude)', () => {
  it('creates a missing file: onboarding done, the folder trusted, mode 0600, no temp file left', () => {
    const file = join(home, '.claude.json');
    const note = answerFirstRun('claude', { HOME: home }, cwd);
    expect(note).toContain(file);
    expect(note).toContain('onboarding done');
    expect(note).toContain(`trusted ${cwd}`);
    expect(read(file)).toEqual({
      hasCompletedOnboarding: true,
      projects: { [cwd]: { hasTrustDialogAccepted: true } },
    });
    expect(mode(file)).toBe(0o600);
    expect(readdirSync(home)).toEqual(['.claude.json']);
  });

  it('trusts both the path given and its real path when cwd is reached through a symlink', () => {
    const link = join(root, 'link-to-widgets');
    symlinkSync(cwd, link);
    const file = join(home, '.claude.json');
    answerFirstRun('claude', { HOME: home }, link);
    expect(read(file).projects).toEqual({
      [link]: { hasTrustDialogAccepted: true },
      [cwd]: { hasTrustDialogAccepted: true },
    });
    // Reached by its real path next time: already trusted, nothing to change.
    expect(answerFirstRun('claude', { HOME: home }, cwd)).toBeUndefined();
  });

  it('keeps every other key of an existing file (nested ones too) and its mode', () => {
    const file = join(home, '.claude.json');
    const other = join(root, 'other');
    const existing = {
      numStartups: 7,
      theme: 'dark',
      oauthAccount: { emailAddress: 'a@example.com', organizationUuid: 'org-1' },
      tipsHistory: { 'new-user-warmup': 3 },
      projects: {
        [other]: {
          hasTrustDialogAccepted: false,
          allowedTools: ['Bash'],
          mcpServers: { x: { command: 'y' } },
        },
        [cwd]: { allowedTools: ['Edit'], history: [{ display: 'hi' }], hasTrustDialogAccepted: false },
      },
      hasCompletedOnboarding: false,
    };
    writeFileSync(file, JSON.stringify(existing));
    chmodSync(file, 0o640);
    const note = answerFirstRun('claude', { HOME: home }, cwd);
    expect(note).toContain('onboarding done');
    expect(read(file)).toEqual({
      ...existing,
      hasCompletedOnboarding: true,
      projects: {
        [other]: existing.projects[other],
        [cwd]: { allowedTools: ['Edit'], history: [{ display: 'hi' }], hasTrustDialogAccepted: true },
      },
    });
    expect(mode(file)).toBe(0o640);
    expect(readdirSync(home)).toEqual(['.claude.json']);
  });

  it('keeps the mode of an existing file under a restrictive umask too', () => {
    const file = join(home, '.claude.json');
    writeFileSync(file, '{}');
    chmodSync(file, 0o644);
    const previous = process.umask(0o077);
    try {
      answerFirstRun('claude', { HOME: home }, cwd);
    } finally {
      process.umask(previous);
    }
    expect(mode(file)).toBe(0o644);
  });

  it('a second call changes nothing and does not rewrite the file', () => {
    const file = join(home, '.claude.json');
    expect(answerFirstRun('claude', { HOME: home }, cwd)).toBeDefined();
    // Back-date the file: a rewrite would give it a new mtime (and a rename a new inode).
    utimesSync(file, new Date('2020-01-01T00:00:00Z'), new Date('2020-01-01T00:00:00Z'));
    const before = statSync(file);
    const bytes = readFileSync(file);
    expect(answerFirstRun('claude', { HOME: home }, cwd)).toBeUndefined();
    const after = statSync(file);
    expect(after.ino).toBe(before.ino);
    expect(after.mtimeMs).toBe(before.mtimeMs);
    expect(readFileSync(file).equals(bytes)).toBe(true);
    // A new folder is one more change, and only that.
    const elsewhere = join(root, 'elsewhere');
    mkdirSync(elsewhere);
    expect(answerFirstRun('claude', { HOME: home }, elsewhere)).toBe(`${file}: trusted ${elsewhere}`);
    expect(Object.keys(read(file).projects ?? {})).toEqual([cwd, elsewhere]);
  });

  it('writes $CLAUDE_CONFIG_DIR/.claude.json (creating the dir) when set, and leaves HOME alone', () => {
    const config = join(root, 'claude-config', 'nested');
    answerFirstRun('claude', { CLAUDE_CONFIG_DIR: config, HOME: home }, cwd);
    expect(read(join(config, '.claude.json'))).toMatchObject({ hasCompletedOnboarding: true });
    expect(existsSync(join(home, '.claude.json'))).toBe(false);
    expect(readdirSync(config)).toEqual(['.claude.json']);
  });

  it('no usable location → config-invalid, and nothing is written', () => {
    const error = thrown(() => answerFirstRun('claude', { HOME: 'relative' }, cwd));
    expect(error.code).toBe('config-invalid');
    expect(readdirSync(home)).toEqual([]);
  });

  for (const [label, content] of [
    ['invalid JSON', '{"hasCompletedOnboarding": true,'],
    ['a JSON array', '[{"hasCompletedOnboarding": true}]'],
    ['null', 'null'],
    ['a string', '"hello"'],
    ['a number', '42'],
  ] as const) {
    it(`a file holding ${label} → config-invalid, the file byte-for-byte unchanged, no temp file`, () => {
      const file = join(home, '.claude.json');
      writeFileSync(file, content, { mode: 0o640 });
      const before = statSync(file);
      const error = thrown(() => answerFirstRun('claude', { HOME: home }, cwd));
      expect(error.code).toBe('config-invalid');
      expect(error.message).toContain(file);
      expect(error.hint).toBeDefined();
      expect(readFileSync(file, 'utf8')).toBe(content);
      expect(statSync(file).ino).toBe(before.ino);
      expect(mode(file)).toBe(0o640);
      expect(readdirSync(home)).toEqual(['.claude.json']);
    });
  }

  it('an empty (whitespace) file is treated as no config yet', () => {
    const file = join(home, '.claude.json');
    writeFileSync(file, '  \n');
    answerFirstRun('claude', { HOME: home }, cwd);
    expect(read(file)).toEqual({
      hasCompletedOnboarding: true,
      projects: { [cwd]: { hasTrustDialogAccepted: true } },
    });
  });

  it('a config path that cannot be read (a directory) → config-invalid, nothing left behind', () => {
    mkdirSync(join(home, '.claude.json'));
    const error = thrown(() => answerFirstRun('claude', { HOME: home }, cwd));
    expect(error.code).toBe('config-invalid');
    expect(readdirSync(home)).toEqual(['.claude.json']);
    expect(readdirSync(join(home, '.claude.json'))).toEqual([]);
  });

  it('hostile shapes: projects a string, projects[cwd] an array → replaced by objects', () => {
    const file = join(home, '.claude.json');
    writeFileSync(file, JSON.stringify({ projects: 'not an object', keep: 1 }));
    answerFirstRun('claude', { HOME: home }, cwd);
    expect(read(file)).toEqual({
      keep: 1,
      hasCompletedOnboarding: true,
      projects: { [cwd]: { hasTrustDialogAccepted: true } },
    });

    writeFileSync(
      file,
      JSON.stringify({ hasCompletedOnboarding: true, projects: { [cwd]: ['x'], other: null, n: 5 } }),
    );
    expect(answerFirstRun('claude', { HOME: home }, cwd)).toBe(`${file}: trusted ${cwd}`);
    expect(read(file)).toEqual({
      hasCompletedOnboarding: true,
      projects: { [cwd]: { hasTrustDialogAccepted: true }, other: null, n: 5 },
    });

    // A truthy non-true value is not an answer.
    writeFileSync(
      file,
      JSON.stringify({ hasCompletedOnboarding: 'yes', projects: { [cwd]: { hasTrustDialogAccepted: 1 } } }),
    );
    const note = answerFirstRun('claude', { HOME: home }, cwd);
    expect(note).toContain('onboarding done');
    expect(note).toContain(`trusted ${cwd}`);
    expect(read(file)).toEqual({
      hasCompletedOnboarding: true,
      projects: { [cwd]: { hasTrustDialogAccepted: true } },
    });
  });

  it('a cwd with spaces and unicode works', () => {
    const odd = join(root, 'my prój 😀', 'wörk tree');
    mkdirSync(odd, { recursive: true });
    const file = join(home, '.claude.json');
    answerFirstRun('claude', { HOME: home }, odd);
    expect(read(file).projects).toEqual({ [odd]: { hasTrustDialogAccepted: true } });
    expect(answerFirstRun('claude', { HOME: home }, odd)).toBeUndefined();
  });
});
