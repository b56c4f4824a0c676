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
      })
      .strict(),
  ])
  .prefault({ kind: 'sqlite' })
  .describe(
    'The store: sqlite (default: a file in the data directory, one host) or postgres (one database several hosts share).',
  );

export type StoreConfig = z.output<typeof storeSchema>;
