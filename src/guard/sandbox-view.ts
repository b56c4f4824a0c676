import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { stateHome } from '../config/data-dir.js';
import type { SandboxConfig } from '../config/gateway-schema.js';
import { currentUid, ensurePrivateDirs, runtimeRoot } from '../os/runtime-dir.js';
import { bwrapArgv } from '../sandbox/bwrap.js';
import { credentialPaths, expandPath, runtimeHiddenPaths, SYSTEM_HIDDEN_PATHS } from '../sandbox/paths.js';
import { resolverConfigDir, resolveSandboxSpec } from '../sandbox/resolve.js';
import { SAFE_GIT_ARGS, safeGitEnv } from '../workspaces/git-runner.js';
import { trustedGitDirs } from './git-dirs.js';

/**
 * What one session's engine may see, as a sandbox: its workspace and its own config directories
 * read-write; its session's state (policy, hook settings, git and gh config) read-only; the files
 * its hooks write; the gateway's socket. Hidden: the-loop's data dir (every other session's state and
 * worktrees, the database, the keys), the config file, the operator's credential files, and the
 * sockets of the system. The rest of the file system is read-only; /tmp is private.
 */
export interface SandboxPlanInput {
  workspace: string;
  stateDir: string;
  /** Files the engine's hooks append to (they must exist). */
  hookFiles: string[];
  dataDir: string;
  configPath: string | null;
  /** the-loop's own install (its hook scripts), readable even when it lives under /tmp. */
  packageRoot: string;
  /** The engine's install, when it lives where the sandbox would hide it (under /tmp). */
  binaryRoot: string | undefined;
  socketPath: string | undefined;
  /** The preset's own writable paths (`~`, `$VAR`), expanded against the engine's environment. */
  engineWritable: readonly string[];
  engineEnv: Readonly<Record<string, string | undefined>>;
  /** The daemon's environment: the operator's HOME and runtime sockets. */
  operatorEnv: Readonly<Record<string, string | undefined>>;
  /** Checkouts of the other configured repositories (another session's workspace, its .git). */
  otherRepos?: readonly string[] | undefined;
  /**
   * The workspace's git dirs, when already asked (`workspaceGitDirs`, started before the rest of the
   * turn's preparation so that git runs meanwhile); asked here otherwise.
   */
  gitDirs?: readonly string[] | undefined;
  /**
   * The work item's configured repository checkout (`repos.<owner/name>.path`), when configured: its
   * own `.git` (and `.git/worktrees/<name>`) may be bound writable besides what is inside the
   * workspace; no other git dir may (`trustedGitDirs`).
   */
  repository?: string | undefined;
  config: SandboxConfig;
}

export interface SandboxPlan {
  /** bwrap's arguments up to `--`: with a terminal (PTY, tmux pane) or without (pipes). */
  argv(options: { terminal: boolean }): string[];
  /** Paths left out because they do not exist. */
  skipped: string[];
}

/** rev-parse's question of the workspace, and how it is asked (sync or not, the same). */
const gitDirsArgs = (cwd: string) => [
  ...SAFE_GIT_ARGS,
  '-C',
  cwd,
  'rev-parse',
  '--path-format=absolute',
  '--absolute-git-dir',
  '--git-common-dir',
];
const GIT_DIRS_OPTIONS = { encoding: 'utf8', timeout: 5000 } as const;

/** Absolute paths, one per line of rev-parse's answer, each once. */
const parseGitDirs = (out: string): string[] => [
  ...new Set(
    out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => isAbsolute(l)),
  ),
];

/**
 * The workspace's git dirs: its own and the common one (a worktree's main repository, outside it).
 * Asked with the hardened plumbing only (rev-parse runs no hook, filter or fsmonitor).
 */
function gitDirs(cwd: string): string[] {
  try {
    return parseGitDirs(
      execFileSync('git', gitDirsArgs(cwd), {
        ...GIT_DIRS_OPTIONS,
        stdio: ['ignore', 'pipe', 'ignore'],
        env: safeGitEnv(process.env),
      }),
    );
  } catch {
    return [];
  }
}

/**
 * The same answer as the plan's own question (the same command, environment and timeout; none when
 * git fails), without blocking: a turn's preparation starts it first, and git runs while the token
 * is minted and the session's files are written.
 */
export function workspaceGitDirs(cwd: string): Promise<string[]> {
  return new Promise((resolve) => {
    const child = execFile(
      'git',
      gitDirsArgs(cwd),
      { ...GIT_DIRS_OPTIONS, env: safeGitEnv(process.env) },
      (error, stdout) => resolve(error ? [] : parseGitDirs(stdout)),
    );
    child.stdin?.end();
  });
}

/**
 * A repository's git dirs writable (commits, branches), each its own mount point so it cannot be
 * renamed or replaced; their `config` and `hooks` read-only: a command planted there (a hook,
 * `core.fsmonitor`, a filter) would run wherever git next runs in that repository — the daemon's git
 * (jailed as well) or the operator's own.
 */
function gitProtection(
  workspace: string,
  repository: string | undefined,
  known: readonly string[] | undefined,
): { writable: string[]; readOnly: string[] } {
  // Checked here, where they are bound: git answers from files the agent writes.
  const dirs = trustedGitDirs(workspace, repository, known ?? gitDirs(workspace));
  const readOnly: string[] = [];
  for (const dir of dirs) {
    // A missing hooks dir would be created by the agent: make it, to bind it read-only.
    if (existsSync(join(dir, 'config'))) mkdirSync(join(dir, 'hooks'), { recursive: true });
    readOnly.push(join(dir, 'config'), join(dir, 'hooks'));
  }
  return { writable: dirs, readOnly };
}

/** Expanded paths: an engine's optional directory whose variable is unset is skipped; a configured one is an error. */
const expandAll = (
  paths: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  what: string,
  unset: 'skip' | 'throw',
) =>
  paths.flatMap((p) => {
    const path = expandPath(p.replace(/\/+$/, '') || '/', env, { unset, what });
    return path ? [path] : [];
  });

export function sandboxPlan(input: SandboxPlanInput): SandboxPlan {
  const engineDirs = input.engineWritable.map(
    (p) => expandAll([p], input.engineEnv, 'engine sandbox.writable path', 'skip')[0],
  );
  // A directory the engine writes must exist before it is bound (a read-only / cannot make it).
  input.engineWritable.forEach((raw, i) => {
    const path = engineDirs[i];
    if (path && raw.endsWith('/')) mkdirSync(path, { recursive: true, mode: 0o700 });
  });
  const operatorHome = input.operatorEnv.HOME;
  const engineHome = input.engineEnv.HOME;
  const homes = [...new Set([operatorHome, engineHome].filter((h): h is string => !!h && isAbsolute(h)))];
  const git = gitProtection(input.workspace, input.repository, input.gitDirs);
  // The-loop's runtime directory (keys sockets of PTY turns, the gh socket) is hidden whole: made now
  // if missing (a missing path cannot be hidden), as a TMPDIR outside /tmp would leave it in sight.
  const runtime = runtimeRoot(input.operatorEnv, currentUid());
  try {
    ensurePrivateDirs([runtime]);
  } catch {
    // Someone else's directory: it exists, so it is hidden all the same (and never used).
  }
  const writable = [
    input.workspace,
    ...engineDirs.filter((d): d is string => d !== undefined),
    ...expandAll(input.config.writable, input.operatorEnv, 'sandbox.writable path', 'throw'),
  ];
  const hidden = [
    input.dataDir,
    // Every configuration's state under the state home (`<state>/the-loop/<repo>-<digest>`), not
    // only this one's: another config's registry, log and secrets are no business of this engine.
    join(stateHome(input.operatorEnv), 'the-loop'),
    runtime,
    ...(input.configPath ? [input.configPath] : []),
    ...homes.flatMap((h) => credentialPaths(h)),
    ...SYSTEM_HIDDEN_PATHS,
    ...runtimeHiddenPaths(input.operatorEnv, process.getuid?.() ?? 0),
    ...expandAll(input.config.hide, input.operatorEnv, 'sandbox.hide path', 'throw'),
    // Not one that holds this workspace (a repository inside another one's tree).
    ...(input.otherRepos ?? []).filter((p) => !`${input.workspace}/`.startsWith(`${p}/`)),
  ];
  const resolver = resolverConfigDir();
  const resolved = resolveSandboxSpec({
    writable,
    readOnly: [
      ...git.readOnly,
      input.stateDir,
      input.packageRoot,
      ...(input.binaryRoot ? [input.binaryRoot] : []),
      // /run is hidden; where /etc/resolv.conf points into it (systemd-resolved), DNS needs it.
      ...(resolver ? [resolver] : []),
      ...(input.socketPath ? [dirname(input.socketPath)] : []),
    ],
    writableFiles: input.hookFiles,
    pinned: git.writable,
    // The socket's directory, not the socket: one made anew by a restarted gateway is seen inside.
    sockets: [],
    hidden: hidden.filter((h) => !writable.includes(h)),
    // Shown in place of hidden files: in the data dir, which no engine can write.
    emptyFile: join(input.dataDir, 'sandbox-empty'),
    chdir: input.workspace,
    newSession: false,
  });
  return {
    // bwrap's --new-session guards a terminal against injected input (TIOCSTI) but takes the
    // controlling terminal away: only for engines on pipes.
    argv: ({ terminal }) => bwrapArgv({ ...resolved.spec, newSession: !terminal }),
    skipped: resolved.skipped.map((s) => s.path),
  };
}
