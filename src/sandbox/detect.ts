import { execFile, spawnSync } from 'node:child_process';
import { platform } from 'node:os';
import { whichBinary } from '../engines/which.js';
import { bwrapArgv } from './bwrap.js';
import { forgetProbe, probeIdentity, readProbe, writeProbe } from './probe-cache.js';

export type BwrapDetection =
  | { available: true; path: string; version: string }
  | { available: false; reason: string; hint: string };

export interface DetectBwrapOptions {
  /** The bwrap binary (config `sandbox.bwrap`); default: `bwrap` on PATH. */
  path?: string | undefined;
  /** Whose PATH to search (default: this process's environment). */
  env?: Readonly<Record<string, string | undefined>>;
  /** How long the trial run may take (default 10 s). */
  timeoutMs?: number;
  /**
   * Ignore the cached answers (this process's and the kept one): probe afresh, and keep its answer
   * (a failure deletes the kept one: `the-loop doctor` heals a stale entry).
   */
  fresh?: boolean;
  /**
   * Where a working probe's answer is kept across processes (probe-cache.ts); unset: probed once
   * per process.
   */
  cacheDir?: string | undefined;
}

/** A trial can hang only on a wedged kernel or a stopped terminal: long enough for a loaded machine. */
const TRIAL_TIMEOUT_MS = 10_000;

const INSTALL_HINT =
  'Install bubblewrap — Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf install bubblewrap; Arch: sudo pacman -S bubblewrap — or set sandbox.mode: none to run engines unsandboxed.';

const USERNS_HINT =
  'bwrap needs user namespaces here: check `sysctl kernel.unprivileged_userns_clone` (Debian: set it to 1), `sysctl user.max_user_namespaces` (not 0), and on Ubuntu 24.04+ `kernel.apparmor_restrict_unprivileged_userns` (an AppArmor profile for bwrap, or 0). In a container, its seccomp profile may forbid namespaces (docker run --security-opt seccomp=unconfined, or run the daemon on the host). Or set sandbox.mode: none.';

const cache = new Map<string, BwrapDetection>();

/**
 * Whether bubblewrap works here, and where it is. Finding the binary is not enough — user namespaces
 * can be disabled, or a container may forbid them — so it runs a trial with the flags every sandbox
 * uses. Synchronous (it answers once per process: cached by binary and PATH).
 */
export function detectBwrap(options: DetectBwrapOptions = {}): BwrapDetection {
  const env = options.env ?? process.env;
  const key = `${options.path ?? ''}\0${env.PATH ?? ''}`;
  const cached = options.fresh ? undefined : cache.get(key);
  if (cached) return cached;
  const found = probe(
    options.path,
    env,
    options.timeoutMs ?? TRIAL_TIMEOUT_MS,
    options.cacheDir,
    options.fresh,
  );
  cache.set(key, found);
  return found;
}

/**
 * The same answer as `detectBwrap`, without blocking: the version and the trial run at once, and the
 * answer lands in the same cache (a `detectBwrap` call afterwards reads it). `the-loop run` starts it
 * before it dispatches, so the probe overlaps the rest of the start instead of delaying the engine.
 */
export function detectBwrapAsync(options: Omit<DetectBwrapOptions, 'fresh'> = {}): Promise<BwrapDetection> {
  const env = options.env ?? process.env;
  const key = `${options.path ?? ''}\0${env.PATH ?? ''}`;
  const cached = cache.get(key);
  if (cached) return Promise.resolve(cached);
  let pending = inFlight.get(key);
  if (!pending) {
    const timeoutMs = options.timeoutMs ?? TRIAL_TIMEOUT_MS;
    pending = probeAsync(options.path, env, timeoutMs, options.cacheDir).then((found) => {
      inFlight.delete(key);
      // A synchronous probe that answered meanwhile wins: one answer per process.
      if (!cache.has(key)) cache.set(key, found);
      return cache.get(key) ?? found;
    });
    inFlight.set(key, pending);
  }
  return pending;
}

const inFlight = new Map<string, Promise<BwrapDetection>>();

/** Where a probe's answer is kept, for a located bwrap: its directory and identity. */
type Kept = { dir: string; identity: string } | undefined;

function kept(dir: string | undefined, found: { path: string; trial: string[] }): Kept {
  if (!dir) return undefined;
  const identity = probeIdentity(found.path, found.trial.at(-1) ?? '', found.trial);
  return identity ? { dir, identity } : undefined;
}

/** The kept answer for this identity: bwrap works (found again, never read from the entry). */
function keptAnswer(path: string, keep: Kept): BwrapDetection | undefined {
  const version = keep && readProbe(keep.dir, path, keep.identity);
  return version ? { available: true, path, version } : undefined;
}

/**
 * A working probe's answer is kept; a failure never is (a fixed machine is seen at once), and it
 * deletes what was kept for this binary (a stale entry heals).
 */
function keepAnswer(
  answer: BwrapDetection,
  path: string,
  cacheDir: string | undefined,
  keep: Kept,
): BwrapDetection {
  if (keep && answer.available) writeProbe(keep.dir, answer.path, keep.identity, answer.version);
  if (cacheDir && !answer.available) forgetProbe(cacheDir, path);
  return answer;
}

type Ran = { ok: boolean; stdout: string; why: string };

/** Where bwrap is, or why it cannot be (no process run). */
function locate(
  configured: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): { path: string; trial: string[] } | BwrapDetection {
  if (platform() !== 'linux') {
    return {
      available: false,
      reason: `bubblewrap runs on Linux only (this is ${platform()})`,
      hint: 'macOS and Windows are not supported: set sandbox.mode: none, or run the daemon in a Linux VM or container.',
    };
  }
  const path = whichBinary(configured ?? 'bwrap', env.PATH, process.cwd());
  if (!path) {
    return {
      available: false,
      reason: configured ? `${configured} is not an executable file` : 'bwrap is not on PATH',
      hint: INSTALL_HINT,
    };
  }
  const truePath = whichBinary('true', env.PATH, '/') ?? '/bin/true';
  // The flags of a real sandbox (namespaces, capability drop, private /tmp), on the smallest command.
  const trial = [
    ...bwrapArgv({
      writable: [],
      readOnly: [],
      writableFiles: [],
      sockets: [],
      hiddenDirs: [],
      hiddenFiles: [],
      newSession: true,
    }),
    truePath,
  ];
  return { path, trial };
}

/** The answer from `bwrap --version` and the trial (the trial is not judged when the version failed). */
function judge(path: string, version: Ran, trial: () => Ran): BwrapDetection {
  const match = /bubblewrap\s+(\d+\.\d+(?:\.\d+)?)/.exec(version.stdout);
  if (!version.ok || !match?.[1]) {
    return { available: false, reason: `${path} --version failed: ${version.why}`, hint: INSTALL_HINT };
  }
  const tried = trial();
  if (!tried.ok) {
    return {
      available: false,
      reason: `bwrap ${match[1]} cannot create a sandbox here: ${tried.why}`,
      hint: USERNS_HINT,
    };
  }
  return { available: true, path, version: match[1] };
}

function probe(
  configured: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  timeoutMs: number,
  cacheDir: string | undefined,
  fresh: boolean | undefined,
): BwrapDetection {
  const found = locate(configured, env);
  if (!('trial' in found)) return found;
  const keep = kept(cacheDir, found);
  const known = fresh ? undefined : keptAnswer(found.path, keep);
  if (known) return known;
  const answer = judge(found.path, run(found.path, ['--version'], timeoutMs), () =>
    run(found.path, found.trial, timeoutMs),
  );
  return keepAnswer(answer, found.path, cacheDir, keep);
}

async function probeAsync(
  configured: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  timeoutMs: number,
  cacheDir: string | undefined,
): Promise<BwrapDetection> {
  const found = locate(configured, env);
  if (!('trial' in found)) return found;
  const keep = kept(cacheDir, found);
  const known = keptAnswer(found.path, keep);
  if (known) return known;
  const [version, trial] = await Promise.all([
    runAsync(found.path, ['--version'], timeoutMs),
    runAsync(found.path, found.trial, timeoutMs),
  ]);
  return keepAnswer(
    judge(found.path, version, () => trial),
    found.path,
    cacheDir,
    keep,
  );
}

// No secrets in a trial: bwrap needs no environment at all.
const RUN_OPTIONS = { encoding: 'utf8', killSignal: 'SIGKILL', env: {} } as const;

function run(file: string, args: string[], timeoutMs: number): Ran {
  const result = spawnSync(file, args, {
    ...RUN_OPTIONS,
    timeout: timeoutMs,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const error = result.error as NodeJS.ErrnoException | undefined;
  return ran(error, result.status, result.signal, result.stdout, result.stderr);
}

function runAsync(file: string, args: string[], timeoutMs: number): Promise<Ran> {
  return new Promise((resolve) => {
    const child = execFile(file, args, { ...RUN_OPTIONS, timeout: timeoutMs }, (error, stdout, stderr) => {
      // As spawnSync says it: a run stopped by the timeout is ETIMEDOUT.
      if (error?.killed) return resolve({ ok: false, stdout: '', why: 'ETIMEDOUT' });
      // execFile reports a non-zero exit as an error with a numeric code: an exit, not a failure to run.
      const spawnError =
        error && typeof error.code === 'string' ? (error as NodeJS.ErrnoException) : undefined;
      resolve(ran(spawnError, child.exitCode, child.signalCode, stdout, stderr));
    });
    child.stdin?.end();
  });
}

function ran(
  error: NodeJS.ErrnoException | undefined,
  status: number | null,
  signal: NodeJS.Signals | null,
  stdout: string,
  stderr: string,
): Ran {
  if (error) return { ok: false, stdout: '', why: error.code ?? error.message };
  if (status === 0) return { ok: true, stdout, why: '' };
  const said = stderr.trim().split('\n')[0]?.slice(0, 300);
  return { ok: false, stdout, why: said || (signal ? `killed by ${signal}` : `exit ${status}`) };
}
