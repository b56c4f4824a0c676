/**
 * Whether the PostgreSQL server lets the store's user in without a password (invariant 9: the
 * ledger, the acts and the sessions' holds must be out of the agent's reach). The network is open
 * in the sandbox: a server that trusts connections from this host lets every process here — an
 * engine included — sign in as that user and rewrite the store. The daemon probes it at start and
 * refuses such a server (main-store-pg.ts).
 */
import pg from 'pg';

export async function acceptsWithoutPassword(url: string, timeoutMs = 5000): Promise<boolean> {
  const parsed = new URL(url);
  const part = (text: string) => (text ? decodeURIComponent(text) : undefined);
  const sslmode = parsed.searchParams.get('sslmode');
  // Its parts, not the URL: nothing of its password, client certificate or key goes with the probe.
  const client = new pg.Client({
    host: part(parsed.hostname.replace(/^\[|\]$/g, '')),
    port: parsed.port ? Number(parsed.port) : 5432,
    database: part(parsed.pathname.slice(1)),
    user: part(parsed.username),
    // A function, so neither PGPASSWORD nor ~/.pgpass is consulted: an empty password if asked.
    password: () => '',
    ssl: sslmode && sslmode !== 'disable' ? { rejectUnauthorized: false } : false,
    connectionTimeoutMillis: timeoutMs,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}
