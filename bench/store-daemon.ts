/**
 * The real daemon for bench/store.ts: `node bin/the-loop.js serve --port 0` in a directory of its
 * own, configured with one store (SQLite in that directory, or PostgreSQL at a URL handed in
 * THE_LOOP_DATABASE_URL), XDG_STATE_HOME pointed into the bench's temp dir, and what it stored
 * counted once it stopped.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stopChild } from './store-client.js';

export type StoreKind = 'sqlite' | 'postgres';

export interface BenchDaemon {
  kind: StoreKind;
  child: ChildProcess;
  /** The webhook URL it serves. */
  url: string;
  dir: string;
  /** Its output so far (stdout and stderr), for errors. */
  output(): string;
  stop(): Promise<void>;
}

export interface DaemonOptions {
  kind: StoreKind;
  /** The bench's bin/the-loop.js. */
  bin: string;
  /** Where its config (and, on SQLite, its registry) lives. */
  dir: string;
  secret: string;
  /** XDG_STATE_HOME for the child (inside the bench's temp dir). */
  stateHome: string;
  /** PostgreSQL only: the database's URL. */
  databaseUrl?: string;
}

function configText(o: DaemonOptions): string {
  const lines = [
    'webhook:',
    `  secret: ${o.secret}`,
    'repos:',
    '  acme/widgets:',
    `    path: ${JSON.stringify(o.dir)}`,
    // Any free port, and the socket inside the bench's temp dir (two daemons side by side).
    'gateway:',
    '  port: 0',
    `  socket: ${JSON.stringify(join(o.dir, 'gateway', 'gh.sock'))}`,
  ];
  if (o.kind === 'postgres') lines.push('store:', '  kind: postgres', '  url: env:THE_LOOP_DATABASE_URL');
  return `${lines.join('\n')}\n`;
}

/** Start the daemon and wait until it says Ready (30 s at most). */
export async function startDaemon(o: DaemonOptions): Promise<BenchDaemon> {
  mkdirSync(o.dir, { recursive: true });
  const configPath = join(o.dir, 'config.yaml');
  writeFileSync(configPath, configText(o), { mode: 0o600 });
  const env: NodeJS.ProcessEnv = { ...process.env, THE_LOOP_CONFIG: configPath, XDG_STATE_HOME: o.stateHome };
  delete env.THE_LOOP_DATA_DIR;
  delete env.THE_LOOP_DATABASE_URL;
  if (o.databaseUrl) env.THE_LOOP_DATABASE_URL = o.databaseUrl;
  const child = spawn(process.execPath, [o.bin, 'serve', '--port', '0'], {
    cwd: o.dir,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the ${o.kind} daemon did not start:\n${out}`)),
        30_000,
      );
      child.once('exit', (code) => reject(new Error(`the ${o.kind} daemon exited (${code}):\n${out}`)));
      child.stdout.on('data', () => {
        const found = /webhook\s+(http:\/\/127\.0\.0\.1:\d+\/gh-webhook)/.exec(out)?.[1];
        if (found && out.includes('Ready.')) {
          clearTimeout(timer);
          resolve(found);
        }
      });
    });
    return {
      kind: o.kind,
      child,
      url,
      dir: o.dir,
      output: () => out,
      stop: () => stopChild(child, 'SIGTERM'),
    };
  } catch (error) {
    await stopChild(child, 'SIGKILL');
    throw error;
  }
}

/** What a stopped daemon stored: rows per status. */
export async function storedRows(
  daemon: BenchDaemon,
  databaseUrl?: string,
): Promise<Array<{ status: string; n: number }>> {
  if (daemon.kind === 'postgres') {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const r = await client.query(
        'SELECT status, COUNT(*)::int AS n FROM deliveries GROUP BY status ORDER BY status',
      );
      return r.rows as Array<{ status: string; n: number }>;
    } finally {
      await client.end();
    }
  }
  const { default: Database } = await import('better-sqlite3');
  const check = new Database(join(daemon.dir, 'the-loop.db'), { readonly: true });
  try {
    return check
      .prepare('SELECT status, COUNT(*) AS n FROM deliveries GROUP BY status ORDER BY status')
      .all() as Array<{ status: string; n: number }>;
  } finally {
    check.close();
  }
}
