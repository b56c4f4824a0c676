/**
 * The PostgreSQL connection every PostgreSQL store shares: a pool (node-postgres), queries as
 * prepared statements (a name per text, prepared once per connection), and transactions that are
 * run again when PostgreSQL aborts them for a serialization failure or a deadlock. Integers come
 * back as numbers (BIGINT columns hold ids, token counts and byte sizes, all far below 2^53).
 *
 * Every host must run the same schema: a statement prepared before another host migrated a table it
 * reads can fail ("cached plan must not change result type"); upgrade hosts together
 * (docs/scale-out.md). Statements are prepared per connection, so the pool must talk to PostgreSQL
 * itself or to a pooler in session mode (not PgBouncer's transaction mode).
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import { LoopError } from '../../core/errors.js';

/** What a query may be given: values bound to $1, $2…, never spliced into the text. */
export type Values = readonly unknown[];

/** Anything that runs a query: the pool, or the connection of a transaction. */
export interface Queryable {
  /** The rows of one statement. */
  rows<R>(text: string, values?: Values): Promise<R[]>;
  /** The first row, or undefined. */
  row<R>(text: string, values?: Values): Promise<R | undefined>;
  /** How many rows a write changed. */
  run(text: string, values?: Values): Promise<number>;
}

export interface PgOptions {
  /** Connections at most (default 10). */
  max?: number;
  /** Names this process in pg_stat_activity (default `the-loop`). */
  applicationName?: string;
  /**
   * How long a call may wait for a connection (default 10 s): a new one to be made, or a busy pool
   * to free one. Then the call fails (a store error: the webhook is answered 503, the turn waits).
   */
  connectTimeoutMs?: number;
  /** Any one statement, lock waits included (default 30 s); a migration waits without limit. */
  statementTimeoutMs?: number;
  /** How long a transaction may sit idle before the server ends it (default 60 s). */
  idleInTransactionMs?: number;
}

export type Isolation = 'read committed' | 'repeatable read' | 'serializable';

/** SQLSTATEs after which a whole transaction is simply run again. */
const RETRY = new Set(['40001', '40P01']);
const MAX_ATTEMPTS = 8;

const INT8 = 20;
const NUMERIC = 1700;
const INT8_ARRAY = 1016;
const NUMERIC_ARRAY = 1231;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (oid === INT8 || oid === NUMERIC) return (value: string) => Number(value);
    if (oid === INT8_ARRAY || oid === NUMERIC_ARRAY) {
      const parseArray = pg.types.getTypeParser(oid as never, format) as (
        value: string,
      ) => Array<string | null>;
      return (value: string) => parseArray(value).map((v) => (v === null ? null : Number(v)));
    }
    return pg.types.getTypeParser(oid, format);
  }) as typeof pg.types.getTypeParser,
};

/**
 * A connection checked out of the pool has no error listener of the pool's: one the server drops
 * while it is out (a failover, a terminated backend, a cut network) would emit an uncaught 'error'.
 * Held while out; the failed query reports the error, and the connection is released as broken.
 */
export async function checkOut(
  pool: pg.Pool,
): Promise<{ client: pg.PoolClient; done(broken?: Error): void }> {
  const client = await pool.connect();
  let lost: Error | undefined;
  const onError = (error: Error) => {
    lost = error;
  };
  client.on('error', onError);
  return {
    client,
    done: (broken) => {
      client.off('error', onError);
      client.release(broken ?? lost);
    },
  };
}

/** Statement names by text: the same text is prepared once per connection under the same name. */
const names = new Map<string, string>();
function nameOf(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `q${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    names.set(text, name);
  }
  return name;
}

/** The URL without its password (for messages). */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    for (const key of ['password', 'sslpassword', 'sslkey'])
      if (parsed.searchParams.has(key)) parsed.searchParams.set(key, '***');
    return parsed.toString();
  } catch {
    return '(an unparseable database URL)';
  }
}

/** What failed, said plainly: an unreachable server, a refused login, or PostgreSQL's own message. */
export function describePgError(cause: unknown): string {
  const e = cause as { code?: string; message?: string; errors?: unknown[] };
  if (Array.isArray(e.errors) && e.errors.length > 0) return describePgError(e.errors[0]);
  const message = e.message ?? String(cause);
  return e.code ? `${message} (${e.code})` : message;
}

export class Runner implements Queryable {
  constructor(private readonly client: pg.Pool | pg.PoolClient) {}

  async rows<R>(text: string, values: Values = []): Promise<R[]> {
    const result = await this.client.query({ name: nameOf(text), text, values: values as unknown[] });
    return result.rows as R[];
  }

  async row<R>(text: string, values: Values = []): Promise<R | undefined> {
    return (await this.rows<R>(text, values))[0];
  }

  async run(text: string, values: Values = []): Promise<number> {
    const result = await this.client.query({ name: nameOf(text), text, values: values as unknown[] });
    return result.rowCount ?? 0;
  }
}

export class Pg implements Queryable {
  readonly pool: pg.Pool;
  private readonly runner: Runner;
  private closed = false;

  constructor(
    readonly url: string,
    options: PgOptions = {},
  ) {
    const statementMs = options.statementTimeoutMs ?? 30_000;
    this.pool = new pg.Pool({
      connectionString: url,
      max: options.max ?? 10,
      application_name: options.applicationName ?? 'the-loop',
      connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
      statement_timeout: statementMs,
      // The server's timeout cannot end a wait whose answer never arrives (a silent network): the
      // client gives up a little after it, and a connection that timed out is never reused.
      query_timeout: statementMs + 5000,
      // A transaction left open by a host that went silent ends, and its locks with it, instead of
      // wedging other hosts' writes to the same rows.
      idle_in_transaction_session_timeout: options.idleInTransactionMs ?? 60_000,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      idleTimeoutMillis: 30_000,
      types,
    });
    // An idle connection the server dropped is an error event on the pool; the next query gets a new one.
    this.pool.on('error', () => {});
    this.runner = new Runner(this.pool);
  }

  rows<R>(text: string, values?: Values): Promise<R[]> {
    return this.runner.rows<R>(text, values);
  }

  row<R>(text: string, values?: Values): Promise<R | undefined> {
    return this.runner.row<R>(text, values);
  }

  run(text: string, values?: Values): Promise<number> {
    return this.runner.run(text, values);
  }

  /**
   * One transaction on one connection: committed when `body` returns, rolled back when it throws;
   * run again (from the start, `body` called anew) when PostgreSQL aborts it for a serialization
   * failure or a deadlock. `body` must therefore do nothing but queries it can repeat, and all of
   * them through `q` (a query on the pool inside `body` would wait for a second connection).
   */
  async tx<T>(body: (q: Queryable) => Promise<T>, isolation: Isolation = 'read committed'): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const { client, done } = await checkOut(this.pool);
      let broken: Error | undefined;
      try {
        await client.query(`BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}`);
        const result = await body(new Runner(client));
        await client.query('COMMIT');
        return result;
      } catch (cause) {
        await client.query('ROLLBACK').catch((e: Error) => {
          broken = e;
        });
        const code = (cause as { code?: string }).code;
        if (!(code && RETRY.has(code) && attempt < MAX_ATTEMPTS)) throw cause;
        await new Promise((go) => setTimeout(go, Math.random() * 10 * 2 ** attempt));
      } finally {
        // A connection whose rollback failed is not handed out again.
        done(broken);
      }
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }

  get open(): boolean {
    return !this.closed;
  }
}

/** A LoopError for a database that cannot be reached or used, naming it without its password. */
export function storeUnavailable(url: string, cause: unknown): LoopError {
  return new LoopError(
    'store-failed',
    `cannot use the PostgreSQL store at ${redactUrl(url)}: ${describePgError(cause)}`,
    {
      cause,
      hint: 'Check that PostgreSQL is running and that store.url (THE_LOOP_DATABASE_URL) names a database this user may use.',
    },
  );
}
