import { z } from 'zod';
import { headlessSchema, presetObjectSchema } from '../engines/preset.js';

/**
 * `.the-loop/config.yaml`. Every field has a default, so an empty file (or none) is a valid config.
 * String values of the form `env:NAME` are replaced by that environment variable before validation.
 */

/** An engine entry: any preset field, overriding the built-in preset of that name or declaring a new engine. */
export const engineOverrideSchema = presetObjectSchema
  .extend({ headless: headlessSchema.partial().strict().optional() })
  .partial()
  .strict();

export const RUNNERS = ['process'] as const;

export const configSchema = z
  .object({
    dataDir: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Where state lives (SQLite registry, logs). Relative to the config file. Default: the config file's directory.",
      ),
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
        runner: z.enum(RUNNERS).default('process').describe('How engines are run: process (headless child).'),
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
