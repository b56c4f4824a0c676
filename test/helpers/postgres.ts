/**
 * A private PostgreSQL cluster for the tests and benchmarks: Debian's `postgresql` binaries, a data
 * directory and socket under the system temp dir, a free TCP port on 127.0.0.1, removed when
 * stopped. Its role `loop` signs in with a password (scram-sha-256), as on a server the daemon
 * accepts; the role `loop_trust` is let in without one (trust), to test that the daemon refuses such
 * a server (an engine on the host could sign in as well). As root (CI), the server runs as
 * the `postgres` user: PostgreSQL refuses to run as root.
 *
 * The test run starts one (test/helpers/global-postgres.ts) and hands its URL to every test process
 * in THE_LOOP_TEST_PG_URL; `freshDatabase()` gives a test its own database, a copy of a migrated
 * template.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export const TEMPLATE_DB = 'loop_template';

export interface Cluster {
  /** `postgres://loop:<password>@127.0.0.1:<port>/<database>` */
  url(database: string): string;
  /** `postgres://loop_trust@127.0.0.1:<port>/<database>`: a role the server lets in without a password. */
  trustUrl(database: string): string;
  port: number;
  dir: string;
  stop(): void;
}

/** The directory holding initdb and pg_ctl (PostgreSQL 15 on Debian), or undefined. */
export function postgresBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], 'bin') : undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Clusters of earlier runs whose starter died without stopping them (a run killed mid-way: its
 * teardown never ran). Only ours: a `the-loop-pg-*` dir with an `owner.pid` no process has now.
 */
function reapStale(bin: string): void {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith('the-loop-pg-')) continue;
    const dir = join(tmpdir(), name);
    let owner: number;
    try {
      owner = Number(readFileSync(join(dir, 'owner.pid'), 'utf8'));
    } catch {
      continue;
    }
    if (!Number.isInteger(owner) || owner <= 0 || alive(owner)) continue;
    try {
      if (existsSync(join(dir, 'data', 'postmaster.pid')))
        asOwner(join(bin, 'pg_ctl'), ['-D', join(dir, 'data'), '-m', 'immediate', '-w', 'stop']);
    } catch {
      // Not running after all: its files go all the same.
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The uid and gid of the `postgres` user (the server's, when this process is root). */
function postgresIds(): [number, number] {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return [id('-u'), id('-g')];
}

/** Runs a PostgreSQL binary (as `postgres` when this process is root); its output on failure. */
function asOwner(bin: string, args: string[]): void {
  const root = process.getuid?.() === 0;
  const [file, argv] = root ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  const result = spawnSync(file, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.status !== 0)
    throw new Error(`${bin} ${args[0] ?? ''} failed (${result.status}): ${result.stderr || result.stdout}`);
}

/**
 * Start a cluster. `durable: false` (tests) turns fsync off: a test never survives a power cut, and
 * a commit is then a memory write. Benchmarks keep PostgreSQL's durable defaults.
 */
export async function startCluster(options: { durable?: boolean } = {}): Promise<Cluster> {
  const bin = postgresBin();
  if (!bin)
    throw new Error('PostgreSQL is not installed (/usr/lib/postgresql/*/bin): apt-get install postgresql');
  reapStale(bin);
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-pg-'));
  // Who started it: a run killed before its teardown leaves a cluster the next start stops.
  writeFileSync(join(dir, 'owner.pid'), String(process.pid));
  if (process.getuid?.() === 0) chownSync(dir, ...postgresIds());
  const data = join(dir, 'data');
  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  const pwfile = join(dir, 'pwfile');
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (process.getuid?.() === 0) chownSync(pwfile, ...postgresIds());
  // The databases' default collation is ICU's en-US, as on a typical server (not byte order): a query
  // that needs SQLite's byte order must say so (COLLATE "C"), or the tests see the difference.
  const locale = ['--locale=C.UTF-8', '--locale-provider=icu', '--icu-locale=en-US'];
  asOwner(join(bin, 'initdb'), [
    '-D',
    data,
    '--auth-local=trust',
    '--auth-host=scram-sha-256',
    `--pwfile=${pwfile}`,
    '-U',
    'loop',
    '--no-sync',
    '-E',
    'UTF8',
    ...locale,
  ]);
  rmSync(pwfile);
  // First match wins: the trusted role before the password rule.
  const hba = join(data, 'pg_hba.conf');
  writeFileSync(
    hba,
    'local all all trust\nhost all loop_trust 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n',
  );
  if (process.getuid?.() === 0) chownSync(hba, ...postgresIds());
  const settings = [
    `-p ${port}`,
    `-k ${dir}`,
    '-c listen_addresses=127.0.0.1',
    '-c max_connections=400',
    ...(options.durable ? [] : ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off']),
  ];
  asOwner(join(bin, 'pg_ctl'), ['-D', data, '-o', settings.join(' '), '-l', join(dir, 'log'), '-w', 'start']);
  let stopped = false;
  const url = (database: string) => `postgres://loop:${password}@127.0.0.1:${port}/${database}`;
  const admin = new pg.Client({ connectionString: url('postgres') });
  await admin.connect();
  await admin.query('CREATE ROLE loop_trust LOGIN SUPERUSER');
  await admin.end();
  return {
    url,
    trustUrl: (database) => `postgres://loop_trust@127.0.0.1:${port}/${database}`,
    port,
    dir,
    stop: () => {
      if (stopped) return;
      stopped = true;
      try {
        asOwner(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** The run's cluster as the role it lets in without a password (no database in the URL). */
export function testTrustCluster(): string {
  const url = process.env.THE_LOOP_TEST_PG_TRUST_URL;
  if (!url) throw new Error('no PostgreSQL for the tests: THE_LOOP_TEST_PG_TRUST_URL is not set');
  return url;
}

/** The test run's cluster (global setup), as a URL with no database; throws why there is none. */
export function testCluster(): string {
  const url = process.env.THE_LOOP_TEST_PG_URL;
  if (!url)
    throw new Error(
      `no PostgreSQL for the tests: ${process.env.THE_LOOP_TEST_PG_ERROR ?? 'THE_LOOP_TEST_PG_URL is not set'}`,
    );
  return url;
}

/**
 * A new database of the run's cluster, migrated (a copy of the template), or `empty` (no table: for
 * the migration tests); `drop` removes it.
 */
export async function freshDatabase(
  options: { empty?: boolean } = {},
): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const base = testCluster();
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: `${base}postgres` });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${options.empty ? 'template0' : TEMPLATE_DB}`);
  } finally {
    await admin.end();
  }
  return {
    url: `${base}${name}`,
    name,
    drop: async () => {
      const client = new pg.Client({ connectionString: `${base}postgres` });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
