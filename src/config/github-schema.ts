import { z } from 'zod';
import { httpUrl } from './gateway-schema.js';
import { isRsaPrivateKey } from './github-secrets.js';

/**
 * The config of what the daemon says on GitHub (issue 18): who it is there (a GitHub App, or a
 * token), what it says (reactions, tracking comments, check runs or commit statuses) and how fast.
 * The App's key and the token are secrets (write them env:NAME); they are masked everywhere.
 */

const appSchema = z
  .object({
    id: z.number().int().positive().describe("The GitHub App's id (its settings page, 'App ID')."),
    privateKey: z
      .string()
      .min(1)
      .max(16384)
      // The message names the key's place, never its text.
      .refine(isRsaPrivateKey, 'not a PEM RSA private key (the .pem file GitHub gave for the App)')
      .describe(
        "The App's private key, PEM (write env:NAME; a secret). The daemon signs its short-lived JWTs with it.",
      ),
    installationId: z
      .number()
      .int()
      .positive()
      .optional()
      .describe(
        "The App's installation to use when a webhook payload names none. Default: the payload's, else asked of GitHub per repository.",
      ),
  })
  .strict();

const statusSchema = z
  .object({
    reactions: z.boolean().default(true).describe('React 👀 to what started or continued work.'),
    comments: z
      .boolean()
      .default(true)
      .describe('Keep one tracking comment per turn, edited as the turn goes and when it ends.'),
    checks: z
      .boolean()
      .default(true)
      .describe('On a pull request: a check run (App) or a commit status (token) per turn.'),
    replyToRejections: z
      .boolean()
      .default(true)
      .describe(
        'Tell a person with standing (owner, member, collaborator) why their trigger was refused; outsiders and bots are never answered.',
      ),
    editIntervalSeconds: z
      .number()
      .min(0.05)
      .max(600)
      .default(10)
      .describe('Least time between two edits of one tracking comment while its turn runs.'),
    checkName: z
      .string()
      .min(1)
      .max(100)
      .default('the-loop')
      .describe("The check run's name, or the commit status's context."),
  })
  .strict();

const pacingSchema = z
  .object({
    writeGapMs: z
      .number()
      .int()
      .min(10)
      .max(60_000)
      .default(1000)
      .describe(
        "Least time between two writes (POST, PATCH, PUT, DELETE) to GitHub's API: its secondary rate limits ask for about one a second.",
      ),
    commentGapMs: z
      .number()
      .int()
      .min(10)
      .max(60_000)
      .default(3000)
      .describe('Least time between two writes that notify people (comments): GitHub limits these harder.'),
    writesPerHour: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .default(450)
      .describe(
        'Most writes in any hour: GitHub allows about 500 content-creating requests an hour; past this, writes wait (edits of one comment are merged meanwhile).',
      ),
  })
  .strict();

export const githubSchema = z
  .object({
    app: appSchema
      .optional()
      .describe(
        'Act as a GitHub App: check runs, and installation tokens for the gateway. Not with `token`.',
      ),
    token: z
      .string()
      .min(8, 'a token is at least 8 characters')
      .optional()
      .describe(
        'Act with this token (write env:NAME; a secret). Not with `app`. Default (no app, no token): credentials.github, else GH_TOKEN or GITHUB_TOKEN of the daemon; none: the daemon says nothing on GitHub.',
      ),
    baseUrl: httpUrl
      .optional()
      .describe(
        "GitHub's REST API. Default: gateway.github.apiUrl, else https://api.github.com (github.com) or https://<host>/api/v3.",
      ),
    botLogin: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .describe(
        'Our own login: events from it are never triggers. Default: learned (App: <slug>[bot] from GET /app; token: GET /user).',
      ),
    status: statusSchema.prefault({}).describe('What the daemon says on GitHub about its work.'),
    pacing: pacingSchema.prefault({}).describe("How fast the daemon writes to GitHub's API."),
  })
  .strict()
  .refine((g) => !(g.app && g.token), {
    message: 'github.app and github.token are exclusive: configure the App, or a token, not both',
  })
  .prefault({})
  .describe('What the daemon says on GitHub, and as whom (issue 18).');

export type GitHubConfig = z.output<typeof githubSchema>;
