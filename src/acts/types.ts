/**
 * The vocabulary of consequential acts. An act is something an engine did (or tried to do) that a
 * person would want to know about before it happens: a push, a merge, a branch deletion, a release,
 * a publish, a destructive delete outside the workspace. The classifier (`classify.ts`) maps a shell
 * command or a tool use to a list of acts; the policy (a later part) decides what to allow.
 */

/** Every kind of act, closed. Consumers switch on these; adding one is a deliberate change. */
export const ACT_KINDS = [
  /** `git push` of branches (no force), `gh repo sync`, a ref created or moved through the API. */
  'git-push',
  /** Any forced push: `--force`, `-f`, `--force-with-lease`, `--mirror`, a `+src:dst` refspec. */
  'git-force-push',
  /** Tags pushed: `--tags`, `refs/tags/…`, `tag v1`. */
  'git-push-tags',
  /** A branch deleted: `git push --delete`, `:dst`, `--prune`, `git branch -d/-D`, the API, `gh pr close -d`. */
  'git-delete-branch',
  /** `git merge` (into the current branch). */
  'git-merge',
  /** `gh pr merge`. */
  'pr-merge',
  /** A merge through the GitHub API (`gh api`, `curl`): REST `pulls/N/merge`, `merges`, GraphQL `mergePullRequest`. */
  'gh-api-merge',
  /** `gh release create`, a draft release published, a release created through the API, `goreleaser`. */
  'release-create',
  /** npm/pnpm/yarn/bun/cargo/twine/poetry/gem/docker/… publish (never with `--dry-run`). */
  'package-publish',
  /** `git reset --hard`. */
  'git-reset-hard',
  /** A recursive `rm` (or `find -delete`) whose target is outside the workspace, or the workspace itself. */
  'rm-rf-outside-workspace',
  /** A file tool (Write, Edit, …) writing outside the workspace. */
  'write-outside-workspace',
  /** A write into a `.git` directory (config, hooks): by a file tool, a redirect, cp/mv/tee/chmod. */
  'git-internals-write',
  /** `gh repo delete`, `DELETE /repos/o/r`. */
  'repo-delete',
  /** Branch protection or rulesets changed through the API. */
  'protection-change',
  /** `gh workflow run`, `POST …/actions/workflows/W/dispatches`. */
  'workflow-dispatch',
  /** A git subcommand that is not known to be local or read-only (an alias such as `git pushf`). */
  'unknown-git-act',
  /** A gh command we cannot see into (an alias or an extension). */
  'unknown-gh-act',
  /** A command whose program is not visible (`$CMD push`, `eval "$X"`, `curl … | sh`, inline scripts). */
  'dynamic-command',
  /** The input could not be read as a command (not a string, missing field, classifier failure). */
  'unreadable-input',
  /** The input was only partly classified (length, nesting depth, segment or work budget exceeded). */
  'truncated-input',
] as const;

export type ActKind = (typeof ACT_KINDS)[number];

/**
 * How an act was found when it was not written plainly. `ClassifiedAct.evasion` joins the ones that
 * apply, outermost first, with `+` (e.g. `sh-c+unicode`). It says how the act was found, not that
 * anyone meant harm: `sudo git push` is found through a `wrapper`.
 */
export const EVASIONS = [
  'sh-c', // sh/bash/zsh -c '…', su -c, script -c, flock -c, npx -c
  'eval', // eval '…'
  'substitution', // $(…), `…`, <(…)
  'unicode', // a word changed by NFKC, zero-width stripping or look-alike mapping
  'case', // GIT instead of git (case-insensitive file systems run it)
  'quoting', // g"i"t, \git, 'git', $'\x67it'
  'wrapper', // env, sudo, xargs, nohup, timeout, find -exec, watch, npx, python -m, …
  'variable', // G=git; $G push
  'ifs', // git${IFS}push
  'brace-expansion', // {git,push}
  'alias', // alias p='git push'
  'function', // f() { git push; }
  'trap', // trap 'git push' EXIT
  'heredoc', // bash <<EOF … EOF, bash <<< '…'
  'pipe-to-shell', // echo 'git push' | sh
  'git-alias', // git -c alias.p=push p
  'ssh', // ssh host 'git push'
  'interpreter', // python -c / node -e code that mentions a consequential command
] as const;

export type Evasion = (typeof EVASIONS)[number];

/**
 * Structured facts about an act. Every field is optional; each kind fills the ones that apply. Values
 * are plain JSON (strings, booleans, string arrays) so acts can be stored and shown as they are.
 */
export interface ActDetail {
  // ── git push and friends
  /** The remote (name or URL) as written; absent when the default remote is used. */
  remote?: string;
  /** Destination branch names (refs/heads/ stripped), as written. */
  branches?: string[];
  /** Tag names pushed or deleted. */
  tags?: string[];
  /** Other destination refs (refs/notes/…, refs/for/…). */
  refs?: string[];
  /** The refspecs as written. */
  refspecs?: string[];
  force?: boolean;
  forceWithLease?: boolean;
  forceIfIncludes?: boolean;
  mirror?: boolean;
  /** `--all` / `--branches` / `--mirror`: every local branch. */
  allBranches?: boolean;
  /** `--tags` (or `--mirror`): every local tag. */
  allTags?: boolean;
  prune?: boolean;
  followTags?: boolean;
  setUpstream?: boolean;
  noVerify?: boolean;
  pushOptions?: string[];
  /** A push that follows a `git merge` in the same command line. */
  afterMerge?: boolean;
  /** Some destination (or the merge target, or the reset branch) is a protected branch. */
  protected?: boolean;
  /** The destination could not be known (no refspec and no current branch, a refspec from a variable). */
  protectedUnknown?: boolean;
  /** The branch merged into / reset (the current branch, as tracked through the command line). */
  into?: string;
  /** What was merged (`git merge X Y`), or the reset target. */
  sources?: string[];
  squash?: boolean;
  /** `git branch -d/-D` (local branches) and `-r` (remote-tracking ones). */
  local?: boolean;
  remoteTracking?: boolean;
  // ── gh and the GitHub API
  subcommand?: string;
  repo?: string;
  pr?: string;
  /** Merge method: merge, squash, rebase. */
  mergeMethod?: string;
  admin?: boolean;
  auto?: boolean;
  deleteBranch?: boolean;
  /** HTTP method and endpoint of an API call. */
  httpMethod?: string;
  endpoint?: string;
  /** The GraphQL mutation that made it an act. */
  mutation?: string;
  tag?: string;
  draft?: boolean;
  prerelease?: boolean;
  workflow?: string;
  /** Which command or path produced the act when it is not the obvious one (`gh api`, `curl`, `gh pr close`, `git-receive-pack`, `REST`, `GraphQL`). */
  via?: string;
  // ── seen on the wire (the gateway)
  /** The full ref name a ref update named (`refs/heads/main`). */
  ref?: string;
  /** A ref update's old and new object ids (all zeros: created / deleted). */
  oldOid?: string;
  newOid?: string;
  /** The upstream's HTTP status, or its report for the ref (`ok`, `ng <reason>`). */
  upstream?: string;
  // ── publish
  /** npm, pnpm, yarn, bun, cargo, twine, poetry, gem, docker, … */
  manager?: string;
  /** publish (default), unpublish, yank, dist-tag, push. */
  action?: string;
  packages?: string[];
  registry?: string;
  // ── files
  /** rm targets / written path, resolved against the cwd when possible. */
  targets?: string[];
  path?: string;
  insideWorkspace?: boolean;
  recursive?: boolean;
  noPreserveRoot?: boolean;
  /** The working directory the command ran in, as tracked through `cd`, when it matters. */
  cwd?: string;
  // ── everything else
  /** Why the act has this kind (e.g. `dynamic command name`, `not a string`, `length`). */
  reason?: string;
  /** JavaScript type of an unreadable input: null, number, object, array, undefined, … */
  inputType?: string;
  /** Limits that were hit (truncated-input): the input length and the cap. */
  length?: number;
  limit?: number;
  /** The input was cut before classification; the act was found in the classified prefix. */
  truncated?: boolean;
}

export interface ClassifiedAct {
  kind: ActKind;
  /** The simple command (or tool use) the act was found in, as written, bounded to COMMAND_TEXT_LIMIT. */
  command: string;
  detail: ActDetail;
  /** How it was found when not written plainly: EVASIONS joined with `+`, outermost first. */
  evasion?: string;
}

export interface ClassifyContext {
  /** The directory the command runs in. Defaults to `workspace`. */
  cwd?: string;
  /** The root of the workspace (the checkout or worktree the session owns). Defaults to `cwd`. */
  workspace?: string;
  /** Branch names (a `*` matches any run of characters) that merges and pushes must not reach. */
  protectedBranches?: readonly string[];
  /** The branch checked out in `cwd`, when known. */
  currentBranch?: string;
  /** The home directory, to resolve `~` and `$HOME`. Unknown: paths under it count as outside. */
  home?: string;
}

/** Bounds that keep classification cheap whatever the input. */
export const LIMITS = {
  /** Characters of a command line that are classified; the rest is cut and reported (64 KiB). */
  input: 64 * 1024,
  /** Nesting of $(…), subshells, groups, sh -c, eval, wrappers and aliases. */
  depth: 8,
  /** Simple commands looked at, across all nesting. */
  segments: 2000,
  /** Characters parsed in total, across all nesting (sh -c of eval of …). */
  work: 1024 * 1024,
  /** Characters of `ClassifiedAct.command`. */
  commandText: 512,
} as const;
