import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { LoopError } from '../core/errors.js';
import { canonicalPath } from '../os/canonical-path.js';
import { sha256Hex } from '../os/sha256.js';

/**
 * Where state lives when nothing says where. The data dir holds the registry, the log, keys, the
 * payer salt and the sessions' worktrees: it must never sit in a git work tree, where one
 * `git add -A && git push` by an agent publishes it. So:
 *
 * - an explicit `--data-dir`, THE_LOOP_DATA_DIR or config `dataDir` is used as given;
 * - a registry already beside the config (the default before 0.2) keeps being used, so an existing
 *   install does not lose its sessions (with a warning when it is inside a work tree);
 * - a config outside any work tree keeps its state beside it;
 * - a config inside a work tree keeps its state in `$XDG_STATE_HOME/the-loop/<name>-<digest>`
 *   (`~/.local/state/…`), one per config directory.
 */
export type DataDirSource = 'explicit' | 'existing' | 'beside-config' | 'state-home';

/** The facts the choice depends on, gathered by `resolveDataDir`. */
export interface DataDirFacts {
  /** The explicit data dir, resolved; undefined when none was given. */
  explicit: string | undefined;
  configDir: string;
  /** The git work tree holding the config dir, or null. */
  configDirWorkTree: string | null;
  /** A registry exists beside the config (an install made with the old default). */
  registryBesideConfig: boolean;
  /** This config's directory under the state home. */
  stateDir: string;
  registryInStateDir: boolean;
}

export interface DataDirChoice {
  dataDir: string;
  source: DataDirSource;
}

/** The name of the registry file in a data dir. */
export const REGISTRY_FILE = 'the-loop.db';

/** Pure: the data dir the facts call for. */
export function chooseDataDir(facts: DataDirFacts): DataDirChoice {
  if (facts.explicit) return { dataDir: facts.explicit, source: 'explicit' };
  if (facts.registryBesideConfig) return { dataDir: facts.configDir, source: 'existing' };
  // Once state lives in the state home it stays there, even if the repository goes away.
  if (facts.registryInStateDir || facts.configDirWorkTree) {
    return { dataDir: facts.stateDir, source: 'state-home' };
  }
  return { dataDir: facts.configDir, source: 'beside-config' };
}

/** `$XDG_STATE_HOME` when absolute (the spec says to ignore a relative one), else `~/.local/state`. */
export function stateHome(env: Readonly<Record<string, string | undefined>>): string {
  const xdg = env.XDG_STATE_HOME;
  if (xdg && isAbsolute(xdg)) return xdg;
  const home = env.HOME && isAbsolute(env.HOME) ? env.HOME : homedir();
  return join(home, '.local', 'state');
}

/**
 * Pure: `<stateHome>/the-loop/<name>-<digest>` for a config directory: readable (the repository's
 * name) and one per config directory (the digest of its canonical path). Kept short: Unix socket
 * paths live under it.
 */
export function stateDirFor(home: string, configDir: string, workTree: string | null): string {
  const name =
    basename(workTree ?? dirname(configDir))
      .replace(/[^A-Za-z0-9._-]+/g, '-')
      .slice(0, 24)
      .replace(/^[.-]+|-+$/g, '') || 'config';
  const digest = sha256Hex(configDir).slice(0, 8);
  return join(home, 'the-loop', `${name}-${digest}`);
}

/**
 * The root of the git work tree `path` is in (a `.git` directory or file in it or an ancestor), or
 * null. A path inside a `.git` directory is in no work tree (git never adds those files).
 */
export function findWorkTree(path: string): string | null {
  let dir = canonicalPath(path);
  for (;;) {
    if (basename(dir) === '.git') return null;
    if (existsSync(join(dir, '.git'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

export interface ResolvedDataDir extends DataDirChoice {
  /** The git work tree the data dir is in, or null. */
  workTree: string | null;
  /** Said on stderr by every command that opens it. */
  warnings: string[];
  /** In the state home: the config directory it belongs to, kept in it (`origin`) to be found after a move. */
  origin: string | null;
}

/** Gather the facts from the file system and the environment, and choose. */
export function resolveDataDir(input: {
  explicit: string | undefined;
  configDir: string;
  env: Readonly<Record<string, string | undefined>>;
}): ResolvedDataDir {
  const configDir = resolve(input.configDir);
  const configDirWorkTree = input.explicit ? null : findWorkTree(configDir);
  // Named only when it can matter (an explicit data dir outside a work tree never needs it).
  let named: string | undefined;
  const stateDirOf = () =>
    (named ??= stateDirFor(stateHome(input.env), canonicalPath(configDir), configDirWorkTree));
  const choice = input.explicit
    ? chooseDataDir({
        explicit: input.explicit,
        configDir,
        configDirWorkTree,
        registryBesideConfig: false,
        stateDir: '',
        registryInStateDir: false,
      })
    : chooseDataDir({
        explicit: undefined,
        configDir,
        configDirWorkTree,
        registryBesideConfig: existsSync(join(configDir, REGISTRY_FILE)),
        stateDir: stateDirOf(),
        registryInStateDir: existsSync(join(stateDirOf(), REGISTRY_FILE)),
      });
  const { dataDir } = choice;
  const workTree = findWorkTree(dataDir);
  const warnings = workTree === null ? [] : [inWorkTreeWarning(dataDir, workTree, choice, stateDirOf())];
  const fresh = choice.source === 'state-home' && !existsSync(join(stateDirOf(), REGISTRY_FILE));
  if (fresh) warnings.push(...movedStateWarnings(stateDirOf()));
  const origin = choice.source === 'state-home' ? canonicalPath(configDir) : null;
  return { ...choice, dataDir, workTree, warnings, origin };
}

/** In a data dir under the state home: the config directory it belongs to. */
export const ORIGIN_FILE = 'origin';

/**
 * A state dir is named after its config directory's path: a checkout moved (or renamed) would start
 * an empty registry and leave its sessions behind, silently. Before a new one is made, the state of
 * a same-named checkout whose directory is gone is pointed out.
 */
function movedStateWarnings(stateDir: string): string[] {
  const root = dirname(stateDir);
  const prefix = basename(stateDir).replace(/[0-9a-f]{8}$/, '');
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  const warnings: string[] = [];
  for (const name of names) {
    const dir = join(root, name);
    if (dir === stateDir || !name.startsWith(prefix) || !/^[0-9a-f]{8}$/.test(name.slice(prefix.length)))
      continue;
    if (!existsSync(join(dir, REGISTRY_FILE))) continue;
    let origin: string;
    try {
      origin = readFileSync(join(dir, ORIGIN_FILE), 'utf8').trim();
    } catch {
      continue;
    }
    if (!origin || existsSync(origin)) continue;
    warnings.push(
      `the state of a configuration that was at ${origin} (no longer there) is in ${dir}: if this checkout moved from there, point dataDir (or --data-dir) at ${dir} to keep its sessions; otherwise this one starts an empty registry in ${stateDir}`,
    );
  }
  return warnings;
}

/**
 * Said by every command while the data dir is in a git work tree. Warned, not refused: only an
 * install that already keeps its state there (or was told to) gets here — refusing would stop it
 * cold; new installs keep state in the state home.
 */
function inWorkTreeWarning(
  dataDir: string,
  workTree: string,
  choice: DataDirChoice,
  stateDir: string,
): string {
  const where =
    canonicalPath(dataDir) === workTree
      ? `the data dir ${dataDir} is the root of the git work tree ${workTree}, where the-loop cannot write a .gitignore for it: check that \`git status\` lists none of its files`
      : `the data dir ${dataDir} is inside the git work tree ${workTree}`;
  return (
    `${where}. It holds the registry, the log and keys, and an agent's \`git add -A && git push\` there could publish whatever is not ignored. ` +
    `Stop the daemon, move it out of the repository and point dataDir (or --data-dir) at the new place${choice.source === 'existing' ? ` (new installs keep state in ${stateDir})` : ''}.`
  );
}

export const GITIGNORE_ALL = '*\n';

/**
 * A `.gitignore` of `*` in `dir` when `dir` is inside a git work tree (but not its root, where it
 * would hide the whole repository): nothing in it is ever added by `git add -A`. An existing
 * `.gitignore` is left as it is. Returns the file written, or null.
 */
export function ignoreInWorkTree(dir: string, workTree: string | null = findWorkTree(dir)): string | null {
  if (workTree === null || canonicalPath(dir) === workTree) return null;
  const path = join(dir, '.gitignore');
  try {
    writeFileSync(path, GITIGNORE_ALL, { flag: 'wx', mode: 0o644 });
    return path;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return null;
    throw new LoopError('internal', `cannot write ${path}`, { cause: error });
  }
}

/** Create the data dir (0700) and, inside a work tree, its `.gitignore`, before anything is written in it. */
export function prepareDataDir(dataDir: string, workTree: string | null, origin: string | null = null): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  ignoreInWorkTree(dataDir, workTree);
  if (origin !== null) {
    try {
      writeFileSync(join(dataDir, ORIGIN_FILE), `${origin}\n`, { flag: 'wx', mode: 0o600 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}
