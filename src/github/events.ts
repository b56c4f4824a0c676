import type { z as Z } from 'zod';
import { lazyFields } from '../os/lazy-zod.js';

/**
 * The parts of GitHub webhook payloads the router reads. Everything else in a payload is tolerated
 * and ignored; a payload missing what its event needs is rejected with the schema's reason. Built
 * with the zod given, on the first payload routed (see payloadSchemas).
 */
function buildSchemas(z: typeof Z) {
  const userSchema = z.object({
    login: z.string().min(1).max(100),
    type: z.string().optional(),
  });

  const repositorySchema = z.object({
    full_name: z.string().min(3).max(200),
    name: z.string().min(1).max(100),
    owner: z.object({ login: z.string().min(1).max(100) }),
    html_url: z.string().optional(),
  });

  /** Set on what an App wrote (its comments, its issues): our own App's are never triggers. */
  const viaApp = z.object({ id: z.number() }).loose().nullish().catch(undefined);

  const issueSchema = z.object({
    number: z.number().int().positive(),
    performed_via_github_app: viaApp,
    title: z.string().max(100_000).default(''),
    body: z.string().nullish(),
    html_url: z.string().optional(),
    user: userSchema,
    author_association: z.string().optional(),
    labels: z.array(z.object({ name: z.string() })).optional(),
    assignees: z.array(userSchema).nullish(),
    pull_request: z.object({}).loose().optional(),
  });

  /** A branch of a pull request: its name is chosen by whoever opened it (untrusted, like a title). */
  const branchSchema = z
    .object({
      ref: z.string().max(1000),
      sha: z
        .string()
        .regex(/^[0-9a-f]{40,64}$/)
        .optional()
        .catch(undefined),
    })
    .loose();

  const pullRequestSchema = issueSchema
    .omit({ pull_request: true })
    .extend({ head: branchSchema.optional(), base: branchSchema.optional() });

  const commentSchema = z.object({
    /** What a reaction goes on (issue 18); absent in older fixtures. */
    id: z.number().int().positive().optional().catch(undefined),
    performed_via_github_app: viaApp,
    body: z.string().nullish(),
    html_url: z.string().optional(),
    user: userSchema,
    author_association: z.string().optional(),
  });

  /** The App installation a delivery came through (an App's webhook): the daemon answers as it. */
  const installation = z.object({ id: z.number().int().positive() }).loose().optional().catch(undefined);

  const base = { repository: repositorySchema, sender: userSchema, installation };

  return {
    issues: z.object({
      action: z.string(),
      issue: issueSchema,
      label: z.object({ name: z.string() }).optional(),
      assignee: userSchema.nullish(),
      ...base,
    }),
    issue_comment: z.object({ action: z.string(), issue: issueSchema, comment: commentSchema, ...base }),
    pull_request: z.object({
      action: z.string(),
      pull_request: pullRequestSchema.extend({ merged: z.boolean().nullish() }),
      label: z.object({ name: z.string() }).optional(),
      assignee: userSchema.nullish(),
      ...base,
    }),
    pull_request_review_comment: z.object({
      action: z.string(),
      pull_request: pullRequestSchema,
      comment: commentSchema,
      ...base,
    }),
    pull_request_review: z.object({
      action: z.string(),
      pull_request: pullRequestSchema,
      review: commentSchema.extend({ state: z.string().optional() }),
      ...base,
    }),
  } as const;
}

type Schemas = ReturnType<typeof buildSchemas>;

/**
 * The payload schema of each routed event, built (and zod loaded) when the first payload is routed:
 * `the-loop run` routes none, and its dispatcher needs only the routing config's digest.
 */
export const payloadSchemas: Schemas = lazyFields(
  ['issues', 'issue_comment', 'pull_request', 'pull_request_review_comment', 'pull_request_review'],
  buildSchemas,
);

export type RoutedEventName = keyof Schemas;
export type GitHubUser = Z.infer<Schemas['issues']>['sender'];
