import { bwrapArgv } from '../sandbox/bwrap.js';
import { credentialPaths, runtimeHiddenPaths, SYSTEM_HIDDEN_PATHS } from '../sandbox/paths.js';
import { resolveSandboxSpec } from '../sandbox/resolve.js';

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
