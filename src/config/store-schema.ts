import { z } from 'zod';

/** A PostgreSQL connection URL: postgres:// or postgresql://, parseable, with a host. */
const postgresUrl = z
  .string()
  .min(1, 'a PostgreSQL URL (postgres://user:password@host:5432/database), or env:NAME')
  .max(4096, 'a URL of at most 4096 characters')
  .refine((url) => /^postgres(?:ql)?:\/\//.test(url), 'a URL starting postgres:// or postgresql://')
  .refine((url) => {
    try {
      return new URL(url).hostname !== '' || /[?&]host=/.test(url);
    } catch {
      return false;
    }
  }, 'a URL that parses, naming a host (postgres://user:password@host:5432/database)')
  .describe(
    'Where the shared database is. Write it as env:NAME (it holds a password): env:THE_LOOP_DATABASE_URL.',
  );

/**
 * `store:` — where the registry, the inbox, the ledger and the acts live. SQLite (the default): one
 * file in the data directory, for one host. PostgreSQL: one database several daemons share
 * (docs/scale-out.md).
 */
export const storeSchema = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('sqlite') }).strict(),
    z
      .object({
        kind: z.literal('postgres'),
        url: postgresUrl,
        pool: z
          .number()
          .int('a whole number of connections')
          .min(2, 'at least 2 connections')
          .max(200, 'at most 200 connections')
          .default(10)
          .describe('Connections this process keeps to the database at most.'),
        host: z
          .string()
          .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'a host id: letters, digits, . _ - (at most 63)')
          .optional()
          .describe(
            "This host's id among the hosts sharing the store (default: its hostname). Two hosts must never share one.",
          ),
        labels: z
          .array(
            z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'a label: lower-case letters, digits, . _ -'),
          )
          .max(32, 'at most 32 labels')
          .default([])
          .describe(
            'What this host offers beside what is detected (`tmux` is added when tmux is installed): a session goes only to a host with every label it needs.',
          ),
        capacity: z
          .number()
          .int('a whole number of work items')
          .min(0, 'at least 0 (0: this host takes no new work item)')
          .max(10_000, 'at most 10000')
          .optional()
          .describe(
            'How many work items this host takes before placement prefers another (default: dispatch.concurrency). New work items go to the host with the fewest leases per unit of capacity.',
          ),
        address: z
          .string()
          .min(1, 'an ssh destination (user@host)')
          .max(255, 'at most 255 characters')
          .optional()
          .describe(
            'How a person reaches this host (an ssh destination), shown by `hosts list` and by `sessions attach` on another host (default: the host id).',
          ),
        leaseSeconds: z
          .number()
          .min(3, 'at least 3 seconds')
          .max(600, 'at most 600 seconds')
          .default(15)
          .describe(
            "How long a host's hold on a work item lasts without a heartbeat. A host that cannot renew for half of it stops claiming and stops its process-runner engines; a lease expired for as long again is taken from it and its running turn interrupted.",
          ),
        heartbeatSeconds: z
          .number()
          .min(0.5, 'at least 0.5 seconds')
          .max(120, 'at most 120 seconds')
          .optional()
          .describe('How often this host renews its leases (default: leaseSeconds / 5).'),
        onHostLoss: z
          .enum(['hold', 'continue'])
          .default('hold')
          .describe(
            "When a host dies mid-turn, its turn is interrupted (never run again by itself) and a process-runner session moves to another host with its conversation. hold: the session's deliveries wait until a person resumes it (`the-loop sessions resume`); continue: the next delivery runs at once.",
          ),
      })
      .strict()
      .refine((s) => s.heartbeatSeconds === undefined || s.heartbeatSeconds < s.leaseSeconds / 2, {
        message: 'heartbeatSeconds must be shorter than half of leaseSeconds (several heartbeats per lease)',
        path: ['heartbeatSeconds'],
      }),
  ])
  .prefault({ kind: 'sqlite' })
  .describe(
    'The store: sqlite (default: a file in the data directory, one host) or postgres (one database several hosts share).',
  );

export type StoreConfig = z.output<typeof storeSchema>;
