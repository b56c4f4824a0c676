import { bwrapArgv } from '../sandbox/bwrap.js';
import { detectBwrap } from '../sandbox/detect.js';
import { credentialPaths, runtimeHiddenPaths, SYSTEM_HIDDEN_PATHS } from '../sandbox/paths.js';
import { resolveSandboxSpec } from '../sandbox/resolve.js';
import { type GitRunner, gitRunner } from '../workspaces/git-runner.js';

/**
 * How the daemon runs git in repositories agents wrote to: jailed (gitJail) where bubblewrap runs —
 * looked for on first use, never when the sandbox is off (`sandbox.mode: none`) — else plainly.
 */
export function daemonGit(input: {
  sandbox: { mode: string; bwrap?: string | undefined };
  dataDir: string;
  configPath: string | null;
  env: Readonly<Record<string, string | undefined>>;
}): GitRunner {
  const { sandbox, env } = input;
  let jail: ReturnType<typeof gitJail> | undefined;
  return gitRunner(env, (paths) => {
    if (!jail) {
      const found = sandbox.mode === 'none' ? undefined : detectBwrap({ path: sandbox.bwrap, env });
      if (!found?.available) return undefined;
      jail = gitJail({ bwrap: found.path, dataDir: input.dataDir, configPath: input.configPath, env });
    }
    return jail(paths);
  });
}

/**
 * The jail the daemon's own git runs in when it works on a repository an agent wrote to (see
 * workspaces/git-runner.ts): the file system read-only but the paths the command writes, no network,
 * no data dir, no config file, none of the operator's credentials. A command a planted config makes
 * git run can then change nothing but that repository, and reach nobody.
 */
export function gitJail(input: {
  bwrap: string;
  dataDir: string;
  configPath: string | null;
  env: Readonly<Record<string, string | undefined>>;
}): (paths: { cwd: string; writable: string[]; readable: string[] }) => { file: string; args: string[] } {
  const home = input.env.HOME;
  return ({ cwd, writable, readable }) => {
    const { spec } = resolveSandboxSpec({
      writable,
      readOnly: [cwd, ...readable].filter((p) => !writable.includes(p)),
      hidden: [
        input.dataDir,
        ...(input.configPath ? [input.configPath] : []),
        ...(home ? credentialPaths(home) : []),
        ...SYSTEM_HIDDEN_PATHS,
        ...runtimeHiddenPaths(input.env, process.getuid?.() ?? 0),
      ],
      emptyFile: `${input.dataDir}/sandbox-empty`,
      chdir: cwd,
      newSession: true,
      unshareNet: true,
    });
    return { file: input.bwrap, args: bwrapArgv(spec) };
  };
}
