/**
 * The chaos test's hosts: daemons of the-loop on one PostgreSQL database, each its own directory
 * (config, data dir, repository), with a quick stand-in engine whose processes it can count.
 *
 * The engine is a POSIX shell script (a node process per turn costs ~50 ms of CPU, and the test
 * runs ~1,600 turns on 2 cores). It speaks Claude Code's stream-json, sleeps `CHAOS_ENGINE_SLEEP`
 * seconds in a child (`sleep`) — 30 s while the file `CHAOS_ENGINE_SLOW` exists, so the test can
 * catch a host mid-turn — and writes "<pid> <sleep pid> <session>" to a file named by its pid under
 * `CHAOS_ENGINE_PIDS`, so the test can tell which engine processes of a host are still alive.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { storeSchema } from '../../src/config/store-schema.js';
import { fakeEngineConfig } from '../helpers/cli.js';
import { type DaemonProcess, startDaemonProcess } from '../helpers/daemon.js';

export const SECRET = 'chaos-webhook-secret-0123456789abcdef';

const ENGINE = `#!/bin/sh
sid=none
while [ $# -gt 0 ]; do
  case "$1" in
    --session-id|--resume) sid="$2"; shift 2 ;;
    --) shift; break ;;
    *) shift ;;
  esac
done
t="\${CHAOS_ENGINE_SLEEP:-0.2}"
if [ -e "$CHAOS_ENGINE_SLOW" ]; then t=30; fi
printf '{"type":"system","subtype":"init","session_id":"%s","model":"fake-1","tools":[]}\\n' "$sid"
sleep "$t" &
child=$!
echo "$$ $child $sid" > "$CHAOS_ENGINE_PIDS/$$"
wait "$child"
printf '{"type":"assistant","message":{"id":"m1","model":"fake-1","content":[{"type":"text","text":"done"}]}}\\n'
printf '{"type":"result","subtype":"success","is_error":false,"session_id":"%s","total_cost_usd":0.001,"usage":{"input_tokens":100,"output_tokens":7,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},"modelUsage":{"fake-1":{}}}\\n' "$sid"
`;

/** Writes the engine script under `dir`; its path. */
export function writeEngine(dir: string): string {
  const path = join(dir, 'chaos-engine.sh');
  writeFileSync(path, ENGINE);
  chmodSync(path, 0o755);
  return path;
}

/** The multi-host settings of `store:`, when this build of the-loop knows them (else none). */
export function multiHostSettings(settings: Record<string, number>): Record<string, number> {
  const probe = storeSchema.safeParse({ kind: 'postgres', url: 'postgres://x@127.0.0.1/x', ...settings });
  return probe.success ? settings : {};
}

export interface ChaosHost {
  id: string;
  dir: string;
  /** Engine pid files (one per engine process it started). */
  pidDir: string;
  /** While this file exists, the host's engine turns take 30 s. */
  slowFile: string;
  daemon: DaemonProcess;
  pid: number;
  /** The database URL this host uses (through a cuttable link, for one of them). */
  databaseUrl: string;
}

export interface HostOptions {
  id: string;
  root: string;
  engine: string;
  databaseUrl: string;
  turnSeconds: number;
  store: Record<string, number>;
  concurrency: number;
}

/** Start one host: its directory, config and daemon (`the-loop serve`). */
export async function startHost(options: HostOptions): Promise<ChaosHost> {
  const dir = join(options.root, options.id);
  const pidDir = join(dir, 'engine-pids');
  // One repository path in every host's config (the same config everywhere, as in a real fleet):
  // a delivery routed on one host is not routed again on another.
  const repo = join(options.root, 'widgets');
  for (const d of [dir, pidDir, repo]) mkdirSync(d, { recursive: true });
  const slowFile = join(dir, 'slow');
  const config = {
    ...fakeEngineConfig(join(dir, 'engine-state'), {
      binary: options.engine,
      passEnv: [],
      env: {
        CHAOS_ENGINE_PIDS: pidDir,
        CHAOS_ENGINE_SLEEP: String(options.turnSeconds),
        CHAOS_ENGINE_SLOW: slowFile,
      },
    }),
    dataDir: 'data',
    store: { kind: 'postgres', url: 'env:THE_LOOP_DATABASE_URL', host: options.id, ...options.store },
    webhook: { secret: SECRET },
    routing: { triggers: { labels: ['the-loop'] } },
    repos: { 'acme/widgets': { path: repo } },
    dispatch: { concurrency: options.concurrency, pollSeconds: 0.5 },
  };
  writeFileSync(join(dir, 'config.yaml'), stringify(config));
  const daemon = await startDaemonProcess({
    cwd: dir,
    env: { THE_LOOP_CONFIG: join(dir, 'config.yaml'), THE_LOOP_DATABASE_URL: options.databaseUrl },
    timeoutMs: 60_000,
  });
  return {
    id: options.id,
    dir,
    pidDir,
    slowFile,
    daemon,
    pid: daemon.child.pid ?? 0,
    databaseUrl: options.databaseUrl,
  };
}

/** Whether a process runs (a zombie, exited but not yet reaped by its parent, does not). */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    // /proc/<pid>/stat: "pid (comm) S …"; the state follows the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
};

export interface EngineProcess {
  /** The engine (its process group's leader) and its child. */
  pid: number;
  child: number;
  session: string;
  /** When its pid file was written (ms since the epoch). */
  startedMs: number;
}

/** Every engine process a host started (from its pid files). */
export function engines(host: Pick<ChaosHost, 'pidDir'>): EngineProcess[] {
  if (!existsSync(host.pidDir)) return [];
  const found: EngineProcess[] = [];
  for (const name of readdirSync(host.pidDir)) {
    const path = join(host.pidDir, name);
    const [pid, child, session] = readFileSync(path, 'utf8').trim().split(' ');
    if (!pid || !child) continue;
    found.push({
      pid: Number(pid),
      child: Number(child),
      session: session ?? '',
      startedMs: statSync(path).mtimeMs,
    });
  }
  return found;
}

/** The engine processes of a host still alive (either the script or its sleep). */
export const liveEngines = (host: Pick<ChaosHost, 'pidDir'>): EngineProcess[] =>
  engines(host).filter((e) => alive(e.pid) || alive(e.child));

/** Kill what is left of a host's engines (their process groups): the test's own cleanup. */
export function killEngines(host: Pick<ChaosHost, 'pidDir'>): void {
  for (const e of liveEngines(host)) {
    for (const target of [-e.pid, e.pid, e.child]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
}

/** A host dies at once: its daemon and its engines, SIGKILL (as a machine that loses power). */
export async function killHost(host: ChaosHost): Promise<void> {
  const exited = new Promise<void>((resolve) => {
    if (host.daemon.child.exitCode !== null || host.daemon.child.signalCode !== null) resolve();
    else host.daemon.child.once('exit', () => resolve());
  });
  host.daemon.child.kill('SIGKILL');
  killEngines(host);
  await exited;
}
