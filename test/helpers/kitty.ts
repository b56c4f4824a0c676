import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pidAlive } from './cli.js';

/**
 * A private kitty for a test: `xvfb-run -a kitty --config NONE` listening on a socket in a 0700
 * directory of its own, so no test reaches the user's kitty or another test's. xvfb-run, Xvfb and
 * kitty run in one process group (spawned detached), which `stop()` ends by its id.
 */

export interface TestKitty {
  /** The remote-control address (`unix:<dir>/kitty.sock`). */
  to: string;
  /** The private directory (0700) holding the socket; tests may put files here. */
  dir: string;
  /** The process group leader (xvfb-run). */
  pid: number;
  /** `kitty @ --to <to> <args…>` (argv only), stdout. */
  remote(args: string[], stdin?: string): Promise<string>;
  stop(): Promise<void>;
}

const onPath = (binary: string): boolean => {
  try {
    execFileSync('sh', ['-c', 'command -v "$1"', 'sh', binary], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

/** Why kitty tests cannot run here, or null when they can (CI installs both). */
export function kittySkipReason(): string | null {
  if (!onPath('kitty')) return 'kitty is not installed (apt-get install kitty)';
  if (!onPath('xvfb-run')) return 'xvfb-run is not installed (apt-get install xvfb)';
  return null;
}

export function kittyRemote(to: string, args: string[], stdin?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      'kitty',
      ['@', '--to', to, ...args],
      { timeout: 15_000 },
      (error, stdout, stderr) =>
        error ? reject(new Error(`kitty @ ${args[0]}: ${stderr || error.message}`)) : resolve(stdout),
    );
    child.stdin?.end(stdin ?? '');
  });
}

/** The pids of every window's program and foreground processes (empty when kitty does not answer). */
async function windowPids(to: string): Promise<number[]> {
  try {
    const data = JSON.parse(await kittyRemote(to, ['ls'])) as {
      tabs: { windows: { pid?: number; foreground_processes?: { pid?: number }[] }[] }[];
    }[];
    const pids = data.flatMap((os) =>
      os.tabs.flatMap((tab) =>
        tab.windows.flatMap((w) => [w.pid, ...(w.foreground_processes ?? []).map((p) => p.pid)]),
      ),
    );
    return [...new Set(pids.filter((p): p is number => typeof p === 'number' && p > 0))];
  } catch {
    return [];
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Start kitty running `program` (argv) with `env` added to its environment; resolves once
 * `kitty @ ls` answers on its socket.
 */
export async function startKitty(program: string[], env: Record<string, string> = {}): Promise<TestKitty> {
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-kitty-test-'));
  const to = `unix:${join(dir, 'kitty.sock')}`;
  const child = spawn(
    'xvfb-run',
    [
      '-a',
      'kitty',
      '--config',
      'NONE',
      '-o',
      'allow_remote_control=socket-only',
      '--listen-on',
      to,
      ...program,
    ],
    // TMPDIR: xvfb-run's own temp dir (its Xauthority) goes inside ours, so it is removed with ours
    // even when xvfb-run is ended by a signal (its clean-up trap runs only on a normal exit).
    { detached: true, stdio: 'ignore', env: { ...process.env, ...env, TMPDIR: dir } },
  );
  const pid = child.pid;
  if (pid === undefined) throw new Error('xvfb-run did not start');
  child.unref();
  const stop = async () => {
    // kitty starts each window's program in a session of its own (outside our group): note their
    // pids first, and see them gone (SIGHUP when kitty's terminals close) after the group is ended.
    const programs = await windowPids(to);
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {}
    for (let i = 0; i < 50 && pidAlive(pid); i++) await sleep(100);
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {}
    for (let i = 0; i < 50 && programs.some(pidAlive); i++) await sleep(100);
    for (const p of programs.filter(pidAlive)) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {}
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await kittyRemote(to, ['ls']);
      break;
    } catch (error) {
      if (Date.now() > deadline || !pidAlive(pid)) {
        await stop();
        throw new Error(`kitty did not answer on ${to}: ${String(error)}`);
      }
      await sleep(200);
    }
  }
  return { to, dir, pid, remote: (args, stdin) => kittyRemote(to, args, stdin), stop };
}
