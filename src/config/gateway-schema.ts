import { z } from 'zod';

/**
 * The config of what stands between an engine and the outside world: the gateway (the daemon's
 * loopback listener that engines reach for git, GitHub's API and their model APIs), the real
 * credentials it holds, and the sandbox the engine's process tree runs in.
 */

const LOOPBACK = /^(127(?:\.\d{1,3}){3}|::1|localhost)$/;
/** An http(s) URL without query or fragment, its trailing slashes dropped. */
export const httpUrl = z
  .string()
  .max(2048)
  .regex(/^https?:\/\/[^\s/?#]+(?:\/[^\s?#]*)?$/, 'an http(s) URL without query or fragment')
  .transform((u) => u.replace(/\/+$/, ''));

/** A host as git and gh name it: a hostname, optionally with a port. */
const hostName = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::\d{1,5})?$/, 'a host name, e.g. github.com');

export const gatewaySchema = z
  .object({
    enabled: z
      .boolean()
      .default(true)
      .describe(
        "Engines reach git, GitHub's API and their model APIs through the daemon's gateway, holding only a per-session capability token; the real credentials stay in the daemon. false: engines get the credentials in their environment (and acts are judged from commands only).",
      ),
    host: z
      .string()
      .regex(LOOPBACK, 'the gateway listens on the loopback only (127.0.0.1, ::1 or localhost)')
      .default('127.0.0.1')
      .describe('Loopback address the gateway listens on: its tokens are useless off this host.'),
    port: z
      .number()
      .int()
      .min(0)
      .max(65535)
      .default(7701)
      .describe(
        'TCP port (0: any free port). Keep it fixed when you use the tmux runner: a TUI keeps the gateway address it started with across daemon restarts.',
      ),
    socket: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .describe(
        "Unix socket `gh` reaches the GitHub API through (gh's http_unix_socket), in a directory of its own (the sandbox binds that directory). Default: <TMPDIR or /tmp>/the-loop-<uid>/<8 hex of the data dir>/gateway/gh.sock (short whatever the data dir's path).",
      ),
    maxBodyBytes: z
      .number()
      .int()
      .min(64 * 1024)
      .max(512 * 1024 * 1024)
      .default(32 * 1024 * 1024)
      .describe(
        'Largest model or API request body forwarded (git pushes are streamed and not bounded by it).',
      ),
    idleTimeoutSeconds: z
      .number()
      .min(1)
      .max(3600)
      .default(600)
      .describe(
        'An upstream silent for this long is given up (504), and the act or usage recorded as far as it got.',
      ),
    github: z
      .object({
        host: hostName
          .default('github.com')
          .describe(
            "The host whose git URLs (https, ssh, git@) engines' git is sent through the gateway for.",
          ),
        url: httpUrl.optional().describe('Where the gateway sends git requests. Default: https://<host>.'),
        apiUrl: httpUrl
          .optional()
          .describe(
            'Where the gateway sends REST and GraphQL requests. Default: https://api.github.com (github.com) or https://<host>/api/v3.',
          ),
      })
      .strict()
      .prefault({}),
    upstreams: z
      .partialRecord(z.enum(['anthropic', 'openai', 'gemini']), httpUrl)
      .default({})
      .describe(
        "Where each model API's requests go, overriding the engine's base-URL variable and its preset's default.",
      ),
  })
  .strict()
  .prefault({});

const credentialValue = z.string().min(8, 'a credential is at least 8 characters');

const modelCredential = z.union([
  credentialValue,
  z
    .object({
      value: credentialValue,
      kind: z.enum(['api-key', 'subscription']).default('api-key'),
    })
    .strict(),
]);

export const credentialsSchema = z
  .object({
    github: credentialValue
      .optional()
      .describe(
        "The GitHub token the gateway uses for git and the API (write env:NAME). Default: GH_TOKEN or GITHUB_TOKEN from the daemon's environment.",
      ),
    anthropic: modelCredential
      .optional()
      .describe(
        "Anthropic API key (or { value, kind: subscription }). Default: the engine's credential variables.",
      ),
    openai: modelCredential
      .optional()
      .describe('OpenAI API key. Default: the engine’s credential variables.'),
    gemini: modelCredential
      .optional()
      .describe('Gemini API key. Default: the engine’s credential variables.'),
  })
  .strict()
  .prefault({})
  .describe(
    'The real credentials, held by the gateway and never given to an engine. Write them as env:NAME; values are secrets everywhere.',
  );

const sandboxPath = z
  .string()
  .min(1)
  .max(4096)
  .regex(/^(?:\/|~\/|~$|\$\{?[A-Za-z_])[^\0\n]*$/, 'an absolute path, ~/…, or $VAR/…');

export const sandboxSchema = z
  .object({
    mode: z
      .enum(['auto', 'bwrap', 'none'])
      .default('auto')
      .describe(
        'bwrap: every engine runs in a bubblewrap sandbox (an error if bwrap cannot run). none: no sandbox (warned at every start). auto: bwrap when it works here, else none with a warning.',
      ),
    bwrap: z.string().min(1).optional().describe('Path of the bwrap binary (default: found on PATH).'),
    hide: z
      .array(sandboxPath)
      .max(256)
      .default([])
      .describe(
        "More paths the engine must not see, besides the data dir and the operator's credential files.",
      ),
    writable: z
      .array(sandboxPath)
      .max(256)
      .default([])
      .describe('More paths the engine may write, besides its workspace and its own config directories.'),
  })
  .strict()
  .prefault({});

export type GatewayConfig = z.output<typeof gatewaySchema>;
export type CredentialsConfig = z.output<typeof credentialsSchema>;
export type SandboxConfig = z.output<typeof sandboxSchema>;
