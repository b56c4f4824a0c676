import { execFile } from 'node:child_process';
import { LoopError } from '../core/errors.js';

/**
 * How the daemon runs git in a repository an agent has written to (its worktree, the checkout
 * whose `.git` a worktree shares). Such a repository can carry configuration, hooks and attributes
 * the agent planted (`core.fsmonitor`, `core.hooksPath`, a filter driver, a `commondir` pointing at
 * a config of its own) that make git run a command. So the daemon's git never gets a credential
 * (a minimal environment), turns off the hooks and the fsmonitor on its command line, and — where
 * bubblewrap runs — runs in a jail: everything read-only but the paths the command must write, no
 * network, no view of the data dir or the operator's credentials.
 */
export type GitRunner = (
  cwd: string,
  args: string[],
  options?: { writable?: string[]; readable?: string[] },
) => Promise<{ stdout: string; stderr: string }>;

/** Settings that would run a command, switched off on the command line (it wins over any config file). */
export const SAFE_GIT_ARGS = ['-c', 'core.fsmonitor=false', '-c', 'core.hooksPath=/dev/null'];

/** git's environment: enough to run, nothing to authenticate with. */
export function safeGitEnv(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {
    PATH: env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    // No global config (credential helpers, aliases) either; the repository's own is what it is.
    GIT_CONFIG_GLOBAL: '/dev/null',
  };
  if (env.HOME) out.HOME = env.HOME;
  if (env.LANG) out.LANG = env.LANG;
  return out;
}

/**
 * A GitRunner: `wrap` (the jail's command prefix for a set of writable paths) or none; `env` the
 * daemon's environment, reduced to what git needs.
 */
export function gitRunner(
  env: Readonly<Record<string, string | undefined>>,
  wrap?: (paths: {
    cwd: string;
    writable: string[];
    readable: string[];
  }) => { file: string; args: string[] } | undefined,
): GitRunner {
  const gitEnv = safeGitEnv(env);
  return (cwd, args, options = {}) =>
    new Promise((resolve, reject) => {
      const jail = wrap?.({ cwd, writable: options.writable ?? [], readable: options.readable ?? [] });
      const file = jail ? jail.file : 'git';
      const argv = jail ? [...jail.args, 'git', ...SAFE_GIT_ARGS, ...args] : [...SAFE_GIT_ARGS, ...args];
      execFile(
        file,
        argv,
        { cwd, env: gitEnv, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
        (error, stdout, stderr) => {
          if (error) {
            reject(
              new LoopError(
                'internal',
                `git ${args[0]} failed: ${(stderr || error.message).trim().split('\n')[0]}`,
                {
                  cause: error,
                },
              ),
            );
          } else resolve({ stdout, stderr });
        },
      );
    });
}

/** The default: no jail (tests, and machines without bubblewrap), the rest as above. */
export const plainGit: GitRunner = gitRunner(process.env);
