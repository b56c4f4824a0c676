import { describe, expect, it } from 'vitest';
import { buildHeadlessArgv, buildInteractiveArgv } from '../../src/engines/args.js';
import { BASE_ENV_ALLOW, buildEngineEnv } from '../../src/engines/env.js';
import {
  capabilitiesOf,
  type EngineCapabilities,
  type EnginePreset,
  type EnginePresetInput,
  presetSchema,
} from '../../src/engines/preset.js';
import { BUILTIN_PRESETS } from '../../src/engines/presets.js';
import { thrown } from '../helpers/check.js';

const builtin = (name: string): EnginePreset => {
  const input = BUILTIN_PRESETS[name];
  if (!input) throw new Error(`no built-in preset ${name}`);
  return presetSchema.parse(input);
};

/** A minimal custom engine; override fields per test. */
const custom = (fields: Partial<EnginePresetInput> = {}): EnginePresetInput => ({
  binary: 'my-agent',
  protocol: 'text',
  headless: { args: ['--print'] },
  sessionId: 'none',
  ...fields,
});

function issuesOf(input: unknown): { path: string; message: string }[] {
  const result = presetSchema.safeParse(input);
  if (result.success) return [];
  return result.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
}

describe('built-in presets', () => {
  it('ship the six documented engines', () => {
    expect(Object.keys(BUILTIN_PRESETS).sort()).toEqual([
      'claude',
      'codex',
      'cursor-agent',
      'gemini',
      'grok',
      'ollama',
    ]);
  });

  it.each(Object.keys(BUILTIN_PRESETS))('%s validates with presetSchema', (name) => {
    expect(issuesOf(BUILTIN_PRESETS[name])).toEqual([]);
  });

  const expected: Record<string, EngineCapabilities> = {
    claude: {
      resume: true,
      preassignedId: true,
      capturedId: false,
      interactive: true,
      tmux: true,
      meter: 'stream-json',
    },
    codex: {
      resume: true,
      preassignedId: false,
      capturedId: true,
      interactive: true,
      tmux: false,
      meter: 'codex-json',
    },
    gemini: {
      resume: true,
      preassignedId: true,
      capturedId: false,
      interactive: true,
      tmux: true,
      meter: 'gemini-json',
    },
    grok: {
      resume: true,
      preassignedId: true,
      capturedId: false,
      interactive: true,
      tmux: true,
      meter: 'none',
    },
    'cursor-agent': {
      resume: true,
      preassignedId: false,
      capturedId: true,
      interactive: true,
      tmux: false,
      meter: 'stream-json',
    },
    ollama: {
      resume: false,
      preassignedId: false,
      capturedId: false,
      interactive: false,
      tmux: false,
      meter: 'none',
    },
  };

  it.each(Object.keys(expected))('%s capabilities', (name) => {
    expect(capabilitiesOf(builtin(name))).toEqual(expected[name]);
  });
});

describe('capabilitiesOf follows fields, not names (invariant 8)', () => {
  it('a renamed copy of each built-in has the same capabilities', () => {
    for (const name of Object.keys(BUILTIN_PRESETS)) {
      const renamed = presetSchema.parse({
        ...BUILTIN_PRESETS[name],
        binary: '/opt/bin/renamed',
        description: 'something else entirely',
      });
      expect(capabilitiesOf(renamed), name).toEqual(capabilitiesOf(builtin(name)));
    }
  });

  it('the same fields under another engine name in a config-like map give the same capabilities', () => {
    const engines: Record<string, EnginePreset> = {
      'not-claude': builtin('claude'),
      claude: builtin('ollama'),
    };
    expect(capabilitiesOf(engines['not-claude'] as EnginePreset).tmux).toBe(true);
    expect(capabilitiesOf(engines.claude as EnginePreset).resume).toBe(false);
  });

  it('changing a field changes the capability: claude with a captured id loses tmux and pre-assigned ids', () => {
    const claude = BUILTIN_PRESETS.claude as EnginePresetInput;
    const captured = presetSchema.parse({
      ...claude,
      sessionId: 'capture',
      headless: { ...claude.headless, start: [] },
      interactive: { args: [] },
    });
    expect(capabilitiesOf(captured)).toEqual({
      resume: true,
      preassignedId: false,
      capturedId: true,
      interactive: true,
      tmux: false,
      meter: 'stream-json',
    });
  });

  it('an assign engine whose TUI args do not pin the id cannot run in tmux', () => {
    const claude = BUILTIN_PRESETS.claude as EnginePresetInput;
    expect(capabilitiesOf(presetSchema.parse({ ...claude, interactive: { args: [] } })).tmux).toBe(false);
  });

  it('dropping headless.resume drops resume', () => {
    const gemini = BUILTIN_PRESETS.gemini as EnginePresetInput;
    const { resume: _resume, ...headless } = gemini.headless;
    expect(capabilitiesOf(presetSchema.parse({ ...gemini, headless })).resume).toBe(false);
  });

  it('a custom engine on the text protocol is unmetered; on a structured protocol it gets that meter', () => {
    expect(capabilitiesOf(presetSchema.parse(custom())).meter).toBe('none');
    expect(capabilitiesOf(presetSchema.parse(custom({ protocol: 'codex-json' }))).meter).toBe('codex-json');
    expect(capabilitiesOf(presetSchema.parse(custom({ protocol: 'gemini-stream-json' }))).meter).toBe(
      'gemini-json',
    );
  });
});

describe('presetSchema cross-field checks', () => {
  it('sessionId "assign" without {sessionId} in headless.start', () => {
    expect(issuesOf(custom({ sessionId: 'assign', headless: { args: [], start: ['--new'] } }))).toEqual([
      { path: 'headless.start', message: expect.stringContaining('needs {sessionId} in headless.start') },
    ]);
  });

  it('{sessionId} in headless.start when the id is captured', () => {
    expect(
      issuesOf(custom({ sessionId: 'capture', headless: { args: [], start: ['--id', '{sessionId}'] } })),
    ).toEqual([
      { path: 'headless.start', message: expect.stringContaining('cannot be used in headless.start') },
    ]);
  });

  it('headless.resume without {sessionId}', () => {
    expect(
      issuesOf(custom({ sessionId: 'capture', headless: { args: [], resume: ['--continue'] } })),
    ).toEqual([{ path: 'headless.resume', message: 'headless.resume must contain {sessionId}' }]);
  });

  it('headless.resume on an engine with sessionId "none"', () => {
    expect(
      issuesOf(custom({ sessionId: 'none', headless: { args: [], resume: ['--resume', '{sessionId}'] } })),
    ).toEqual([{ path: 'headless.resume', message: expect.stringContaining('has no id to resume') }]);
  });

  it('{model} in argv without a model', () => {
    expect(issuesOf(custom({ headless: { args: ['run', '{model}'] } }))).toEqual([
      { path: 'model', message: 'the argv uses {model} but no model is set' },
    ]);
    expect(issuesOf(custom({ headless: { args: ['run', '{model}'] }, model: 'llama3.2' }))).toEqual([]);
  });

  it('several problems are all reported', () => {
    const paths = issuesOf(
      custom({ sessionId: 'assign', headless: { args: ['{model}'], start: [], resume: ['--continue'] } }),
    ).map((i) => i.path);
    expect(paths.sort()).toEqual(['headless.resume', 'headless.start', 'model']);
  });

  it('field checks: unknown keys, bad env names, unknown protocol', () => {
    expect(issuesOf({ ...custom(), surprise: true }).map((i) => i.path)).toEqual(['']);
    expect(issuesOf(custom({ passEnv: ['BAD-NAME'] })).map((i) => i.path)).toEqual(['passEnv.0']);
    expect(issuesOf(custom({ credentials: [{ env: '1X', kind: 'api-key' }] })).map((i) => i.path)).toEqual([
      'credentials.0.env',
    ]);
    expect(issuesOf({ ...custom(), protocol: 'xml' }).map((i) => i.path)).toEqual(['protocol']);
  });
});

describe('buildHeadlessArgv', () => {
  const ID = '11111111-2222-4333-8444-555555555555';

  it('claude: first turn pins the id, later turns resume it; "--" before the prompt', () => {
    const claude = builtin('claude');
    expect(buildHeadlessArgv(claude, { first: true, engineSessionId: ID, prompt: 'hi' })).toEqual([
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--session-id',
      ID,
      '--',
      'hi',
    ]);
    expect(buildHeadlessArgv(claude, { first: false, engineSessionId: ID, prompt: 'again' })).toEqual([
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--resume',
      ID,
      '--',
      'again',
    ]);
  });

  it('codex: no id on the first turn; `resume <id>` after', () => {
    const codex = builtin('codex');
    const common = [
      'exec',
      '--json',
      '--skip-git-repo-check',
      '-c',
      'shell_environment_policy.exclude=["CODEX_API_KEY","OPENAI_API_KEY"]',
    ];
    expect(buildHeadlessArgv(codex, { first: true, engineSessionId: undefined, prompt: 'p' })).toEqual([
      ...common,
      '--',
      'p',
    ]);
    expect(buildHeadlessArgv(codex, { first: false, engineSessionId: 'thread-1', prompt: 'p' })).toEqual([
      ...common,
      'resume',
      'thread-1',
      '--',
      'p',
    ]);
  });

  it('gemini: the prompt travels as one element, --prompt=<text>, so text starting with "-" is not a flag', () => {
    const argv = buildHeadlessArgv(builtin('gemini'), { first: true, engineSessionId: ID, prompt: '-rf /' });
    expect(argv).toEqual([
      '--output-format',
      'stream-json',
      '--skip-trust',
      '--session-id',
      ID,
      '--prompt=-rf /',
    ]);
  });

  it('promptArg must contain {prompt} exactly once', () => {
    expect(issuesOf(custom({ headless: { args: [], promptArg: '--message' } })).map((i) => i.path)).toEqual([
      'headless.promptArg',
    ]);
    expect(
      issuesOf(custom({ headless: { args: [], promptArg: '{prompt}{prompt}' } })).map((i) => i.path),
    ).toEqual(['headless.promptArg']);
    expect(issuesOf(custom({ headless: { args: [], promptArg: '--msg={prompt}!' } }))).toEqual([]);
  });

  it('a custom promptArg wraps the text: prefix and suffix around it, one element', () => {
    const preset = presetSchema.parse(custom({ headless: { args: ['x'], promptArg: '--msg=<{prompt}>' } }));
    expect(buildHeadlessArgv(preset, { first: true, engineSessionId: undefined, prompt: 'a b' })).toEqual([
      'x',
      '--msg=<a b>',
    ]);
  });

  /** How each built-in wraps the turn text in its final argv element (from its preset's promptArg). */
  const LAST: Record<string, (prompt: string) => string> = {
    claude: (p) => p,
    codex: (p) => p,
    gemini: (p) => `--prompt=${p}`,
    grok: (p) => `--single=${p}`,
    'cursor-agent': (p) => p,
    ollama: (p) => p,
  };

  const hostile = [
    'two words',
    'it\'s "quoted"',
    'line one\nline two\r\n',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal shell expansion is the point
    '$(rm -rf ~) `id` ${HOME}',
    '-p --dangerously-skip-permissions',
    '--',
    '{sessionId} and {model} are not placeholders here',
    'nor is {prompt}, twice: {prompt}',
    // String.prototype.replace patterns: must not be interpreted.
    "$& $1 $$ $` $' $<name>",
    '; | & > < * ? ~ \\ \0 \u001b[31m',
    '',
  ];

  it('every built-in is covered by the table above', () => {
    expect(Object.keys(LAST).sort()).toEqual(Object.keys(BUILTIN_PRESETS).sort());
  });

  it.each(hostile)('the prompt %j is the last element, unchanged, for every built-in', (prompt) => {
    for (const name of Object.keys(BUILTIN_PRESETS)) {
      const preset = builtin(name);
      const wrap = LAST[name] as (p: string) => string;
      for (const first of [true, false]) {
        if (!first && !capabilitiesOf(preset).resume) continue;
        const argv = buildHeadlessArgv(preset, { first, engineSessionId: ID, prompt });
        expect(argv.at(-1), `${name} first=${first}`).toBe(wrap(prompt));
        // Everything before it is the preset's own argv, whatever the prompt.
        const plain = buildHeadlessArgv(preset, { first, engineSessionId: ID, prompt: 'plain' });
        expect(argv.slice(0, -1), `${name} first=${first}`).toEqual(plain.slice(0, -1));
      }
    }
  });

  it('resume without an engine session id → LoopError session-missing', () => {
    const error = thrown(() =>
      buildHeadlessArgv(builtin('claude'), { first: false, engineSessionId: undefined, prompt: 'x' }),
    );
    expect(error.code).toBe('session-missing');
    expect(error.hint).toContain('sessions close');
    expect(
      thrown(() => buildHeadlessArgv(builtin('codex'), { first: false, engineSessionId: '', prompt: 'x' }))
        .code,
    ).toBe('session-missing');
  });

  it('resume on an engine that cannot resume → LoopError engine-unsupported', () => {
    const error = thrown(() =>
      buildHeadlessArgv(builtin('ollama'), { first: false, engineSessionId: ID, prompt: 'x' }),
    );
    expect(error.code).toBe('engine-unsupported');
  });

  it('a first turn of an assign engine without the id to pin → LoopError, not a literal "{sessionId}"', () => {
    const error = thrown(() =>
      buildHeadlessArgv(builtin('claude'), { first: true, engineSessionId: undefined, prompt: 'x' }),
    );
    expect(error.code).toBe('internal');
    expect(error.message).toContain('{sessionId}');
  });

  it('buildInteractiveArgv pins the id; an engine without a TUI is an error', () => {
    expect(buildInteractiveArgv(builtin('claude'), ID, '/s/claude-settings.json')).toEqual([
      '--session-id',
      ID,
      '--settings',
      '/s/claude-settings.json',
    ]);
    // A placeholder with no value is an error, never an empty argument.
    expect(thrown(() => buildInteractiveArgv(builtin('claude'), ID)).code).toBe('internal');
    expect(buildInteractiveArgv(builtin('codex'), ID)).toEqual([]);
    expect(thrown(() => buildInteractiveArgv(builtin('ollama'), ID)).code).toBe('engine-unsupported');
  });
});

describe('buildEngineEnv', () => {
  const daemonEnv: Record<string, string | undefined> = {
    PATH: '/usr/bin:/bin',
    HOME: '/home/loop',
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    LC_CTYPE: 'UTF-8',
    TERM: 'xterm-256color',
    HTTPS_PROXY: 'http://proxy:3128',
    UNSET_ONE: undefined,
    // Must never reach any engine.
    THE_LOOP_WEBHOOK_SECRET: 'whsec-canary',
    GITHUB_TOKEN: 'ghp-canary',
    NPM_TOKEN: 'npm-canary',
    LCX: 'not-a-locale',
    lc_all: 'lower-case-is-not-LC_',
    // Credentials and settings of various engines.
    ANTHROPIC_API_KEY: 'sk-ant-canary',
    CLAUDE_CODE_OAUTH_TOKEN: 'oauth-canary',
    ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
    AWS_SECRET_ACCESS_KEY: 'aws-canary',
    CODEX_API_KEY: 'codex-canary',
    CODEX_HOME: '/home/loop/.codex',
    GEMINI_API_KEY: 'gemini-canary',
  };

  it('codex gets the base allow-list, LC_*, its pass-through and its own credential — nothing else', () => {
    const { env, secretValues, credential } = buildEngineEnv(builtin('codex'), daemonEnv);
    expect(env).toEqual({
      PATH: '/usr/bin:/bin',
      HOME: '/home/loop',
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      LC_CTYPE: 'UTF-8',
      TERM: 'xterm-256color',
      HTTPS_PROXY: 'http://proxy:3128',
      CODEX_API_KEY: 'codex-canary',
      CODEX_HOME: '/home/loop/.codex',
    });
    expect(credential).toEqual({ env: 'CODEX_API_KEY', kind: 'api-key' });
    expect(secretValues).toEqual(['codex-canary']);
    const values = Object.values(env);
    for (const canary of [
      'whsec-canary',
      'ghp-canary',
      'npm-canary',
      'aws-canary',
      'sk-ant-canary',
      'gemini-canary',
    ]) {
      expect(values).not.toContain(canary);
    }
  });

  it('claude gets its cloud credentials; the daemon secrets still do not pass', () => {
    const { env, secretValues, credential } = buildEngineEnv(builtin('claude'), daemonEnv);
    expect(env.ANTHROPIC_API_KEY).toBe('sk-ant-canary');
    expect(env.AWS_SECRET_ACCESS_KEY).toBe('aws-canary');
    expect(env.ANTHROPIC_BASE_URL).toBe('http://127.0.0.1:9');
    expect(env.THE_LOOP_WEBHOOK_SECRET).toBeUndefined();
    expect(env.GITHUB_TOKEN).toBeUndefined();
    expect(env.CODEX_API_KEY).toBeUndefined();
    expect(env.GEMINI_API_KEY).toBeUndefined();
    // The first declared credential that is set wins; every credential value present is a secret.
    expect(credential).toEqual({ env: 'ANTHROPIC_API_KEY', kind: 'api-key' });
    expect(secretValues.sort()).toEqual(['aws-canary', 'oauth-canary', 'sk-ant-canary']);
  });

  it('the credential is resolved by kind and variable name', () => {
    const claude = builtin('claude');
    expect(buildEngineEnv(claude, { CLAUDE_CODE_OAUTH_TOKEN: 'o' }).credential).toEqual({
      env: 'CLAUDE_CODE_OAUTH_TOKEN',
      kind: 'subscription',
    });
    expect(buildEngineEnv(claude, { AWS_BEARER_TOKEN_BEDROCK: 'b' }).credential).toEqual({
      env: 'AWS_BEARER_TOKEN_BEDROCK',
      kind: 'cloud',
    });
    // An empty variable is not a credential.
    const empty = buildEngineEnv(claude, { ANTHROPIC_API_KEY: '', CLAUDE_CODE_OAUTH_TOKEN: 'o' });
    expect(empty.credential).toEqual({ env: 'CLAUDE_CODE_OAUTH_TOKEN', kind: 'subscription' });
    expect(empty.secretValues).toEqual(['o']);
    expect(buildEngineEnv(claude, { PATH: '/bin' })).toEqual({
      env: { PATH: '/bin' },
      secretValues: [],
      credential: null,
    });
  });

  it('an engine without credentials (ollama) resolves none and passes its own variables', () => {
    const { env, credential, secretValues } = buildEngineEnv(builtin('ollama'), {
      ...daemonEnv,
      OLLAMA_HOST: '127.0.0.1:11434',
    });
    expect(credential).toBeNull();
    expect(secretValues).toEqual([]);
    expect(env.OLLAMA_HOST).toBe('127.0.0.1:11434');
    expect(env.ANTHROPIC_API_KEY).toBeUndefined();
  });

  it('preset env overrides the daemon environment, and a credential set there is resolved and secret', () => {
    const preset = presetSchema.parse({
      ...BUILTIN_PRESETS.gemini,
      env: { HOME: '/sandbox', GEMINI_API_KEY: 'from-config', GEMINI_CLI_NO_RELAUNCH: 'true' },
    });
    const { env, credential, secretValues } = buildEngineEnv(preset, daemonEnv);
    expect(env.HOME).toBe('/sandbox');
    expect(env.GEMINI_API_KEY).toBe('from-config');
    expect(env.GEMINI_CLI_NO_RELAUNCH).toBe('true');
    expect(credential).toEqual({ env: 'GEMINI_API_KEY', kind: 'api-key' });
    expect(secretValues).toEqual(['from-config']);
  });

  it('passEnv extends the allow-list by exact name only', () => {
    const preset = presetSchema.parse(custom({ passEnv: ['MY_SETTING'] }));
    const { env } = buildEngineEnv(preset, {
      MY_SETTING: '1',
      MY_SETTING_2: '2',
      my_setting: '3',
      GITHUB_TOKEN: 't',
    });
    expect(env).toEqual({ MY_SETTING: '1' });
  });

  it('the base allow-list holds no secret-looking names', () => {
    for (const name of BASE_ENV_ALLOW) expect(name).not.toMatch(/KEY|TOKEN|SECRET|PASSWORD/);
  });
});
