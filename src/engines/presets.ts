import type { EnginePresetInput } from './preset.js';

/**
 * Built-in engine presets. Facts behind each field are in docs/engines.md (observed with the real
 * CLIs on this machine, see shared notes). Users override any field, or add engines, under
 * `engines.<name>` in the config.
 */

// Network/proxy variables every engine may need to reach its API.
const NETWORK_ENV = [
  'HTTPS_PROXY',
  'HTTP_PROXY',
  'NO_PROXY',
  'https_proxy',
  'http_proxy',
  'no_proxy',
  'NODE_EXTRA_CA_CERTS',
];

export const BUILTIN_PRESETS: Record<string, EnginePresetInput> = {
  claude: {
    description: 'Anthropic Claude Code',
    binary: 'claude',
    install: 'npm install -g @anthropic-ai/claude-code',
    protocol: 'claude-stream-json',
    headless: {
      args: ['-p', '--output-format', 'stream-json', '--verbose'],
      start: ['--session-id', '{sessionId}'],
      resume: ['--resume', '{sessionId}'],
      // `--` ends option parsing, so a turn text that starts with "-" is never read as a flag.
      promptPrefix: ['--'],
    },
    sessionId: 'assign',
    usageScope: 'turn',
    // In tmux: turns end on the Stop/StopFailure hooks; usage and tools come from the transcript.
    interactive: {
      args: ['--session-id', '{sessionId}', '--settings', '{settingsFile}'],
      hooks: 'claude-settings',
      transcript: 'claude-jsonl',
      firstRun: 'claude',
      submitDelayMs: 200,
    },
    // Headless turns get a PreToolUse hook that refuses what the repository's policy denies.
    policyHook: 'claude-pretooluse',
    // On a shared store the conversation file moves with the session between hosts.
    sessionFiles: 'claude-projects',
    // Claude Code keeps a path prefix in ANTHROPIC_BASE_URL (…/m/<token>/v1/messages) and sends
    // ANTHROPIC_API_KEY as x-api-key (ANTHROPIC_AUTH_TOKEN / CLAUDE_CODE_OAUTH_TOKEN as a bearer).
    gateway: { api: 'anthropic', baseUrlEnv: 'ANTHROPIC_BASE_URL', upstream: 'https://api.anthropic.com' },
    // In the sandbox: a config dir of its own per session (transcripts, .claude.json), seeded with
    // the operator's settings; everything else of HOME is read-only.
    sandbox: {
      writable: ['$CLAUDE_CONFIG_DIR/'],
      home: { env: 'CLAUDE_CONFIG_DIR', default: '~/.claude', seed: ['settings.json'] },
    },
    // Root may bypass permissions only where it says it is sandboxed (IS_SANDBOX=1). (The TUI's
    // bypass warning dialog is skipped by the runner's settings file.)
    permissions: {
      mode: 'auto',
      bypass: {
        args: ['--dangerously-skip-permissions'],
        interactiveArgs: ['--dangerously-skip-permissions'],
        env: { IS_SANDBOX: '1' },
      },
    },
    // Off by default; `otel: { enabled: true }` meters the session from its OTLP export.
    otel: { enabled: false, signal: 'logs', env: { CLAUDE_CODE_ENABLE_TELEMETRY: '1' } },
    credentials: [
      { env: 'ANTHROPIC_API_KEY', kind: 'api-key' },
      { env: 'ANTHROPIC_AUTH_TOKEN', kind: 'api-key' },
      { env: 'CLAUDE_CODE_OAUTH_TOKEN', kind: 'subscription' },
      { env: 'AWS_BEARER_TOKEN_BEDROCK', kind: 'cloud' },
      { env: 'AWS_ACCESS_KEY_ID', kind: 'cloud' },
      { env: 'AWS_SECRET_ACCESS_KEY', kind: 'cloud' },
      { env: 'AWS_SESSION_TOKEN', kind: 'cloud' },
      { env: 'GOOGLE_APPLICATION_CREDENTIALS', kind: 'cloud' },
    ],
    passEnv: [
      'ANTHROPIC_BASE_URL',
      'ANTHROPIC_MODEL',
      'ANTHROPIC_SMALL_FAST_MODEL',
      'CLAUDE_CONFIG_DIR',
      'CLAUDE_CODE_USE_BEDROCK',
      'CLAUDE_CODE_USE_VERTEX',
      'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC',
      'CLAUDE_CODE_MAX_RETRIES',
      'DISABLE_AUTOUPDATER',
      'IS_SANDBOX',
      'AWS_REGION',
      'AWS_PROFILE',
      'CLOUD_ML_REGION',
      'ANTHROPIC_VERTEX_PROJECT_ID',
      ...NETWORK_ENV,
    ],
  },
  codex: {
    description: 'OpenAI Codex CLI',
    binary: 'codex',
    install: 'npm install -g @openai/codex',
    protocol: 'codex-json',
    headless: {
      // `exec` is the non-interactive mode; it refuses to run outside a git repo without the flag.
      // The shell policy keeps the credential out of the environment of commands the model runs
      // (codex passes its whole environment to them by default).
      args: [
        'exec',
        '--json',
        '--skip-git-repo-check',
        '-c',
        'shell_environment_policy.exclude=["CODEX_API_KEY","OPENAI_API_KEY"]',
      ],
      start: [],
      // `codex exec --json resume <thread_id> <text>`: the id is captured from `thread.started`.
      resume: ['resume', '{sessionId}'],
      promptPrefix: ['--'],
    },
    // Codex cannot be given a thread id up front; it announces one in `thread.started`.
    sessionId: 'capture',
    // Codex ignores OPENAI_BASE_URL for its built-in provider: a custom provider pointed at the
    // gateway is declared on the command line (no token in it: the key comes from env_key).
    gateway: {
      api: 'openai',
      baseUrlEnv: 'OPENAI_BASE_URL',
      upstream: 'https://api.openai.com/v1',
      keyEnv: 'OPENAI_API_KEY',
      args: [
        '-c',
        'model_provider="the-loop"',
        '-c',
        'model_providers.the-loop={ name = "the-loop", base_url = "{gatewayUrl}", env_key = "OPENAI_API_KEY", wire_api = "responses" }',
      ],
    },
    sandbox: {
      writable: ['$CODEX_HOME/'],
      home: { env: 'CODEX_HOME', default: '~/.codex', seed: ['config.toml'] },
    },
    // Its own sandbox cannot nest inside bubblewrap; ours is the guard then.
    permissions: { mode: 'auto', bypass: { args: ['--dangerously-bypass-approvals-and-sandbox'] } },
    // On a resumed turn, `turn.completed.usage` is the thread's running total.
    usageScope: 'thread',
    interactive: { args: [] },
    // The built-in provider reads CODEX_API_KEY (OPENAI_API_KEY only through a custom provider's
    // env_key); without either it uses $CODEX_HOME/auth.json (API key or ChatGPT login).
    credentials: [
      { env: 'CODEX_API_KEY', kind: 'api-key' },
      { env: 'OPENAI_API_KEY', kind: 'api-key' },
    ],
    passEnv: ['CODEX_HOME', 'OPENAI_BASE_URL', ...NETWORK_ENV],
  },
  gemini: {
    description: 'Google Gemini CLI',
    binary: 'gemini',
    install: 'npm install -g @google/gemini-cli',
    protocol: 'gemini-stream-json',
    headless: {
      args: ['--output-format', 'stream-json', '--skip-trust'],
      start: ['--session-id', '{sessionId}'],
      resume: ['--resume', '{sessionId}'],
      // One element, `--prompt=<text>`: `-p <text>` fails on text starting with "-", and anything
      // after `--` is dropped by its parser.
      promptArg: '--prompt={prompt}',
    },
    sessionId: 'assign',
    usageScope: 'turn',
    interactive: { args: ['--session-id', '{sessionId}'] },
    gateway: {
      api: 'gemini',
      baseUrlEnv: 'GOOGLE_GEMINI_BASE_URL',
      upstream: 'https://generativelanguage.googleapis.com',
    },
    // GEMINI_CLI_HOME is the directory that holds `.gemini/`.
    sandbox: {
      writable: ['$GEMINI_CLI_HOME/'],
      home: { env: 'GEMINI_CLI_HOME', default: '~', seed: ['.gemini/settings.json'] },
    },
    // --yolo approves every tool call: only where the sandbox and the gateway guard.
    permissions: { mode: 'auto', bypass: { args: ['--yolo'], interactiveArgs: ['--yolo'] } },
    // Without it the CLI relaunches itself in a second node process that ignores SIGTERM and
    // outlives a killed parent; with it there is one process to stop.
    env: { GEMINI_CLI_NO_RELAUNCH: 'true' },
    credentials: [
      { env: 'GEMINI_API_KEY', kind: 'api-key' },
      { env: 'GOOGLE_API_KEY', kind: 'api-key' },
      { env: 'GOOGLE_APPLICATION_CREDENTIALS', kind: 'cloud' },
    ],
    passEnv: [
      'GOOGLE_GEMINI_BASE_URL',
      'GEMINI_MODEL',
      'GOOGLE_GENAI_USE_VERTEXAI',
      'GOOGLE_CLOUD_PROJECT',
      'GOOGLE_CLOUD_LOCATION',
      ...NETWORK_ENV,
    ],
  },
  grok: {
    description: 'xAI Grok CLI',
    binary: 'grok',
    install: 'see https://docs.x.ai (Grok CLI install), then make sure `grok` is on PATH',
    // Its streaming JSON format is not parsed yet: plain text, recorded as unmetered.
    protocol: 'text',
    headless: {
      args: ['--no-auto-update', '--always-approve', '--output-format', 'plain'],
      start: ['--session-id', '{sessionId}'],
      resume: ['--resume', '{sessionId}'],
      promptArg: '--single={prompt}',
    },
    sessionId: 'assign',
    interactive: { args: ['--session-id', '{sessionId}'] },
    credentials: [{ env: 'XAI_API_KEY', kind: 'api-key' }],
    passEnv: [...NETWORK_ENV],
  },
  'cursor-agent': {
    description: 'Cursor Agent CLI',
    binary: 'cursor-agent',
    install: 'see https://cursor.com/cli (installs `cursor-agent`)',
    // Its stream-json events (system/init, assistant, result with session_id) follow Claude Code's
    // shapes; it reports no token usage, so its turns are recorded as unmetered.
    protocol: 'claude-stream-json',
    headless: {
      args: ['-p', '--output-format', 'stream-json', '--force'],
      start: [],
      resume: ['--resume', '{sessionId}'],
      promptPrefix: [],
    },
    // No pre-assigned chat id: captured from its output. That also keeps it out of tmux.
    sessionId: 'capture',
    interactive: { args: [] },
    credentials: [{ env: 'CURSOR_API_KEY', kind: 'api-key' }],
    passEnv: [...NETWORK_ENV],
  },
  ollama: {
    description: 'Ollama (local models)',
    binary: 'ollama',
    install: 'see https://ollama.com/download',
    model: 'llama3.2',
    protocol: 'text',
    // One-shot: no session to resume; every turn starts fresh. Unmetered.
    headless: { args: ['run', '{model}'], start: [], promptPrefix: ['--'] },
    sessionId: 'none',
    credentials: [],
    passEnv: ['OLLAMA_HOST'],
  },
};
