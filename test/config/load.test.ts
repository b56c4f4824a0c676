import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type LoadedConfig, type LoadOptions, loadConfig } from '../../src/config/load.js';
import { configJsonSchema } from '../../src/config/schema.js';
import { LoopError } from '../../src/core/errors.js';
import { capabilitiesOf, type EnginePreset, presetSchema } from '../../src/engines/preset.js';
import { BUILTIN_PRESETS } from '../../src/engines/presets.js';

let dir: string;

beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-config-')));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Write `.the-loop/config.yaml` (or another relative path) under the temp dir; returns its path. */
function writeConfig(text: string, relative = '.the-loop/config.yaml'): string {
  const path = join(dir, relative);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, text);
  return path;
}

const load = (options: Partial<LoadOptions> = {}): LoadedConfig =>
  loadConfig({ cwd: dir, env: {}, ...options });

function loadError(options: Partial<LoadOptions> = {}): LoopError {
  try {
    load(options);
  } catch (error) {
    expect(error).toBeInstanceOf(LoopError);
    return error as LoopError;
  }
  throw new Error('expected loadConfig to throw');
}

const builtin = (name: string): EnginePreset => presetSchema.parse(BUILTIN_PRESETS[name]);

describe('loadConfig: files', () => {
  it('no file: defaults, every built-in engine, data under <cwd>/.the-loop', () => {
    const loaded = load();
    expect(loaded.path).toBeNull();
    expect(loaded.dataDir).toBe(join(dir, '.the-loop'));
    expect(loaded.logFile).toBe(join(dir, '.the-loop', 'the-loop.log'));
    expect(loaded.secretValues).toEqual([]);
    expect(loaded.config.defaults).toEqual({
      engine: 'claude',
      runner: 'process',
      backstopSeconds: 3600,
      killGraceSeconds: 5,
    });
    expect(loaded.config.limits.maxLineBytes).toBe(16 * 1024 * 1024);
    expect(loaded.config.log.level).toBe('info');
    expect(Object.keys(loaded.engines).sort()).toEqual(Object.keys(BUILTIN_PRESETS).sort());
    for (const name of Object.keys(BUILTIN_PRESETS))
      expect(loaded.engines[name], name).toEqual(builtin(name));
  });

  it('an empty file is the default configuration, read from that file', () => {
    const path = writeConfig('');
    const loaded = load();
    expect(loaded.path).toBe(path);
    expect(loaded.config.defaults.engine).toBe('claude');
  });

  it('--config naming a missing file → config-missing (no silent fallback to defaults)', () => {
    const error = loadError({ configPath: 'nope/config.yaml' });
    expect(error.code).toBe('config-missing');
    expect(error.message).toContain(join(dir, 'nope/config.yaml'));
    expect(error.hint).toContain('config init');
  });

  it('THE_LOOP_CONFIG naming a missing file → config-missing', () => {
    expect(loadError({ env: { THE_LOOP_CONFIG: '/definitely/not/here.yaml' } }).code).toBe('config-missing');
  });

  it('--config wins over THE_LOOP_CONFIG', () => {
    const a = writeConfig('defaults:\n  engine: codex\n', 'a.yaml');
    writeConfig('defaults:\n  engine: gemini\n', 'b.yaml');
    const loaded = load({ configPath: 'a.yaml', env: { THE_LOOP_CONFIG: 'b.yaml' } });
    expect(loaded.path).toBe(a);
    expect(loaded.config.defaults.engine).toBe('codex');
  });

  it('invalid YAML → config-invalid naming the problem and its line', () => {
    writeConfig('defaults:\n  engine: claude\nengines: [1, 2\n');
    const error = loadError();
    expect(error.code).toBe('config-invalid');
    expect(error.message).toContain('is not valid YAML');
    expect(error.message).toMatch(/line \d+/);
  });

  it('duplicate keys → config-invalid', () => {
    writeConfig('dataDir: one\ndataDir: two\n');
    const error = loadError();
    expect(error.code).toBe('config-invalid');
    expect(error.message).toContain('Map keys must be unique');
    expect(error.message).toContain('line 2');
  });

  it('a 2 MB file is rejected before it is parsed', () => {
    writeConfig(`# padding\n${'#'.repeat(2 * 1024 * 1024)}\n`);
    const error = loadError();
    expect(error.code).toBe('config-invalid');
    expect(error.message).toContain('too large');
  });

  it.each([
    ['a list', '- dataDir: x\n- defaults: {}\n'],
    ['a scalar', 'just a string\n'],
    ['a number', '42\n'],
  ])('a top level that is %s is rejected', (_name, text) => {
    writeConfig(text);
    const error = loadError();
    expect(error.code).toBe('config-invalid');
    expect(error.message).toContain('the top level must be a mapping');
  });

  // An alias bomb ("billion laughs") makes the yaml library throw a plain ReferenceError from
  // doc.toJS({ maxAliasCount: 100 }) in readConfigFile (src/config/load.ts), which is not wrapped:
  // the caller gets an untyped exception instead of LoopError config-invalid.
  it('a YAML alias bomb is rejected as config-invalid (LoopError), not a raw ReferenceError', () => {
    const level = (name: string, ref: string) =>
      `${name}: &${name} [${Array(10).fill(`*${ref}`).join(', ')}]\n`;
    writeConfig(
      `a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n${level('b', 'a')}${level('c', 'b')}${level('d', 'c')}`,
    );
    expect(loadError().code).toBe('config-invalid');
  });
});

describe('loadConfig: env: references', () => {
  const text = 'engines:\n  claude:\n    env:\n      ANTHROPIC_API_KEY: env:MY_CLAUDE_KEY\n';

  it('a set variable replaces the reference and its value is listed as a secret', () => {
    writeConfig(text);
    const loaded = load({ env: { MY_CLAUDE_KEY: 'sk-ant-canary' } });
    expect(loaded.engines.claude?.env).toEqual({ ANTHROPIC_API_KEY: 'sk-ant-canary' });
    expect(loaded.secretValues).toEqual(['sk-ant-canary']);
    // The rest of the claude preset is still the built-in one.
    expect(loaded.engines.claude?.credentials).toEqual(builtin('claude').credentials);
  });

  it('an unset variable → env-missing naming the key path and the variable', () => {
    writeConfig(text);
    const error = loadError({ env: {} });
    expect(error.code).toBe('env-missing');
    expect(error.message).toContain('engines.claude.env.ANTHROPIC_API_KEY');
    expect(error.message).toContain('MY_CLAUDE_KEY');
  });

  it('an empty variable counts as unset; every missing one is listed, with array indexes', () => {
    writeConfig('defaults:\n  cwd: env:WORK_DIR\nengines:\n  claude:\n    extraArgs: ["--x", "env:EXTRA"]\n');
    const error = loadError({ env: { WORK_DIR: '' } });
    expect(error.code).toBe('env-missing');
    expect(error.message).toContain('defaults.cwd');
    expect(error.message).toContain('engines.claude.extraArgs[1]');
  });

  it('a malformed reference is reported with its key path', () => {
    writeConfig('dataDir: "env:not a name"\n');
    const error = loadError();
    expect(error.message).toContain('dataDir');
    expect(error.message).toContain('not a valid env reference');
  });
});

describe('loadConfig: validation names the key path', () => {
  it.each([
    ['defaults:\n  backstopSeconds: soon\n', 'defaults.backstopSeconds'],
    ['defaults:\n  runner: tmux-maybe\n', 'defaults.runner'],
    ['limits:\n  maxLineBytes: 10\n', 'limits.maxLineBytes'],
    ['log:\n  level: loud\n', 'log.level'],
    ['engines:\n  claude:\n    headless:\n      args: notalist\n', 'engines.claude.headless.args'],
    [
      'engines:\n  claude:\n    credentials:\n      - env: X\n        kind: free\n',
      'engines.claude.credentials[0].kind',
    ],
    ['engines:\n  Bad_Name:\n    binary: x\n', 'engines.Bad_Name'],
  ])('%j → config-invalid at %s', (text, path) => {
    writeConfig(text);
    const error = loadError();
    expect(error.code).toBe('config-invalid');
    expect(error.message).toContain(`${path}:`);
  });

  it('an unknown top-level key is rejected', () => {
    writeConfig('dataDir: x\nwebhooks: {}\n');
    const error = loadError();
    expect(error.code).toBe('config-invalid');
    expect(error.message).toContain('webhooks');
  });

  it('an unknown key inside an engine is rejected', () => {
    writeConfig('engines:\n  claude:\n    binry: /opt/claude\n');
    expect(loadError().message).toContain('binry');
  });
});

describe('loadConfig: engines', () => {
  it('overriding a built-in binary keeps every other field (credentials, headless args, env lists)', () => {
    writeConfig('engines:\n  claude:\n    binary: /opt/claude/bin/claude\n');
    const loaded = load();
    expect(loaded.engines.claude).toEqual({ ...builtin('claude'), binary: '/opt/claude/bin/claude' });
    for (const name of ['codex', 'gemini', 'grok', 'cursor-agent', 'ollama']) {
      expect(loaded.engines[name], name).toEqual(builtin(name));
    }
  });

  it('overriding a field with a schema default (usageScope) keeps the other defaulted fields of the built-in', () => {
    writeConfig('engines:\n  codex:\n    model: gpt-5.5\n');
    const codex = load().engines.codex;
    expect(codex).toEqual({ ...builtin('codex'), model: 'gpt-5.5' });
    expect(codex?.usageScope).toBe('thread');
    expect(codex?.passEnv).toContain('CODEX_HOME');
  });

  it('overriding headless.args keeps headless.start, resume, promptPrefix and promptArg', () => {
    writeConfig(
      'engines:\n  claude:\n    headless:\n      args: ["-p", "--output-format", "stream-json", "--verbose", "--debug"]\n',
    );
    const claude = load().engines.claude;
    expect(claude?.headless).toEqual({
      args: ['-p', '--output-format', 'stream-json', '--verbose', '--debug'],
      start: ['--session-id', '{sessionId}'],
      resume: ['--resume', '{sessionId}'],
      promptPrefix: ['--'],
      promptArg: '{prompt}',
    });
    expect(capabilitiesOf(claude as EnginePreset).resume).toBe(true);
  });

  it("overriding gemini's headless.args keeps its promptArg (--prompt=<text>) and its fixed env", () => {
    writeConfig('engines:\n  gemini:\n    headless:\n      args: ["--output-format", "stream-json"]\n');
    const gemini = load().engines.gemini;
    expect(gemini?.headless.promptArg).toBe('--prompt={prompt}');
    expect(gemini?.headless.start).toEqual(['--session-id', '{sessionId}']);
    expect(gemini?.env).toEqual(builtin('gemini').env);
  });

  it('an engine key with nothing under it (only comments) is no override', () => {
    writeConfig('engines:\n  claude:\n    # binary: /opt/claude\n');
    expect(load().engines.claude).toEqual(builtin('claude'));
  });

  it('arrays replace, they do not append', () => {
    writeConfig('engines:\n  claude:\n    passEnv: [ONLY_THIS]\n');
    expect(load().engines.claude?.passEnv).toEqual(['ONLY_THIS']);
  });

  it('an override that breaks a cross-field rule names the engine and the hint says it is an override', () => {
    writeConfig('engines:\n  claude:\n    headless:\n      start: []\n');
    const error = loadError();
    expect(error.code).toBe('config-invalid');
    expect(error.message).toContain('engines.claude.headless.start');
    expect(error.hint).toContain('override of the built-in "claude"');
  });

  it('a new engine on the text protocol validates, can be the default, and is unmetered', () => {
    writeConfig(
      [
        'defaults:',
        '  engine: aider',
        'engines:',
        '  aider:',
        '    binary: aider',
        '    protocol: text',
        '    sessionId: none',
        '    headless:',
        '      args: ["--yes", "--message"]',
        '',
      ].join('\n'),
    );
    const loaded = load();
    expect(loaded.config.defaults.engine).toBe('aider');
    expect(loaded.engines.aider).toEqual({
      binary: 'aider',
      protocol: 'text',
      sessionId: 'none',
      headless: { args: ['--yes', '--message'], start: [], promptPrefix: [], promptArg: '{prompt}' },
      versionArgs: ['--version'],
      usageScope: 'turn',
      credentials: [],
      passEnv: [],
      env: {},
      extraArgs: [],
      pty: false,
      sandbox: { writable: [] },
      permissions: { mode: 'auto', bypass: { args: [], interactiveArgs: [], env: {} } },
    });
    expect(capabilitiesOf(loaded.engines.aider as EnginePreset)).toMatchObject({
      resume: false,
      tmux: false,
      meter: 'none',
    });
  });

  it('pty is off by default and any engine can turn it on in config', () => {
    writeConfig('engines:\n  claude:\n    pty: true\n');
    const loaded = load();
    expect(loaded.engines.claude?.pty).toBe(true);
    // The rest of the built-in preset stays.
    expect(loaded.engines.claude?.protocol).toBe('claude-stream-json');
    expect(loaded.engines.codex?.pty).toBe(false);
    writeConfig('engines:\n  claude:\n    pty: "yes"\n');
    expect(loadError().message).toContain('engines.claude.pty');
  });

  it('an incomplete new engine → config-invalid listing the missing fields, with a hint', () => {
    writeConfig('engines:\n  foo:\n    binary: foo\n');
    const error = loadError();
    expect(error.code).toBe('config-invalid');
    expect(error.message).toContain('invalid engine "foo"');
    for (const path of ['engines.foo.protocol', 'engines.foo.headless', 'engines.foo.sessionId']) {
      expect(error.message).toContain(path);
    }
    expect(error.hint).toContain('not a built-in engine');
    expect(error.hint).toContain('headless.args');
  });

  it('defaults.engine naming an unknown engine → config-invalid, hint lists the known engines', () => {
    writeConfig(
      'defaults:\n  engine: nope\nengines:\n  mine:\n    binary: m\n    protocol: text\n    sessionId: none\n    headless: {args: []}\n',
    );
    const error = loadError();
    expect(error.code).toBe('config-invalid');
    expect(error.message).toContain('defaults.engine "nope"');
    for (const name of [...Object.keys(BUILTIN_PRESETS), 'mine']) expect(error.hint).toContain(name);
  });
});

describe('loadConfig: data directory and log file', () => {
  it('config dataDir is relative to the config file directory', () => {
    writeConfig('dataDir: state\n', 'conf/the-loop.yaml');
    const loaded = load({ configPath: 'conf/the-loop.yaml' });
    expect(loaded.dataDir).toBe(join(dir, 'conf', 'state'));
    expect(loaded.logFile).toBe(join(dir, 'conf', 'state', 'the-loop.log'));
  });

  it('an absolute config dataDir is used as is', () => {
    writeConfig(`dataDir: ${join(dir, 'abs')}\n`);
    expect(load().dataDir).toBe(join(dir, 'abs'));
  });

  it('THE_LOOP_DATA_DIR beats the config file; --data-dir beats both; both are relative to cwd', () => {
    writeConfig('dataDir: from-config\n');
    expect(load({ env: { THE_LOOP_DATA_DIR: 'from-env' } }).dataDir).toBe(join(dir, 'from-env'));
    expect(load({ env: { THE_LOOP_DATA_DIR: 'from-env' }, dataDir: 'from-flag' }).dataDir).toBe(
      join(dir, 'from-flag'),
    );
    expect(load({ dataDir: '/abs/flag' }).dataDir).toBe('/abs/flag');
  });

  it('without any dataDir the config file directory holds the data', () => {
    writeConfig('{}\n', 'elsewhere/c.yaml');
    expect(load({ configPath: 'elsewhere/c.yaml' }).dataDir).toBe(join(dir, 'elsewhere'));
  });

  it('a relative log.file is relative to the config file directory, not the data dir', () => {
    writeConfig('dataDir: state\nlog:\n  file: logs/loop.jsonl\n');
    const loaded = load();
    expect(loaded.logFile).toBe(join(dir, '.the-loop', 'logs', 'loop.jsonl'));
  });
});

describe('configJsonSchema', () => {
  it('is a JSON Schema object describing dataDir, defaults and engines, and is plain JSON', () => {
    const schema = configJsonSchema();
    expect(schema.$schema).toMatch(/json-schema\.org/);
    expect(schema.$id).toBe('https://the-loop.dev/schema/config.json');
    expect(schema.type).toBe('object');
    expect(schema.additionalProperties).toBe(false);
    const properties = schema.properties as Record<string, Record<string, unknown>>;
    expect(Object.keys(properties)).toEqual(
      expect.arrayContaining(['dataDir', 'defaults', 'engines', 'log', 'limits']),
    );
    expect(properties.dataDir?.type).toBe('string');
    const defaults = properties.defaults as {
      properties: Record<string, { default?: unknown; enum?: unknown }>;
    };
    expect(defaults.properties.engine?.default).toBe('claude');
    expect(defaults.properties.runner?.enum).toEqual(['process', 'tmux']);
    expect(properties.engines?.type).toBe('object');
    expect(JSON.parse(JSON.stringify(schema))).toEqual(schema);
  });
});

describe('references checked at load, secrets scoped', () => {
  it('names an unknown engine under routing or repos by its key', () => {
    const dir = mkdtempSync(join(tmpdir(), 'the-loop-cfg-refs-'));
    try {
      const file = join(dir, 'c.yaml');
      writeFileSync(file, 'repos:\n  acme/widgets:\n    path: ./widgets\n    engine: claud\n');
      expect(() => loadConfig({ cwd: dir, env: {}, configPath: file })).toThrow(
        /repos\.acme\/widgets\.engine: "claud" is not a known engine/,
      );
      writeFileSync(file, 'routing:\n  engine: nope\n');
      expect(() => loadConfig({ cwd: dir, env: {}, configPath: file })).toThrow(
        /routing\.engine: "nope" is not a known engine/,
      );
      writeFileSync(file, 'repos:\n  acme/widgets:\n    path: ./widgets\n');
      expect(loadConfig({ cwd: '/', env: {}, configPath: file }).config.repos['acme/widgets']?.path).toBe(
        join(dir, 'widgets'),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('treats engine environments and the webhook secret as secrets, not every env: value', () => {
    const dir = mkdtempSync(join(tmpdir(), 'the-loop-cfg-sec-'));
    try {
      const file = join(dir, 'c.yaml');
      writeFileSync(
        file,
        'defaults:\n  cwd: env:WORK\nwebhook:\n  secret: env:HOOK\nengines:\n  claude:\n    env:\n      ANTHROPIC_API_KEY: env:KEY\n',
      );
      const loaded = loadConfig({
        cwd: dir,
        env: { WORK: '/srv/work', HOOK: 'hook-secret-0123456789', KEY: 'sk-key-0123456789' },
        configPath: file,
      });
      expect(loaded.secretValues.sort()).toEqual(['hook-secret-0123456789', 'sk-key-0123456789']);
      expect(loaded.config.defaults.cwd).toBe('/srv/work');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
