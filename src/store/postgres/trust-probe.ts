/**
 * Whether the PostgreSQL server lets the store's user in without a password (invariant 9: the
 * ledger, the acts and the sessions' holds must be out of the agent's reach). The network is open
 * in the sandbox: a server that trusts connections from this host lets every process here — an
 * engine included — sign in as that user and rewrite the store. The daemon probes it at start and
 * refuses such a server (main-store-pg.ts).
 *
 * Best effort: it asks as the store's role over the URL's own way in. Another role the server
 * trusts, or its Unix socket trusted for local users, is not found here; the guard is the server's
 * pg_hba.conf (docs/scale-out.md).
 */
import pg from 'pg';

/** The role the server let in without a password (the store's), or null when it asked for one. */
export async function acceptsWithoutPassword(url: string, timeoutMs = 5000): Promise<string | null> {
  // Where and as whom, as pg reads the URL (?host=, ?port=, PGPORT… included); nothing of its
  // password, client certificate or key goes with the probe.
  const as = new pg.Client({ connectionString: url });
  const ssl = as.ssl;
  const client = new pg.Client({
    host: as.host,
    port: as.port,
    database: as.database,
    user: as.user,
    // A function, so neither PGPASSWORD nor ~/.pgpass is consulted: an empty password if asked.
    password: () => '',
    ssl: ssl ? { rejectUnauthorized: false } : false,
    connectionTimeoutMillis: timeoutMs,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return client.user ?? 'the default user';
  } catch {
    return null;
  } finally {
    await client.end().catch(() => {});
  }
}
