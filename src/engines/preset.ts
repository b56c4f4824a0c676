import { z } from 'zod';
import { CREDENTIAL_KINDS } from '../core/credential.js';
import { ENV_NAME, MODEL_API_NAMES, POLICY_HOOKS, PROTOCOLS } from './capabilities.js';

/**
 * An engine is data: everything the code needs to know about a coding CLI is declared here, and
 * what it can do (resume, pre-assigned ids, tmux, metering) is derived from these fields by
 * `capabilitiesOf` — never from the engine's name (invariant 8).
 */

const envName = z.string().regex(ENV_NAME, 'must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)');

const argv = z.array(z.string().max(4096)).max(256);

export const credentialSchema = z
  .object({
    env: envName.describe('Environment variable that carries the credential.'),
    kind: z
      .enum(CREDENTIAL_KINDS)
      .describe(
        'Who pays when this credential is used: an API key account, a subscription, or a cloud account.',
      ),
  })
  .strict();

export const headlessSchema = z
  .object({
    args: argv.describe('Arguments of every headless turn.'),
    start: argv
      .default([])
      .describe('Added on the first turn of a session, e.g. ["--session-id", "{sessionId}"].'),
    resume: argv
      .optional()
      .describe('Added on later turns to continue the session; absent: the engine cannot resume.'),
    promptPrefix: argv.default([]).describe('Placed right before the turn text, e.g. ["--"] or ["-p"].'),
    promptArg: z
      .string()
      .max(256)
      .refine((t) => t.split('{prompt}').length === 2, 'must contain {prompt} exactly once')
      .default('{prompt}')
      .describe('The final argv element; {prompt} is the turn text, e.g. "--prompt={prompt}".'),
  })
  .strict();

export const presetGatewaySchema = z
  .object({
    api: z.enum(MODEL_API_NAMES).describe('The model API the engine speaks.'),
    baseUrlEnv: envName
      .optional()
      .describe(
        'The variable the engine reads its API base URL from: set to the gateway for each session; the value it would have had is where the gateway forwards.',
      ),
    upstream: z
      .string()
      .regex(/^https?:\/\/\S+$/, 'an http(s) URL')
      .max(2048)
      .describe('Where the gateway forwards when baseUrlEnv has no value (e.g. https://api.anthropic.com).'),
    keyEnv: envName
      .optional()
      .describe(
        'The variable the engine reads its key from (set to the capability token). Default: the credential variable that is set.',
      ),
    args: argv
      .default([])
      .describe(
        "Added (headless and TUI) when the gateway serves the engine: {gatewayUrl} is the session's model base URL (it carries no token).",
      ),
  })
  .strict();

/** The preset's fields without the cross-field checks (so config can declare partial overrides). */
export const presetObjectSchema = z
  .object({
    description: z.string().optional(),
    binary: z.string().min(1).describe('Executable name (looked up on PATH) or absolute path.'),
    install: z.string().optional().describe('How to install the binary, shown by `the-loop doctor`.'),
    versionArgs: argv.default(['--version']),
    model: z.string().optional().describe('Value of the {model} placeholder.'),
    protocol: z.enum(PROTOCOLS).describe('How the headless output is parsed into turn events.'),
    headless: headlessSchema,
    sessionId: z
      .enum(['assign', 'capture', 'none'])
      .describe(
        'assign: we pre-assign a UUID ({sessionId} in headless.start); capture: the engine announces one; none.',
      ),
    usageScope: z
      .enum(['turn', 'thread'])
      .default('turn')
      .describe(
        "turn: reported usage is the turn's; thread: it is the session's running total (the turn's is the difference).",
      ),
    interactive: z
      .object({
        args: argv.describe(
          'Arguments of the TUI; {sessionId} pins the session, {settingsFile} is the generated hooks file.',
        ),
        hooks: z
          .enum(['claude-settings'])
          .optional()
          .describe(
            "How the TUI reports its turns: 'claude-settings' = Claude Code command hooks in a --settings file.",
          ),
        transcript: z
          .enum(['claude-jsonl'])
          .optional()
          .describe(
            "Where usage and tool events come from in the TUI: 'claude-jsonl' = Claude Code's transcript file.",
          ),
        firstRun: z
          .enum(['claude'])
          .optional()
          .describe(
            "Dialogs the TUI shows on a first run, answered in its config dir before it starts: 'claude' = onboarding done and the working directory trusted, in Claude Code's .claude.json.",
          ),
        submitDelayMs: z
          .number()
          .int()
          .min(0)
          .max(5000)
          .default(200)
          .describe(
            'Pause between pasting a prompt and pressing Enter (an Enter right after a paste can be swallowed).',
          ),
      })
      .strict()
      .optional()
      .describe('The interactive TUI (for the tmux runner).'),
    credentials: z.array(credentialSchema).max(32).default([]),
    passEnv: z
      .array(envName)
      .max(256)
      .default([])
      .describe('Extra environment variables passed through from the daemon.'),
    env: z.record(envName, z.string()).default({}).describe('Environment variables set for the engine.'),
    extraArgs: argv.default([]).describe('Added after the headless arguments, before the turn text.'),
    policyHook: z
      .enum(POLICY_HOOKS)
      .optional()
      .describe(
        "How the merge policy is enforced before a tool runs, on headless turns: 'claude-pretooluse' = a PreToolUse command hook in a --settings file (added to the argv). Without one, a forbidden act is found in the turn's events after it ran: a breach that pauses the session.",
      ),
    sessionFiles: z
      .enum(['claude-projects'])
      .optional()
      .describe(
        "Where the engine keeps a headless session's conversation, so a store shared by several hosts (PostgreSQL) carries it to the host that runs the session's next turn (after a host failure or `sessions move`): 'claude-projects' = projects/<cwd>/<session id>.jsonl in its config directory (sandbox.home). Saved after every turn, restored before the next one on another host.",
      ),
    otel: z
      .object({
        enabled: z
          .boolean()
          .default(false)
          .describe(
            "Meter this engine's headless turns (process runner) with OpenTelemetry: its OTLP exporter is pointed at the daemon's receiver (/v1/logs, /v1/metrics) and what it exports becomes the session's ledger rows (meter otel), instead of its protocol's meter. TUI sessions keep the transcript meter.",
          ),
        signal: z
          .enum(['logs', 'metrics'])
          .default('logs')
          .describe(
            'Which signal carries the usage: logs = one api_request event per model request (per-request rows, with request ids); metrics = token and cost counters per export interval. Only that exporter is turned on, so nothing is counted twice.',
          ),
        env: z
          .record(envName, z.string())
          .default({})
          .describe("Switches that turn the engine's exporter on, e.g. CLAUDE_CODE_ENABLE_TELEMETRY=1."),
        exportIntervalMs: z
          .number()
          .int()
          .min(100)
          .max(600_000)
          .default(1000)
          .describe(
            'How often the engine exports (OTEL_LOGS_EXPORT_INTERVAL / OTEL_METRIC_EXPORT_INTERVAL).',
          ),
      })
      .strict()
      .optional()
      .describe('OpenTelemetry metering: how to turn the exporter on, and whether to use it.'),
    gateway: presetGatewaySchema
      .optional()
      .describe(
        "How the engine reaches its model API through the daemon's gateway (the real key stays in the daemon; the engine gets a capability token). Absent: the engine talks to its API itself, with the credential in its environment.",
      ),
    sandbox: z
      .object({
        writable: z
          .array(z.string().min(1).max(4096))
          .max(64)
          .default([])
          .describe(
            "The engine's own files and directories it must write inside the sandbox (~ and $VAR expand against its environment; an unset variable skips the entry; a trailing / marks a directory that is made when missing, other entries are bound only when they exist).",
          ),
        home: z
          .object({
            env: envName.describe(
              "The variable naming the engine's config directory, e.g. CLAUDE_CONFIG_DIR.",
            ),
            default: z
              .string()
              .min(1)
              .max(4096)
              .describe('Where it is when the variable is not set, e.g. ~/.claude.'),
            seed: z
              .array(
                z
                  .string()
                  .min(1)
                  .max(255)
                  .regex(
                    /^(?!\/)(?!.*(?:^|\/)\.\.(?:\/|$))[^\0\n]+$/,
                    'a relative path inside the directory',
                  ),
              )
              .max(32)
              .default([])
              .describe(
                "Files copied from the operator's directory into the session's on its first turn (settings, never credentials).",
              ),
          })
          .strict()
          .optional()
          .describe(
            "In the sandbox, the engine gets a config directory of its own per session (<dataDir>/homes/<slug>/<engine>), not the operator's: nothing it writes there reaches another session or the operator's own use of the engine, and the operator's login and history stay out of its sight.",
          ),
      })
      .strict()
      .prefault({}),
    permissions: z
      .object({
        mode: z
          .enum(['auto', 'bypass', 'default'])
          .default('auto')
          .describe(
            "bypass: the engine's own permission prompts are pre-answered (its bypass flags); default: the engine asks, and a headless engine refuses what needs approval; auto: bypass inside the sandbox with the gateway in front (they are the guard), default otherwise.",
          ),
        bypass: z
          .object({
            args: argv.default([]).describe('Added to headless turns in bypass mode.'),
            interactiveArgs: argv.default([]).describe('Added to the TUI in bypass mode.'),
            env: z.record(envName, z.string().max(4096)).default({}).describe('Set in bypass mode.'),
          })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({}),
    pty: z
      .boolean()
      .default(false)
      .describe(
        'Process runner: run the engine on a pseudo-terminal (stdout and stderr merged), so `the-loop sessions keys` can press keys in it while a turn runs.',
      ),
  })
  .strict();

export const presetSchema = presetObjectSchema.superRefine((preset, ctx) => {
  const hasId = (args: readonly string[]) => args.some((a) => a.includes('{sessionId}'));
  if (preset.sessionId === 'assign' && !hasId(preset.headless.start)) {
    ctx.addIssue({
      code: 'custom',
      path: ['headless', 'start'],
      message: 'sessionId "assign" needs {sessionId} in headless.start (how the first turn pins the id)',
    });
  }
  if (preset.sessionId !== 'assign' && hasId(preset.headless.start)) {
    ctx.addIssue({
      code: 'custom',
      path: ['headless', 'start'],
      message: `{sessionId} cannot be used in headless.start when sessionId is "${preset.sessionId}" (there is no id yet)`,
    });
  }
  if (preset.headless.resume && !hasId(preset.headless.resume)) {
    ctx.addIssue({
      code: 'custom',
      path: ['headless', 'resume'],
      message: 'headless.resume must contain {sessionId}',
    });
  }
  if (preset.headless.resume && preset.sessionId === 'none') {
    ctx.addIssue({
      code: 'custom',
      path: ['headless', 'resume'],
      message: 'an engine with sessionId "none" has no id to resume; set sessionId to "assign" or "capture"',
    });
  }
  const usesModel = [
    ...preset.headless.args,
    ...preset.headless.start,
    ...(preset.headless.resume ?? []),
  ].some((a) => a.includes('{model}'));
  if (usesModel && !preset.model) {
    ctx.addIssue({ code: 'custom', path: ['model'], message: 'the argv uses {model} but no model is set' });
  }
});

export type EnginePreset = z.output<typeof presetSchema>;
export type EnginePresetInput = z.input<typeof presetSchema>;

export {
  capabilitiesOf,
  ENV_NAME,
  type EngineCapabilities,
  METER_OF_PROTOCOL,
  MODEL_API_NAMES,
  PLACEHOLDERS,
  POLICY_HOOK_ARGS,
  POLICY_HOOKS,
  type PolicyHookKind,
  PROTOCOLS,
  type ProtocolName,
} from './capabilities.js';
