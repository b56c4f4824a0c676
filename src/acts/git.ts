import {
  cloneState,
  compact,
  type Handler,
  has,
  isProtected,
  parseOptions,
  plainFlag,
  type Run,
  refKind,
  value,
} from './context.js';
import { type Arg, literalArg } from './expand.js';
import { push } from './git-push.js';
import { within } from './paths.js';
import type { ActDetail } from './types.js';

/**
 * git: pushes (with refspecs, force and deletes), merges, hard resets, branch deletion, inline aliases
 * (`git -c alias.p=push p`), the commands git runs for you (`submodule foreach`, `rebase --exec`,
 * `bisect run`), and everything else split into "known local or read-only" (no act) and "unknown"
 * (an alias we cannot see: `unknown-git-act`).
 */

/**
 * Subcommands that only read, or only change the local repository and working tree. Committing,
 * checking out and rebasing are not consequential acts: nothing leaves the machine until a push.
 * Matched on the spelling as written (a look-alike `gіt ѕtatus` is an alias we cannot see).
 */
const LOCAL = new Set(
  (
    'add am annotate apply archive bisect blame branch bugreport bundle cat-file check-attr check-ignore ' +
    'check-mailmap check-ref-format checkout checkout-index cherry cherry-pick citool clean clone column ' +
    'commit commit-graph commit-tree config count-objects credential describe diff diff-files diff-index ' +
    'diff-tree difftool fetch fetch-pack filter-branch fmt-merge-msg for-each-ref for-each-repo format-patch ' +
    'fsck gc get-tar-commit-id grep gui hash-object help hook index-pack init instaweb interpret-trailers ' +
    'log ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge-base merge-file merge-index ' +
    'merge-tree mergetool mktag mktree multi-pack-index mv name-rev notes pack-objects pack-redundant ' +
    'pack-refs patch-id prune prune-packed pull range-diff read-tree rebase reflog remote repack replace ' +
    'request-pull rerere restore rev-list rev-parse revert rm scalar shortlog show show-branch show-index ' +
    'show-ref sparse-checkout stage stash status stripspace submodule switch symbolic-ref tag unpack-file ' +
    'unpack-objects update-index update-server-info var verify-commit verify-pack verify-tag version ' +
    'whatchanged worktree write-tree lfs subtree'
  ).split(' '),
);

/** git's own options before the subcommand that take a separate value. */
const GLOBAL_VALUED = new Set([
  '-C',
  '-c',
  '--git-dir',
  '--work-tree',
  '--namespace',
  '--super-prefix',
  '--config-env',
  '--attr-source',
  '--list-cmds',
]);

const MERGE_VALUED = new Set([
  '-m',
  '-F',
  '-s',
  '-X',
  '--message',
  '--file',
  '--strategy',
  '--strategy-option',
  '--into-name',
  '--cleanup',
]);
const BRANCH_VALUED = new Set([
  '-u',
  '--set-upstream-to',
  '--points-at',
  '--format',
  '--sort',
  '--contains',
  '--no-contains',
  '--merged',
  '--no-merged',
]);

/** Subcommands with a handler here that are not in LOCAL. */
const HANDLED = new Set(['push', 'merge', 'reset', 'update-ref']);

const MAX_ALIAS_DEPTH = 4;

export const classifyGit: Handler = (run) => git(run, new Map(), 0);

/** Git's global options before the subcommand: where it starts, and what they said. */
interface GlobalOptions {
  /** Index of the subcommand in `run.args`. */
  at: number;
  /** Another repository (`git -C dir`, `--git-dir`, a cwd outside the workspace): its branch is unknown. */
  foreign: boolean;
  /** Aliases defined through the environment (`--config-env`): unknowable here. */
  hidden: Set<string>;
}

/** Reads the global options (aliases from `-c` into `aliases`); undefined for help and version. */
function globalOptions(run: Run, aliases: Map<string, string>): GlobalOptions | undefined {
  const args = run.args;
  const hidden = new Set<string>();
  let foreign = run.state.cwd === undefined || !within(run.state.cwd, run.settings.workspace);
  let i = 0;
  while (i < args.length) {
    const arg = args[i] as Arg;
    const t = arg.f;
    if (arg.dynamic || !t.startsWith('-')) break;
    if (
      t === '--help' ||
      t === '-h' ||
      t === '--version' ||
      t === '--exec-path' ||
      t.startsWith('--list-cmds')
    ) {
      return undefined;
    }
    const eq = t.indexOf('=');
    const name = eq > 0 ? t.slice(0, eq) : t;
    const val = eq > 0 ? arg.text.slice(arg.text.indexOf('=') + 1) : (args[i + 1]?.text ?? '');
    if (name === '-C' || name === '--git-dir' || name === '--work-tree') foreign = true;
    if (name === '-c') {
      const alias = /^alias\.([^=]+)=([\s\S]*)$/i.exec(val);
      if (alias) aliases.set((alias[1] as string).toLowerCase(), alias[2] as string);
    } else if (name === '--config-env') {
      const alias = /^alias\.([^=]+)=/i.exec(val);
      if (alias) hidden.add((alias[1] as string).toLowerCase());
    }
    i += GLOBAL_VALUED.has(name) && eq < 0 ? 2 : 1;
  }
  return { at: i, foreign, hidden };
}

function git(run: Run, aliases: Map<string, string>, aliasDepth: number): void {
  const options = globalOptions(run, aliases);
  if (!options) return;
  const sub = run.args[options.at];
  const rest = run.args.slice(options.at + 1);
  if (!sub) return;
  if (sub.dynamic) {
    run.emit('unknown-git-act', { subcommand: sub.text, reason: 'subcommand from an expansion' });
    return;
  }
  const name = sub.f;
  const key = name.toLowerCase();
  const alias = aliases.get(key);
  if (alias !== undefined && aliasDepth < MAX_ALIAS_DEPTH) {
    expandAlias(run, alias, rest, aliases, key, aliasDepth);
    return;
  }
  if (options.hidden.has(key)) {
    run.emit('unknown-git-act', { subcommand: sub.text, reason: 'alias read from the environment' });
    return;
  }
  // `git push --help` opens the manual.
  if (rest.some((a) => a.text === '--help' || a.text === '-h')) return;
  const before = run.count();
  const scoped = run.with(
    rest,
    undefined,
    options.foreign ? { ...cloneState(run.state), repo: { branch: undefined } } : undefined,
  );
  subcommand(name, sub, rest, scoped);
  if (run.count() > before) return;
  // Spelled as git spells it: a known subcommand that did nothing consequential here (a listing, a
  // dry run, `merge --abort`, `reset --soft`). Anything else may be an alias: recorded, never ignored.
  if (LOCAL.has(sub.text) || HANDLED.has(sub.text)) return;
  run.emit('unknown-git-act', {
    subcommand: sub.text,
    reason:
      LOCAL.has(name) || HANDLED.has(name) ? 'look-alike of a git subcommand' : 'not a known git subcommand',
  });
}

/** The subcommand's own handler, on its arguments. */
function subcommand(name: string, sub: Arg, rest: Arg[], scoped: Run): void {
  switch (name) {
    case 'push':
      push(scoped);
      break;
    case 'merge':
      merge(scoped);
      break;
    case 'reset':
      reset(scoped);
      break;
    case 'branch':
      branch(scoped);
      break;
    case 'update-ref':
      updateRef(scoped);
      break;
    case 'checkout':
    case 'switch':
      if (sub.text === name) track(scoped);
      break;
    case 'lfs':
      if (rest[0]?.f === 'push') {
        scoped.emit('git-push', { via: 'git lfs push', ...compact({ remote: rest[1]?.text }), branches: [] });
      }
      break;
    case 'subtree':
      subtree(scoped);
      break;
    case 'submodule':
      foreach(scoped);
      break;
    case 'rebase': {
      const options = parseOptions(
        rest,
        new Set(['-x', '--exec', '--onto', '-s', '--strategy', '-X', '--strategy-option']),
      );
      for (const command of options.values.get('-x') ?? []) scoped.script(command, 'wrapper');
      for (const command of options.values.get('--exec') ?? []) scoped.script(command, 'wrapper');
      break;
    }
    case 'bisect':
      if (rest[0]?.f === 'run') scoped.argv(rest.slice(1), 'wrapper');
      break;
    default:
      break;
  }
}

function expandAlias(
  run: Run,
  alias: string,
  rest: Arg[],
  aliases: Map<string, string>,
  key: string,
  depth: number,
): void {
  if (alias.startsWith('!')) {
    const tail = rest.map((a) => a.text).join(' ');
    run.script(`${alias.slice(1)} ${tail}`, 'git-alias');
    return;
  }
  const inner = new Map(aliases);
  inner.delete(key); // git refuses recursive aliases
  const words = alias.trim().split(/\s+/).filter(Boolean).map(literalArg);
  git(run.with([...words, ...rest], 'git-alias'), inner, depth + 1);
}

/** Protection of the branch a merge or reset changes: the tracked current branch. */
function intoCurrent(run: Run): ActDetail {
  const into = run.state.repo.branch;
  if (into === undefined) return { protectedUnknown: true };
  return { into, protected: isProtected(into, run.settings.protectedBranches) };
}

function merge(run: Run): void {
  const o = parseOptions(run.args, MERGE_VALUED);
  if (plainFlag(o, '--abort', '--quit')) return;
  run.emit(
    'git-merge',
    compact({
      sources: o.positionals.map((a) => a.text),
      ...intoCurrent(run),
      squash: has(o, '--squash') || undefined,
    }),
  );
}

function reset(run: Run): void {
  const o = parseOptions(run.args, new Set());
  if (!has(o, '--hard')) return;
  run.emit('git-reset-hard', compact({ sources: o.positionals.map((a) => a.text), ...intoCurrent(run) }));
}

function branch(run: Run): void {
  const o = parseOptions(run.args, BRANCH_VALUED);
  if (!has(o, '-d', '-D', '--delete')) return;
  const remoteTracking = has(o, '-r', '--remotes');
  const names = o.positionals.map((a) => a.text);
  if (names.length === 0) return;
  // A remote-tracking name `origin/main` names the remote's `main`.
  const plainNames = remoteTracking ? names.map((n) => n.slice(n.indexOf('/') + 1)) : names;
  const guarded = plainNames.some((n) => isProtected(n, run.settings.protectedBranches));
  const unknown = o.positionals.some((a) => a.dynamic);
  run.emit(
    'git-delete-branch',
    compact({
      branches: names,
      local: !remoteTracking,
      remoteTracking: remoteTracking || undefined,
      force: has(o, '-D', '--force', '-f') || undefined,
      protected: guarded || (unknown ? undefined : false),
      protectedUnknown: !guarded && unknown ? true : undefined,
    }),
  );
}

function updateRef(run: Run): void {
  const o = parseOptions(run.args, new Set(['-m']));
  if (!has(o, '-d', '--delete')) {
    if (o.positionals.length > 0 && !has(o, '--stdin')) {
      const ref = refKind(o.positionals[0]?.text ?? '');
      run.emit('unknown-git-act', { subcommand: 'update-ref', refs: [ref.name], reason: 'moves a ref' });
    }
    return;
  }
  const ref = refKind(o.positionals[0]?.text ?? '');
  run.emit('git-delete-branch', {
    branches: ref.type === 'branch' ? [ref.name] : [],
    local: true,
    protected: ref.type === 'branch' && isProtected(ref.name, run.settings.protectedBranches),
  });
}

/** `git checkout X`, `git switch -c X`: later pushes and merges on the line act on X. */
function track(run: Run): void {
  const o = parseOptions(run.args, new Set(['-b', '-B', '-c', '-C', '--orphan', '--conflict']));
  const created = value(o, '-b', '-B', '-c', '-C', '--orphan', '--create', '--force-create');
  if (created !== undefined) {
    run.state.repo.branch = created;
    return;
  }
  if (has(o, '--detach')) {
    run.state.repo.branch = undefined;
    return;
  }
  if (run.args.some((a) => a.text === '--')) return; // paths follow: no branch change
  if (o.positionals.length !== 1) return;
  const target = o.positionals[0] as Arg;
  run.state.repo.branch = target.dynamic || target.text === '-' ? undefined : target.text;
}

function subtree(run: Run): void {
  const o = parseOptions(run.args, new Set(['-P', '--prefix', '-m', '--message', '-b', '--branch']));
  if (o.positionals[0]?.f !== 'push') return;
  const dest = o.positionals[2]?.text;
  const branches = dest === undefined ? [] : [refKind(dest).name];
  run.emit('git-push', {
    via: 'git subtree push',
    ...compact({ remote: o.positionals[1]?.text }),
    branches,
    protected: branches.some((b) => isProtected(b, run.settings.protectedBranches)),
  });
}

function foreach(run: Run): void {
  const k = run.args.findIndex((a) => a.f === 'foreach');
  if (k < 0) return;
  const command = run.args
    .slice(k + 1)
    .filter((a) => a.f !== '--recursive' && a.f !== '-q' && a.f !== '--quiet');
  if (command.length > 0) run.script(command.map((a) => a.text).join(' '), 'wrapper');
}
