import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { fakeEngineConfig, makeProject, NODE_BIN_DIR, runCli } from '../helpers/cli.js';

describe('config init | check | schema', () => {
  const project = makeProject();
  afterAll(() => project.cleanup());
  const cli = (args: string[], env: Record<string, string> = {}) => runCli(args, { cwd: project.dir, env });

  it('init writes a commented, valid starter config and its schema, and refuses to overwrite', async () => {
    const path = join(project.dir, 'fresh/.the-loop/config.yaml');
    const res = await cli(['--config', path, 'config', 'init']);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/Wrote .*config\.yaml/);
    const text = readFileSync(path, 'utf8');
    expect(text).toMatch(/^# yaml-language-server: \$schema=\.\/config\.schema\.json/);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(parse(text)).toMatchObject({ defaults: { engine: 'claude', runner: 'process' } });
    const schema = JSON.parse(readFileSync(join(project.dir, 'fresh/.the-loop/config.schema.json'), 'utf8'));
    expect(schema.properties.engines).toBeDefined();
    const again = await cli(['--config', path, 'config', 'init']);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/already exists/);
    expect(again.stderr).toMatch(/--force/);
    expect((await cli(['--config', path, 'config', 'init', '--force'])).code).toBe(0);
    const check = await cli(['--config', path, 'config', 'check', '--json']);
    expect(check.code).toBe(0);
    expect(JSON.parse(check.stdout)).toMatchObject({ valid: true, path });
  });

  it('check shows capabilities derived from each engine declaration', async () => {
    writeFileSync(
      project.configPath,
      'engines:\n  mine:\n    binary: my-agent\n    protocol: text\n    sessionId: none\n    headless:\n      args: ["--print"]\n',
    );
    const res = await cli(['config', 'check', '--json']);
    expect(res.code).toBe(0);
    const engines = JSON.parse(res.stdout).engines as Array<{
      name: string;
      capabilities: Record<string, unknown>;
    }>;
    const byName = Object.fromEntries(engines.map((e) => [e.name, e.capabilities]));
    expect(byName.mine).toMatchObject({ resume: false, preassignedId: false, tmux: false, meter: 'none' });
    expect(byName.claude).toMatchObject({
      resume: true,
      preassignedId: true,
      tmux: true,
      meter: 'stream-json',
    });
    expect(byName.codex).toMatchObject({ resume: true, capturedId: true, tmux: false, meter: 'codex-json' });
    expect(byName['cursor-agent']).toMatchObject({ tmux: false });
    const human = await cli(['config', 'check']);
    expect(human.stdout).toMatch(/mine\s+my-agent\s+text\s+no\s+none\s+no\s+unmetered/);
  });

  it('check names the key path and the env variable that is missing', async () => {
    writeFileSync(
      project.configPath,
      'engines:\n  claude:\n    env:\n      ANTHROPIC_API_KEY: env:NOT_SET_ANYWHERE_42\n',
    );
    const res = await cli(['config', 'check']);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(
      /engines\.claude\.env\.ANTHROPIC_API_KEY: environment variable NOT_SET_ANYWHERE_42 is not set/,
    );
    const ok = await cli(['config', 'check', '--json'], { NOT_SET_ANYWHERE_42: 'sk-very-secret-value-123' });
    expect(ok.code).toBe(0);
    expect(ok.stdout).not.toContain('sk-very-secret-value-123');
  });

  it.each([
    ['not yaml: [unclosed', /not valid YAML/],
    ['- just\n- a list\n', /top level must be a mapping/],
    ['defaults:\n  engine: claude\ndefaults:\n  engine: codex\n', /not valid YAML/],
    ['surprise: true\n', /Unrecognized key: "surprise"/],
    [
      'engines:\n  new-thing:\n    binary: x\n',
      /invalid engine "new-thing"[\s\S]*engines\.new-thing\.protocol/,
    ],
    ['engines:\n  Bad_Name:\n    binary: x\n', /engine names are lower-case/],
    ['defaults:\n  engine: nope\n', /defaults\.engine "nope" is not a known engine/],
    [
      'engines:\n  claude:\n    sessionId: assign\n    headless:\n      start: []\n',
      /needs \{sessionId\} in headless\.start/,
    ],
  ])('rejects %j clearly', async (text, message) => {
    writeFileSync(project.configPath, text);
    const res = await cli(['config', 'check']);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(message);
    expect(res.stderr).not.toMatch(/unexpected error/);
  });

  it('rejects an oversized config file', async () => {
    writeFileSync(project.configPath, `# ${'x'.repeat(2 * 1024 * 1024)}\n`);
    const res = await cli(['config', 'check']);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/too large for a config file/);
  });

  it('schema prints a JSON Schema', async () => {
    const res = await cli(['config', 'schema']);
    const schema = JSON.parse(res.stdout);
    expect(schema.$schema).toMatch(/json-schema\.org/);
    expect(Object.keys(schema.properties)).toEqual(
      expect.arrayContaining(['dataDir', 'log', 'defaults', 'limits', 'engines']),
    );
  });
});

describe('doctor', () => {
  const project = makeProject();
  afterAll(() => project.cleanup());

  it('finds the installed engines with their versions and says how to install the others', async () => {
    const res = await runCli(['doctor', '--json'], {
      cwd: project.dir,
      env: { PATH: `${NODE_BIN_DIR}:/usr/bin:/bin` },
    });
    expect(res.code).toBe(0);
    const report = JSON.parse(res.stdout) as {
      engines: Array<{ engine: string; path: string | null; version: string | null; install: string }>;
    };
    const by = Object.fromEntries(report.engines.map((e) => [e.engine, e]));
    expect(by.claude?.version).toMatch(/^2\.1\.\d+ \(Claude Code\)$/);
    expect(by.codex?.version).toMatch(/^codex-cli 0\.\d+\.\d+$/);
    expect(by.gemini?.version).toMatch(/^0\.\d+\.\d+$/);
    expect(by.ollama?.path).toBeNull();
    expect(by.ollama?.install).toMatch(/ollama/);
    const human = await runCli(['doctor'], {
      cwd: project.dir,
      env: { PATH: `${NODE_BIN_DIR}:/usr/bin:/bin` },
    });
    expect(human.stdout).toMatch(/To install the missing engines:[\s\S]*grok:/);
  });

  it('exits 1 and says so when the default engine is missing', async () => {
    const res = await runCli(['doctor'], { cwd: project.dir, env: { PATH: '/usr/bin:/bin' } });
    expect(res.code).toBe(1);
    expect(res.stdout).toMatch(/The default engine \(claude\) is missing/);
    expect(res.stdout).toMatch(/npm install -g @anthropic-ai\/claude-code/);
  });
});

describe('serve (daemon entry)', () => {
  it('on a fresh checkout: writes a config with a generated secret, listens, prints status, stops cleanly', async () => {
    const project = makeProject();
    try {
      rmSync(project.configPath);
      const res = await runCli(['serve', '--once', '--port', '0'], {
        cwd: project.dir,
        env: { PATH: `${NODE_BIN_DIR}:/usr/bin:/bin` },
      });
      expect(res.stderr).toBe('');
      expect(res.code).toBe(0);
      expect(res.stdout).toMatch(
        /No config found: wrote .*\.the-loop\/config\.yaml with a generated webhook secret/,
      );
      expect(res.stdout).toMatch(/webhook\s+http:\/\/127\.0\.0\.1:\d+\/gh-webhook/);
      expect(res.stdout).toMatch(/engine\s+claude: 2\.1\.\d+/);
      // --once stops at once: it never says Ctrl-C stops it.
      expect(res.stdout).toMatch(/Ready; stopping \(--once\)\.\nStopped\.\n$/);
      expect(res.stdout).not.toMatch(/Ctrl-C/);
      const config = parse(readFileSync(project.configPath, 'utf8')) as { webhook: { secret: string } };
      expect(config.webhook.secret).toMatch(/^[0-9a-f]{64}$/);
      expect(res.stdout).not.toContain(config.webhook.secret);
      expect(statSync(project.configPath).mode & 0o777).toBe(0o600);
      expect(existsSync(join(project.dir, '.the-loop/the-loop.db'))).toBe(true);
      expect(existsSync(join(project.dir, '.the-loop/dispatch.lock'))).toBe(false);
    } finally {
      project.cleanup();
    }
  });

  it('refuses to start without a webhook secret, saying how to set one', async () => {
    const project = makeProject({ repos: {} });
    try {
      const res = await runCli(['serve', '--once', '--port', '0'], { cwd: project.dir });
      expect(res.code).toBe(2);
      expect(res.stderr).toMatch(/no webhook secret configured/);
      expect(res.stderr).toMatch(/config init/);
    } finally {
      project.cleanup();
    }
  });
});

describe('secrets an engine echoes', () => {
  let project: ReturnType<typeof makeProject>;
  beforeAll(() => {
    project = makeProject();
    const state = join(project.dir, 'state');
    mkdirSync(state);
    writeFileSync(project.configPath, JSON.stringify(fakeEngineConfig(state)));
  });
  afterAll(() => project.cleanup());

  it('are scrubbed before output is cut, so no part of a key survives a truncation', async () => {
    const canary = 'sk-ant-canary-cut-0123456789abcdef';
    const res = await runCli(['run', 'github:o/r#10', 'mode:long-secret'], {
      cwd: project.dir,
      env: { ANTHROPIC_API_KEY: canary },
    });
    expect(res.code).toBe(0);
    const logs = await runCli(['sessions', 'logs', 'github:o/r#10', '--json'], { cwd: project.dir });
    expect(logs.stdout).toMatch(/KEY=\[sec/);
    const prefix = canary.slice(0, 12);
    for (const out of [res.stdout, logs.stdout]) expect(out).not.toContain(prefix);
    const db = readFileSync(join(project.dir, '.the-loop', 'the-loop.db'));
    expect(db.includes(prefix)).toBe(false);
  });

  it('are scrubbed from the output, the registry and the log', async () => {
    const canary = 'sk-ant-canary-echo-0123456789';
    const res = await runCli(['run', 'github:o/r#9', 'mode:echo-secret'], {
      cwd: project.dir,
      env: { ANTHROPIC_API_KEY: canary },
    });
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/the key is \[secret\]/);
    const json = await runCli(['sessions', 'logs', 'github:o/r#9', '--json'], { cwd: project.dir });
    expect(json.stdout).toMatch(/the key is \[secret\]/);
    for (const out of [res.stdout, res.stderr, json.stdout, json.stderr]) expect(out).not.toContain(canary);
    for (const file of ['the-loop.db', 'the-loop.db-wal', 'the-loop.log']) {
      const path = join(project.dir, '.the-loop', file);
      if (existsSync(path)) expect(readFileSync(path).includes(canary), file).toBe(false);
    }
  });
});
