import { posix } from 'node:path';
import { LoopError } from '../core/errors.js';
import { within } from '../os/path-within.js';

/**
 * Paths for the sandbox: what to hide by default, how configured paths expand, and the one check
 * every path passes before it reaches bwrap's argv. Pure: no file system, no process environment
 * (the environment is always passed in).
 */

/**
 * The operator's credential files and directories, relative to their home: hidden from every engine.
 * A directory becomes an empty tmpfs, a file an empty read-only file (see bwrap.ts). Shell histories
 * are here because people paste tokens into shells.
 */
export const CREDENTIAL_PATHS: readonly string[] = [
  '.ssh',
  '.gnupg',
  '.netrc',
  '.git-credentials',
  '.config/git/credentials',
  '.config/gh',
  '.config/hub',
  '.aws',
  '.azure',
  '.config/gcloud',
  '.kube',
  '.docker',
  '.config/containers/auth.json',
  '.npmrc',
  '.yarnrc',
  '.yarnrc.yml',
  '.pypirc',
  '.gem/credentials',
  '.cargo/credentials',
  '.cargo/credentials.toml',
  '.m2/settings.xml',
  '.gradle/gradle.properties',
  '.terraform.d/credentials.tfrc.json',
  '.vault-token',
  '.password-store',
  '.local/share/keyrings',
  '.config/op',
  '.config/rclone',
  '.s3cfg',
  '.boto',
  '.oci',
  // Engines' own logins, keys and histories in the operator's home (in the sandbox, an engine gets a
  // config dir of its own per session).
  '.claude.json',
  '.claude/.credentials.json',
  '.claude/projects',
  '.codex/auth.json',
  '.codex/sessions',
  '.gemini/oauth_creds.json',
  '.gemini/google_accounts.json',
  '.gemini/tmp',
  '.bash_history',
  '.zsh_history',
  '.python_history',
  '.node_repl_history',
  '.psql_history',
  '.mysql_history',
];

/**
 * System paths an engine must not reach, even though the rest of `/` is visible read-only. The
 * sandbox keeps uid 0 when the daemon runs as root, and a Unix socket stays connectable on a
 * read-only mount (connect(2) checks write permission on the socket inode, and the read-only-mount
 * check applies only to regular files, directories and symlinks): /run holds the Docker, containerd
 * and podman sockets and the system D-Bus, through which root starts any process outside the
 * sandbox. /etc/shadow and the SSH host keys are readable by root.
 */
export const SYSTEM_HIDDEN_PATHS: readonly string[] = [
  '/run',
  '/var/run',
  '/etc/shadow',
  '/etc/gshadow',
  '/etc/ssh/ssh_host_rsa_key',
  '/etc/ssh/ssh_host_ecdsa_key',
  '/etc/ssh/ssh_host_ed25519_key',
  '/etc/ssh/ssh_host_dsa_key',
];

/** The operator's credential paths under `home` (absolute; they need not exist). */
export function credentialPaths(home: string): string[] {
  const root = normalizePath(home, 'the home directory');
  return CREDENTIAL_PATHS.map((rel) => posix.join(root, rel));
}

/**
 * Sockets and runtime directories named by the daemon's environment: the SSH and D-Bus session
 * agents, the user's runtime dir, a Unix-socket DOCKER_HOST, and the tmux servers' socket dir (a
 * tmux socket runs any command outside the sandbox: `run-shell`). Those under /tmp or /run are
 * already out of sight with a private /tmp and SYSTEM_HIDDEN_PATHS; listing them is harmless.
 */
export function runtimeHiddenPaths(env: Readonly<Record<string, string | undefined>>, uid: number): string[] {
  const found: string[] = [];
  const add = (value: string | undefined) => {
    if (value?.startsWith('/')) {
      try {
        found.push(normalizePath(value, 'a runtime path'));
      } catch {
        // Not a plain path (a newline, `..`): nothing a sandbox could bind; bwrap never sees it.
      }
    }
  };
  add(env.SSH_AUTH_SOCK);
  add(env.XDG_RUNTIME_DIR);
  add(/(?:^|;)unix:path=([^,;]+)/.exec(env.DBUS_SESSION_BUS_ADDRESS ?? '')?.[1]);
  add(/^unix:\/\/(\/.*)$/.exec(env.DOCKER_HOST ?? '')?.[1]);
  add(`${env.TMUX_TMPDIR || '/tmp'}/tmux-${uid}`);
  return [...new Set(found)];
}

const NAME = /[A-Za-z_][A-Za-z0-9_]*/y;

/**
 * Expand `~`, `~/…`, `$VAR` and `${VAR}` against `env` and normalise the result (see normalizePath).
 * An unset or empty variable (HOME for `~`) is an error, or, with `unset: 'skip'`, returns null: an
 * engine's optional directory whose variable is not set. `~user`, a lone `$` and an unclosed `${`
 * are errors.
 */
export function expandPath(
  raw: string,
  env: Readonly<Record<string, string | undefined>>,
  options: { unset?: 'throw' | 'skip'; what?: string } = {},
): string | null {
  const what = options.what ?? 'sandbox path';
  const invalid = (why: string) =>
    new LoopError('config-invalid', `${what} ${JSON.stringify(raw)}: ${why}`, {
      hint: 'Write an absolute path, ~/…, or $VAR/… (an environment variable that is set).',
    });
  if (typeof raw !== 'string' || raw.length === 0) throw invalid('empty');
  let rest = raw;
  let out = '';
  if (rest === '~' || rest.startsWith('~/')) {
    const home = env.HOME;
    if (!home) {
      if (options.unset === 'skip') return null;
      throw invalid('~ needs HOME, which is not set');
    }
    out = home;
    rest = rest.slice(1);
  } else if (rest.startsWith('~')) {
    throw invalid('~user is not supported');
  }
  for (let i = 0; i < rest.length; i++) {
    const ch = rest[i];
    if (ch !== '$') {
      out += ch;
      continue;
    }
    const braced = rest[i + 1] === '{';
    NAME.lastIndex = i + (braced ? 2 : 1);
    const name = NAME.exec(rest)?.[0];
    if (!name) throw invalid('a "$" that starts no variable name');
    let end = NAME.lastIndex;
    if (braced) {
      if (rest[end] !== '}') throw invalid(`an unclosed "\${${name}"`);
      end += 1;
    }
    const value = env[name];
    if (!value) {
      if (options.unset === 'skip') return null;
      throw invalid(`the variable ${name} is not set`);
    }
    out += value;
    i = end - 1;
  }
  return normalizePath(out, what);
}

/** Characters no path given to bwrap may hold: NUL, newlines and every other control character. */
const CONTROL = /[\u0000-\u001f\u007f]/;
const PATH_MAX = 4096;

/**
 * An absolute path with `.` components, repeated and trailing slashes removed. Relative paths, `..`
 * components (their meaning depends on symlinks), control characters and over-long paths are errors.
 */
export function normalizePath(path: string, what = 'sandbox path'): string {
  const invalid = (why: string) =>
    new LoopError('config-invalid', `${what} ${JSON.stringify(path)}: ${why}`, {
      hint: 'Use a plain absolute path: no "..", no control characters.',
    });
  if (typeof path !== 'string' || path.length === 0) throw invalid('empty');
  if (CONTROL.test(path)) throw invalid('contains a control character (NUL, newline, …)');
  if (!path.startsWith('/')) throw invalid('not an absolute path');
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw invalid('contains ".."');
  const normal = `/${parts.join('/')}`;
  if (normal.length >= PATH_MAX) throw invalid('longer than PATH_MAX');
  return normal;
}

/**
 * The strict check bwrap's argv builder applies: `path` must already be exactly what normalizePath
 * returns for it. Anything else is an error naming `what`.
 */
export function assertPlainPath(path: string, what: string): string {
  const normal = normalizePath(path, what);
  if (normal !== path) {
    throw new LoopError('config-invalid', `${what} ${JSON.stringify(path)}: not normalised (${normal})`, {
      hint: 'Pass paths through normalizePath (or resolveSandboxSpec) first.',
    });
  }
  return path;
}

/** Whether `path` is `dir` or inside it (both normalised). */
export function isWithin(dir: string, path: string): boolean {
  return within(path, dir);
}

/** Number of components: `/` is 0, `/a` 1, `/a/b` 2. */
export function pathDepth(path: string): number {
  return path === '/' ? 0 : path.split('/').length - 1;
}
