import { spawnSync } from 'node:child_process';
import { platform } from 'node:os';
import { whichBinary } from '../engines/which.js';
import { bwrapArgv } from './bwrap.js';

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
  /** Ignore the cached answer. */
  fresh?: boolean;
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
  const found = probe(options.path, env, options.timeoutMs ?? TRIAL_TIMEOUT_MS);
  cache.set(key, found);
  return found;
}

function probe(
  configured: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  timeoutMs: number,
): BwrapDetection {
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
  const version = run(path, ['--version'], timeoutMs);
  const match = /bubblewrap\s+(\d+\.\d+(?:\.\d+)?)/.exec(version.stdout);
  if (!version.ok || !match?.[1]) {
    return { available: false, reason: `${path} --version failed: ${version.why}`, hint: INSTALL_HINT };
  }
  const truePath = whichBinary('true', env.PATH, '/') ?? '/bin/true';
  // The flags of a real sandbox (namespaces, capability drop, private /tmp), on the smallest command.
  const trial = run(
    path,
    [
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
    ],
    timeoutMs,
  );
  if (!trial.ok) {
    return {
      available: false,
      reason: `bwrap ${match[1]} cannot create a sandbox here: ${trial.why}`,
      hint: USERNS_HINT,
    };
  }
  return { available: true, path, version: match[1] };
}

function run(file: string, args: string[], timeoutMs: number): { ok: boolean; stdout: string; why: string } {
  const result = spawnSync(file, args, {
    encoding: 'utf8',
    timeout: timeoutMs,
    killSignal: 'SIGKILL',
    stdio: ['ignore', 'pipe', 'pipe'],
    // No secrets in a trial: bwrap needs no environment at all.
    env: {},
  });
  if (result.error)
    return {
      ok: false,
      stdout: '',
      why: (result.error as NodeJS.ErrnoException).code ?? result.error.message,
    };
  if (result.status === 0) return { ok: true, stdout: result.stdout, why: '' };
  const said = result.stderr.trim().split('\n')[0]?.slice(0, 300);
  return {
    ok: false,
    stdout: result.stdout,
    why: said || (result.signal ? `killed by ${result.signal}` : `exit ${result.status}`),
  };
}
