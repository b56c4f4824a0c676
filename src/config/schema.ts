import { z } from 'zod';
import { policySchema } from '../acts/policy-schema.js';
import { headlessSchema, presetObjectSchema } from '../engines/preset.js';
import { connectorSchema } from './connector-schema.js';
import { consoleSchema } from './console-schema.js';
import { credentialsSchema, gatewaySchema, sandboxSchema } from './gateway-schema.js';
import { githubSchema } from './github-schema.js';
import { serverSchema } from './server-schema.js';
import { storeSchema } from './store-schema.js';
import { usageSchema } from './usage-schema.js';

/**
 * `.the-loop/config.yaml`. Every field has a default, so an empty file (or none) is a valid config.
 * String values of the form `env:NAME` are replaced by that environment variable before validation.
 */

/** An engine entry: any preset field, overriding the built-in preset of that name or declaring a new engine. */
export const engineOverrideSchema = presetObjectSchema
  .extend({ headless: headlessSchema.partial().strict().optional() })
  .partial()
  .strict();

export const RUNNERS = ['process', 'tmux'] as const;

const login = z.string().min(1).max(100);
const ASSOCIATIONS = [
  'OWNER',
  'MEMBER',
  'COLLABORATOR',
  'CONTRIBUTOR',
  'FIRST_TIME_CONTRIBUTOR',
  'FIRST_TIMER',
  'NONE',
] as const;

/** What makes an event start or continue work. */
export const triggersSchema = z
  .object({
    mention: z
      .string()
      .regex(/^@[A-Za-z0-9][A-Za-z0-9-]*(\[bot\])?$/, 'a mention is @ and a GitHub login')
      .default('@the-loop')
      .describe('A comment, review or issue body containing this mention triggers a turn.'),
    labels: z
      .array(z.string().min(1).max(100))
      .default([])
      .describe('Adding one of these labels to an issue or PR starts work.'),
    assignees: z.array(login).default([]).describe('Assigning one of these logins starts work.'),
  })
  .strict();

export const templatesSchema = z
  .object({
    issue: z
      .string()
      .min(1)
      .max(20000)
      .optional()
      .describe('Prompt for an issue or PR that starts work (opened, labeled, assigned).'),
    comment: z
      .string()
      .min(1)
      .max(20000)
      .optional()
      .describe('Prompt for a comment, review comment or review.'),
  })
  .strict();

/** Who may trigger work (invariant 6). */
export const authorizationSchema = z
  .object({
    authorAssociations: z
      .array(z.enum(ASSOCIATIONS))
      .default(['OWNER', 'MEMBER', 'COLLABORATOR'])
      .describe('GitHub author_association values allowed to trigger work.'),
    bots: z
      .array(login)
      .default([])
      .describe('Bot logins (exact, e.g. "renovate[bot]") allowed to trigger work. Other bots never are.'),
    users: z
      .array(login)
      .default([])
      .describe('If not empty, only these logins may trigger work (in addition to the association check).'),
  })
  .strict();

/** The same fields, each optional and without its default (zod fills defaults even inside .partial()). */
function overrideOf<T extends z.ZodRawShape>(schema: z.ZodObject<T>) {
  const shape = Object.fromEntries(
    Object.entries(schema.shape).map(([key, field]) => {
      const inner = field instanceof z.ZodDefault ? (field.unwrap() as z.ZodType) : (field as z.ZodType);
      return [key, inner.optional()];
    }),
  );
  return z.object(shape).strict();
}

export const repoSchema = z
  .object({
    path: z
      .string()
      .min(1)
      .describe('Local checkout of the repository (the session cwd, or the base of its worktrees).'),
    engine: z
      .string()
      .min(1)
      .optional()
      .describe('Engine of new sessions for this repository (default: routing.engine).'),
    runner: z.enum(RUNNERS).optional(),
    workspace: z
      .enum(['checkout', 'worktree'])
      .default('checkout')
      .describe(
        'checkout: sessions run in `path`; worktree: each work item gets its own git worktree and branch.',
      ),
    defaultBranch: z
      .string()
      .min(1)
      .max(255)
      .default('main')
      .describe('The default branch: protected unless policy.protectedBranches says otherwise.'),
    policy: policySchema
      .optional()
      .describe("This repository's merge policy, on top of the top-level policy (acts merge per kind)."),
    // Per-repo overrides carry no defaults: a field left out keeps the routing-level value.
    triggers: overrideOf(triggersSchema).optional(),
    templates: templatesSchema.optional(),
    authorization: overrideOf(authorizationSchema).optional(),
  })
  .strict();

const perMillion = z.number().min(0).max(100_000);

const budgetSchema = z
  .object({
    maxTurns: z.number().int().min(1).max(1_000_000).optional().describe('Turns per window.'),
    windowHours: z
      .number()
      .min(0.01)
      .max(24 * 3650)
      .optional()
      .describe('The window maxTurns counts in (hours back from now). Default: all time.'),
    maxTokens: z.number().int().min(1).optional().describe('Tokens of every kind, all time.'),
    maxUsd: z.number().min(0.0001).optional().describe('Estimated dollars (priced rows only), all time.'),
  })
  .strict()
  .prefault({});

export const configSchema = z
  .object({
    dataDir: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Where state lives (SQLite registry, log, keys, worktrees). Relative to the config file. Default: the config file's directory, or $XDG_STATE_HOME/the-loop/<repo>-<digest> when that is inside a git work tree (state never belongs in a repository).",
      ),
    store: storeSchema,
    log: z
      .object({
        level: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
        file: z.string().min(1).optional().describe('Log file (JSON lines). Default: <dataDir>/the-loop.log'),
      })
      .strict()
      .prefault({}),
    defaults: z
      .object({
        engine: z.string().min(1).default('claude').describe('Engine for new sessions.'),
        runner: z
          .enum(RUNNERS)
          .default('process')
          .describe(
            'How engines are run: process (headless child per turn) or tmux (the TUI in a tmux session).',
          ),
        cwd: z.string().min(1).optional().describe('Working directory for new sessions when none is given.'),
        backstopSeconds: z
          .number()
          .int()
          .min(1)
          .max(7 * 24 * 3600)
          .default(3600)
          .describe('A turn still running after this long is ended (endReason "backstop").'),
        killGraceSeconds: z
          .number()
          .min(0.1)
          .max(600)
          .default(5)
          .describe('Time between stdin close, SIGTERM and SIGKILL when an engine must be stopped.'),
      })
      .strict()
      .prefault({}),
    pricing: z
      .record(
        z
          .string()
          .min(1)
          .max(200)
          .describe('Model id (a date suffix like -20250929 is ignored when matching).'),
        z
          .object({
            input: perMillion.describe('USD per million input tokens.'),
            output: perMillion.describe(
              'USD per million output tokens (reasoning tokens are billed as output).',
            ),
            cacheRead: perMillion.optional().describe('USD per million cache-read tokens. Default: input.'),
            cacheWrite5m: perMillion
              .optional()
              .describe('USD per million cache-write tokens (5 min). Default: input.'),
            cacheWrite1h: perMillion
              .optional()
              .describe('USD per million cache-write tokens (1 h). Default: input.'),
            asOf: z.string().min(1).max(40).describe('When the price was read, e.g. 2026-11.'),
            source: z.string().min(1).max(500).describe('Where it was read (a URL).'),
          })
          .strict(),
      )
      .default({})
      .describe(
        'List prices that override or extend @pydantic/genai-prices (costs are list-price estimates).',
      ),
    usage: usageSchema,
    limits: z
      .object({
        maxLineBytes: z
          .number()
          .int()
          .min(1024)
          .max(256 * 1024 * 1024)
          .default(16 * 1024 * 1024)
          .describe('An engine output line longer than this is skipped and reported.'),
      })
      .strict()
      .prefault({}),
    server: serverSchema,
    console: consoleSchema,
    connector: connectorSchema,
    webhook: z
      .object({
        secret: z
          .string()
          .min(16, 'use at least 16 characters (`the-loop config init` generates one)')
          .optional()
          .describe('HMAC secret shared with GitHub. Write it as env:NAME to keep it out of the file.'),
        path: z
          .string()
          .regex(/^\/[A-Za-z0-9/_-]*$/)
          .default('/gh-webhook'),
      })
      .strict()
      .prefault({}),
    routing: z
      .object({
        engine: z
          .string()
          .min(1)
          .optional()
          .describe('Engine of sessions started by webhooks (default: defaults.engine).'),
        runner: z
          .enum(RUNNERS)
          .optional()
          .describe('Runner of sessions started by webhooks (default: defaults.runner).'),
        triggers: triggersSchema.prefault({}),
        templates: templatesSchema.prefault({}),
        authorization: authorizationSchema.prefault({}),
      })
      .strict()
      .prefault({}),
    repos: z
      .record(
        z.string().regex(/^[A-Za-z0-9-]+\/[A-Za-z0-9._-]+$/, 'repositories are written owner/name'),
        repoSchema,
      )
      .default({})
      .describe('Repositories the daemon acts on; events from any other repository are rejected.'),
    tmux: z
      .object({
        socket: z
          .string()
          .regex(/^[A-Za-z0-9._-]{1,100}$/, 'a tmux socket name (tmux -L <name>)')
          .optional()
          .describe(
            "tmux server socket (-L). Default: the user's default server, so `tmux attach -t loop-…` just works.",
          ),
        width: z.number().int().min(40).max(1000).default(200),
        height: z.number().int().min(10).max(500).default(50),
        readySeconds: z
          .number()
          .min(1)
          .max(600)
          .default(60)
          .describe('How long a new TUI may take to report it is ready (SessionStart).'),
      })
      .strict()
      .prefault({}),
    budgets: z
      .object({
        session: budgetSchema.describe('Ceilings for one session (a work item may have several over time).'),
        workItem: budgetSchema.describe('Ceilings for all sessions of one work item together.'),
      })
      .strict()
      .prefault({})
      .describe(
        'When a ceiling is reached, the session is held (over-budget): no further deliveries until `the-loop sessions resume <wi> --raise <amount>`. Token and dollar ceilings need a metered engine; unmetered sessions can only be bounded by turns.',
      ),
    dispatch: z
      .object({
        concurrency: z
          .number()
          .int()
          .min(1)
          .max(64)
          .default(2)
          .describe('Turns running at once, across all sessions.'),
        closeGraceSeconds: z
          .number()
          .min(0)
          .max(3600)
          .default(30)
          .describe('When a work item closes mid-turn, how long the turn may finish before it is cancelled.'),
        pollSeconds: z
          .number()
          .min(0.05)
          .max(60)
          .default(1)
          .describe('How often the inbox is checked for work queued by other processes.'),
      })
      .strict()
      .prefault({}),
    inbox: z
      .object({
        retainDays: z
          .number()
          .int('a whole number of days')
          .min(0, '0 (keep bodies forever) or more days')
          .max(3650, 'at most 3650 days (ten years); 0 keeps bodies forever')
          .default(30)
          .describe(
            'Days a finished delivery keeps its body (payload) after it arrived and last changed; then the body is dropped and its row (event, route, outcome, turns) kept. 0: keep bodies forever.',
          ),
      })
      .strict()
      .prefault({}),
    policy: policySchema
      .optional()
      .describe(
        'The merge policy of every repository: protected branches and, per kind of act (push, merge, publish…), allow / deny / deny-protected. Enforced before the act where the engine has a pre-tool hook (Claude Code), else recorded as a breach that pauses the session.',
      ),
    gateway: gatewaySchema,
    credentials: credentialsSchema,
    github: githubSchema,
    sandbox: sandboxSchema,
    engines: z
      .record(
        z.string().regex(/^[a-z][a-z0-9-]{0,39}$/, 'engine names are lower-case [a-z0-9-]'),
        engineOverrideSchema,
      )
      .default({})
      .describe(
        'Engine presets: override a built-in one (claude, codex, gemini, grok, cursor-agent, ollama) or add a new one.',
      ),
  })
  .strict();

export type Config = z.output<typeof configSchema>;
export type ConfigInput = z.input<typeof configSchema>;
export type EngineOverride = z.output<typeof engineOverrideSchema>;

/** JSON Schema of the config file, for editors (yaml-language-server) and `the-loop config schema`. */
export function configJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return {
    ...schema,
    $id: 'https://the-loop.dev/schema/config.json',
    title: 'the-loop configuration (.the-loop/config.yaml)',
  };
}
