import { compact, type Handler, has, isProtected, parseOptions, type Run, value } from './context.js';
import { apiCall } from './github-api.js';

/**
 * GitHub: `gh` commands (pr merge, release create, repo delete/sync, workflow run, api), and REST or
 * GraphQL calls made with `gh api` or `curl`. gh commands that are not gh's own are aliases or
 * extensions (`unknown-gh-act`); gh's own commands that are not listed here (issue, pr view, pr create,
 * run list, …) are not consequential acts.
 */

/** gh's top-level commands. Anything else on a `gh` command line is an alias or an extension. */
const GH_COMMANDS = new Set(
  (
    'accessibility agent-task alias api attestation auth browse cache co codespace completion config copilot ' +
    'extension ext extensions gist gpg-key help issue label org pr preview project release repo ruleset run ' +
    'search secret skill ssh-key status variable version workflow'
  ).split(' '),
);

const HANDLED = new Set(['pr', 'release', 'repo', 'workflow', 'api', 'extension', 'ext', 'extensions']);

const API_VALUED = new Set([
  '-X',
  '--method',
  '-f',
  '--raw-field',
  '-F',
  '--field',
  '-H',
  '--header',
  '--input',
  '-q',
  '--jq',
  '-t',
  '--template',
  '--hostname',
  '-p',
  '--preview',
  '--cache',
]);

export const classifyGh: Handler = (run) => {
  const [sub, verbArg, ...tail] = run.args;
  if (!sub) return;
  if (sub.dynamic) {
    run.emit('unknown-gh-act', { subcommand: sub.text, reason: 'command from an expansion' });
    return;
  }
  if (sub.f.startsWith('-')) return; // --version, --help
  if (run.args.some((a) => a.text === '--help' || a.text === '-h')) return;
  const name = sub.f;
  const verb = verbArg?.f;
  const before = run.count();
  const scoped = run.with(tail);
  switch (name) {
    case 'pr':
      if (verb === 'merge') prMerge(scoped);
      else if (verb === 'close') prClose(scoped);
      break;
    case 'release':
      if (verb === 'create') releaseCreate(scoped);
      else if (verb === 'edit') releaseEdit(scoped);
      break;
    case 'repo':
      if (verb === 'delete') repoDelete(scoped);
      else if (verb === 'sync') repoSync(scoped);
      break;
    case 'workflow':
      if (verb === 'run') workflowRun(scoped);
      break;
    case 'api':
      ghApi(run.with(run.args.slice(1)));
      break;
    case 'extension':
    case 'ext':
    case 'extensions':
      if (verb === 'exec') {
        run.emit('unknown-gh-act', {
          subcommand: `extension exec ${tail[0]?.text ?? ''}`.trim(),
          reason: 'extension',
        });
      }
      break;
    default:
      break;
  }
  if (run.count() > before) return;
  if (
    GH_COMMANDS.has(sub.text) &&
    (verbArg === undefined || verbArg.text === verbArg.f || !HANDLED.has(name))
  ) {
    return;
  }
  run.emit('unknown-gh-act', {
    subcommand: [sub.text, verbArg?.text].filter(Boolean).join(' '),
    reason: GH_COMMANDS.has(name) ? 'look-alike of a gh command' : 'alias or extension',
  });
};

function prMerge(run: Run): void {
  const o = parseOptions(
    run.args,
    new Set([
      '-b',
      '--body',
      '-F',
      '--body-file',
      '-t',
      '--subject',
      '-A',
      '--author-email',
      '--match-head-commit',
      '-R',
      '--repo',
    ]),
  );
  if (has(o, '--disable-auto')) return;
  const method = has(o, '--squash', '-s')
    ? 'squash'
    : has(o, '--rebase', '-r')
      ? 'rebase'
      : has(o, '--merge', '-m')
        ? 'merge'
        : undefined;
  run.emit(
    'pr-merge',
    compact({
      pr: o.positionals[0]?.text,
      repo: value(o, '-R', '--repo'),
      mergeMethod: method,
      admin: has(o, '--admin') || undefined,
      auto: has(o, '--auto') || undefined,
      deleteBranch: has(o, '-d', '--delete-branch') || undefined,
      // The base branch of a pull request is not on the command line.
      protectedUnknown: true,
    }),
  );
}

function prClose(run: Run): void {
  const o = parseOptions(run.args, new Set(['-c', '--comment', '-R', '--repo']));
  if (!has(o, '-d', '--delete-branch')) return;
  run.emit(
    'git-delete-branch',
    compact({ via: 'gh pr close', pr: o.positionals[0]?.text, repo: value(o, '-R', '--repo'), branches: [] }),
  );
}

const RELEASE_VALUED = new Set([
  '-n',
  '--notes',
  '-F',
  '--notes-file',
  '-t',
  '--title',
  '--target',
  '--discussion-category',
  '--notes-start-tag',
  '-R',
  '--repo',
  '--tag',
]);

function releaseCreate(run: Run): void {
  const o = parseOptions(run.args, RELEASE_VALUED);
  run.emit(
    'release-create',
    compact({
      tag: o.positionals[0]?.text,
      repo: value(o, '-R', '--repo'),
      draft: has(o, '-d', '--draft') || undefined,
      prerelease: has(o, '-p', '--prerelease') || undefined,
      branches: value(o, '--target') === undefined ? undefined : [value(o, '--target') as string],
    }),
  );
}

/** `gh release edit v1 --draft=false` publishes a draft. */
function releaseEdit(run: Run): void {
  const o = parseOptions(run.args, RELEASE_VALUED);
  if (!(o.values.get('--draft') ?? []).includes('false')) return;
  run.emit(
    'release-create',
    compact({ via: 'gh release edit', tag: o.positionals[0]?.text, repo: value(o, '-R', '--repo') }),
  );
}

function repoDelete(run: Run): void {
  const o = parseOptions(run.args, new Set());
  run.emit('repo-delete', compact({ repo: o.positionals[0]?.text }));
}

function repoSync(run: Run): void {
  const o = parseOptions(run.args, new Set(['-b', '--branch', '-s', '--source']));
  const target = value(o, '-b', '--branch');
  const branches = target === undefined ? [] : [target];
  const force = has(o, '--force');
  run.emit(
    force ? 'git-force-push' : 'git-push',
    compact({
      via: 'gh repo sync',
      repo: o.positionals[0]?.text,
      branches,
      force: force || undefined,
      protected: target === undefined ? undefined : isProtected(target, run.settings.protectedBranches),
      protectedUnknown: target === undefined ? true : undefined,
    }),
  );
}

function workflowRun(run: Run): void {
  const o = parseOptions(
    run.args,
    new Set(['-r', '--ref', '-f', '--raw-field', '-F', '--field', '-R', '--repo']),
  );
  const ref = value(o, '-r', '--ref');
  run.emit(
    'workflow-dispatch',
    compact({
      workflow: o.positionals[0]?.text,
      repo: value(o, '-R', '--repo'),
      branches: ref === undefined ? undefined : [ref],
    }),
  );
}

/** `gh api [flags] <endpoint>`: GET unless fields or --input are given (then POST), or -X says otherwise. */
function ghApi(run: Run): void {
  const o = parseOptions(run.args, API_VALUED);
  const endpoint = o.positionals[0];
  if (!endpoint) return;
  const fields = new Map<string, string>();
  for (const name of ['-f', '-F', '--field', '--raw-field']) {
    for (const pair of o.values.get(name) ?? []) {
      const eq = pair.indexOf('=');
      if (eq > 0) fields.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
  }
  const explicit = value(o, '-X', '--method');
  const method = (explicit ?? (fields.size > 0 || has(o, '--input') ? 'POST' : 'GET')).toUpperCase();
  apiCall(run, { method, endpoint, fields, body: undefined, via: 'gh api' });
}
