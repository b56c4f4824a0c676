/**
 * `the-loop store copy`: a SQLite registry into an empty PostgreSQL store, every table's rows with
 * their ids, in one PostgreSQL transaction — a copy is whole or not at all, so a failed one is simply
 * run again, and a store that already holds rows is refused (nothing is copied twice). The SQLite
 * file is only read.
 *
 * Rows PostgreSQL would reject (a value its column's type cannot take, a row whose parent is left
 * out) are found before anything is written and reported by table and key; the copy then writes
 * nothing unless told to leave them out. A NUL character in text, which PostgreSQL's text cannot
 * hold, is kept as U+FFFD, as every PostgreSQL writer of the-loop does. The file is opened
 * read-only: a registry of an older version is refused, not upgraded in place.
 */
import { LoopError } from '../core/errors.js';
import type { CopyOptions, CopyReport, RejectedRow } from '../core/ports/copy.js';
import type { Db } from './db.js';
import type { Pg, Queryable } from './postgres/pg.js';

/** The tables copied, parents before children (foreign keys), with the key that names a row. */
export const COPIED_TABLES: ReadonlyArray<{ table: string; key: string; identity?: string }> = [
  { table: 'sessions', key: 'id' },
  { table: 'turns', key: 'id', identity: 'id' },
  { table: 'turn_events', key: 'turn_id, seq' },
  { table: 'deliveries', key: 'id', identity: 'seq' },
  // What was said on GitHub per delivery: a moved daemon edits the same comments and check runs.
  { table: 'github_status', key: 'delivery_id' },
  { table: 'usage_ledger', key: 'id', identity: 'id' },
  { table: 'unmetered_drives', key: 'id', identity: 'id' },
  { table: 'scan_files', key: 'path' },
  { table: 'gateway_tokens', key: 'hash' },
  { table: 'acts', key: 'id', identity: 'id' },
  { table: 'connector_audit', key: 'id', identity: 'id' },
];

type Row = Record<string, unknown>;

/** Columns both stores have, with PostgreSQL's type of each. */
async function commonColumns(
  sqlite: Db,
  pg: Queryable,
  table: string,
): Promise<Array<{ name: string; type: string }>> {
  const own = new Set(
    (sqlite.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>).map((c) => c.name),
  );
  const theirs = await pg.rows<{ column_name: string; udt_name: string }>(
    `SELECT column_name, udt_name FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`,
    [table],
  );
  const missing = [...own].filter((name) => !theirs.some((c) => c.column_name === name));
  if (missing.length > 0)
    throw new LoopError(
      'store-failed',
      `the PostgreSQL store has no column ${missing.map((m) => `${table}.${m}`).join(', ')}: nothing copied`,
      { hint: 'Run `the-loop store migrate` on the PostgreSQL store (this the-loop), then copy again.' },
    );
  return theirs.filter((c) => own.has(c.column_name)).map((c) => ({ name: c.column_name, type: c.udt_name }));
}

const ARRAY_TYPE: Record<string, string> = {
  text: 'text[]',
  int8: 'bigint[]',
  float8: 'float8[]',
  bytea: 'bytea[]',
};

/** A SQLite value as the PostgreSQL column takes it. */
function convert(value: unknown, type: string): unknown {
  if (value === null || value === undefined) return null;
  if (type === 'bytea') return typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  if (type === 'text') {
    const text =
      typeof value === 'string' ? value : Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
    // PostgreSQL's text cannot hold U+0000: kept as U+FFFD, as every PostgreSQL writer of the-loop does.
    return text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
  }
  if ((type === 'int8' || type === 'float8') && typeof value !== 'number') return String(value);
  return value;
}

/** Roughly how many bytes a row sends (its text and bytes): a batch of large payloads is cut short. */
const sizeOf = (row: Row): number =>
  Object.values(row).reduce<number>(
    (n, v) => n + (typeof v === 'string' || Buffer.isBuffer(v) ? v.length : 8),
    0,
  );

/** Why PostgreSQL would refuse this row, or null. */
function rejection(row: Row, columns: ReadonlyArray<{ name: string; type: string }>): string | null {
  for (const { name, type } of columns) {
    const value = row[name];
    if (value === null || value === undefined) continue;
    if (
      type === 'int8' &&
      !(typeof value === 'number' ? Number.isSafeInteger(value) : /^-?\d{1,15}$/.test(String(value)))
    )
      return `${name} holds ${JSON.stringify(String(value).slice(0, 40))}, not a whole number`;
    if (
      type === 'float8' &&
      !(typeof value === 'number' || /^-?\d+(\.\d+)?(e[+-]?\d+)?$/i.test(String(value)))
    )
      return `${name} holds ${JSON.stringify(String(value).slice(0, 40))}, not a number`;
  }
  return null;
}

const keyOf = (row: Row, key: string) =>
  key
    .split(', ')
    .map((k) => `${k}=${String(row[k])}`)
    .join(' ');

/** The rows left out so far, by table, that other rows reference. */
interface LeftOut {
  sessions: Set<unknown>;
  turns: Set<unknown>;
  deliveries: Set<unknown>;
}

/**
 * A row that cannot be copied because a row it references is left out (its foreign key would
 * break): a turn of a left-out session, an event or act of a left-out turn or session, a token of a
 * left-out session, the GitHub status of a left-out delivery.
 */
function orphaned(table: string, row: Row, left: LeftOut): string | null {
  if (
    left.sessions.size > 0 &&
    ['turns', 'acts', 'gateway_tokens'].includes(table) &&
    left.sessions.has(row.session_id)
  )
    return `its session (${String(row.session_id)}) is left out`;
  if (left.turns.size > 0 && ['turn_events', 'acts'].includes(table) && left.turns.has(row.turn_id))
    return `its turn (${String(row.turn_id)}) is left out`;
  if (left.deliveries.size > 0 && table === 'github_status' && left.deliveries.has(row.delivery_id))
    return `its delivery (${String(row.delivery_id)}) is left out`;
  return null;
}

/** Every row of every copied table that PostgreSQL would reject, or that references one. */
export async function findRejected(sqlite: Db, pg: Queryable): Promise<RejectedRow[]> {
  const out: RejectedRow[] = [];
  const left: LeftOut = { sessions: new Set(), turns: new Set(), deliveries: new Set() };
  for (const { table, key } of COPIED_TABLES) {
    const columns = await commonColumns(sqlite, pg, table);
    for (const row of sqlite.prepare(`SELECT * FROM ${table}`).iterate() as Iterable<Row>) {
      const reason = rejection(row, columns) ?? orphaned(table, row, left);
      if (!reason) continue;
      out.push({ table, key: keyOf(row, key), reason });
      if (table === 'sessions') left.sessions.add(row.id);
      if (table === 'turns') left.turns.add(row.id);
      if (table === 'deliveries') left.deliveries.add(row.id);
    }
  }
  return out;
}

async function refuseNonEmpty(q: Queryable): Promise<void> {
  for (const { table } of COPIED_TABLES) {
    const row = await q.row<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM ${table}) AS any`);
    if (row?.any)
      throw new LoopError(
        'usage',
        `the PostgreSQL store is not empty (${table} has rows): a copy goes into an empty store only`,
        {
          hint: 'Nothing was copied. Copy into a new database, or empty this one first (a second copy would count everything twice).',
        },
      );
  }
}

async function copyTable(
  sqlite: Db,
  q: Queryable,
  spec: (typeof COPIED_TABLES)[number],
  skip: ReadonlySet<string>,
  options: CopyOptions,
): Promise<number> {
  const columns = await commonColumns(sqlite, q, spec.table);
  const names = columns.map((c) => `"${c.name}"`).join(', ');
  const unnest = columns.map((c, i) => `$${i + 1}::${ARRAY_TYPE[c.type] ?? 'text[]'}`).join(', ');
  const insert = `INSERT INTO ${spec.table} (${names}) OVERRIDING SYSTEM VALUE SELECT * FROM unnest(${unnest})`;
  const total = (sqlite.prepare(`SELECT COUNT(*) AS n FROM ${spec.table}`).get() as { n: number }).n;
  const size = options.batch ?? 2000;
  let batch: Row[] = [];
  let bytes = 0;
  let done = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    await q.run(
      insert,
      columns.map((c) => batch.map((row) => convert(row[c.name], c.type))),
    );
    done += batch.length;
    batch = [];
    bytes = 0;
    options.progress?.(spec.table, done, total);
  };
  for (const row of sqlite.prepare(`SELECT * FROM ${spec.table} ORDER BY rowid`).iterate() as Iterable<Row>) {
    if (skip.size > 0 && skip.has(`${spec.table} ${keyOf(row, spec.key)}`)) continue;
    batch.push(row);
    bytes += sizeOf(row);
    if (batch.length >= size || bytes >= 32 * 1024 * 1024) await flush();
  }
  await flush();
  if (spec.identity)
    await q.run(
      `SELECT setval(pg_get_serial_sequence('${spec.table}', '${spec.identity}'),
         GREATEST((SELECT COALESCE(MAX(${spec.identity}), 0) FROM ${spec.table}), 1),
         (SELECT COUNT(*) > 0 FROM ${spec.table}))`,
    );
  return done;
}

/** A registry in use (a turn running) is not copied: its daemon would go on writing the old file. */
function refuseRunning(sqlite: Db): void {
  const running = (
    sqlite.prepare("SELECT COUNT(*) AS n FROM turns WHERE status = 'running'").get() as { n: number }
  ).n;
  if (running > 0)
    throw new LoopError('usage', `the SQLite registry has ${running} running turn(s): nothing copied`, {
      hint: 'Stop the daemon using it first. A turn left running by a crash is marked lost by any reading command on the SQLite config (`the-loop sessions list`).',
    });
}

/** Copy `sqlite` (opened read-only, at this version) into the empty store `pg`. */
export async function copySqliteToPg(sqlite: Db, pg: Pg, options: CopyOptions = {}): Promise<CopyReport> {
  // Read in one SQLite transaction: a daemon writing meanwhile does not tear the copy.
  sqlite.prepare('BEGIN').run();
  try {
    refuseRunning(sqlite);
    const rejected = await findRejected(sqlite, pg);
    if (rejected.length > 0 && !options.skipRejected) return { tables: [], rows: 0, rejected, copied: false };
    const skip = new Set(rejected.map((r) => `${r.table} ${r.key}`));
    const tables = await pg.tx(async (q) => {
      // Hosts already running on the store wait (they may read) until the copy commits or fails.
      await q.run(`LOCK TABLE ${COPIED_TABLES.map((t) => t.table).join(', ')} IN EXCLUSIVE MODE`);
      await refuseNonEmpty(q);
      const out: CopyReport['tables'] = [];
      for (const spec of COPIED_TABLES)
        out.push({ table: spec.table, rows: await copyTable(sqlite, q, spec, skip, options) });
      // The file's cursors are of the files of the host that ran it: this one's.
      await q.run('UPDATE scan_files SET host = $1', [options.host ?? '']);
      return out;
    });
    return { tables, rows: tables.reduce((n, t) => n + t.rows, 0), rejected, copied: true };
  } finally {
    sqlite.prepare('ROLLBACK').run();
  }
}
