import {
  compact,
  has,
  isProtected,
  type Options,
  parseOptions,
  plainFlag,
  type Run,
  refKind,
  value,
} from './context.js';
import { type Arg, literalArg } from './expand.js';
import type { ActDetail } from './types.js';

/**
 * `git push`: options (force, lease, mirror, all, tags, delete, dry run, push options), remote and
 * refspecs (`+src:dst` forces, `:dst` deletes, `HEAD:main`, `refs/heads/…`, `refs/tags/…`, `tag v1`).
 * One push can be several acts: a forced update, a deletion, a tag push and a plain push.
 */

const PUSH_VALUED = new Set(['-o', '--push-option', '--repo', '--receive-pack', '--exec']);
/** A bare name that reads as a release tag (`v1.2.3`, `1.4.0`): git resolves it to the tag. */
const VERSION_TAG = /^(v\d+(\.\d+)*|\d+\.\d+(\.\d+)*)([-+][0-9A-Za-z.-]+)?$/;

interface Destination {
  type: 'branch' | 'tag' | 'ref' | 'unknown';
  name: string;
  plus: boolean;
  del: boolean;
}

/** `$(git branch --show-current)` and friends: the current branch, when it is known. */
const CURRENT_BRANCH =
  /^\$\(\s*git\s+(branch\s+--show-current|rev-parse\s+--abbrev-ref\s+HEAD|symbolic-ref\s+--short\s+HEAD)\s*\)$/;

export function push(run: Run): void {
  const args = run.args.map((a) => (a.dynamic && CURRENT_BRANCH.test(a.text) ? literalArg('HEAD') : a));
  const o = parseOptions(args, PUSH_VALUED);
  if (plainFlag(o, '--dry-run', '-n')) return;
  const force = has(o, '--force', '-f');
  const lease = has(o, '--force-with-lease') && !has(o, '--no-force-with-lease');
  const mirror = has(o, '--mirror');
  const all = has(o, '--all', '--branches') || mirror;
  const tags = has(o, '--tags');
  const del = has(o, '--delete', '-d');
  const prune = has(o, '--prune') || mirror;
  const repo = value(o, '--repo');
  const remote = repo ?? o.positionals[0]?.text;
  const refArgs = repo === undefined ? o.positionals.slice(1) : o.positionals;
  const dests = destinations(refArgs, del, run.state.repo.branch);
  // A dynamic argument may be a refspec or an option (`$FLAGS` could be --force): destinations are unsure.
  const dynamic = args.some((a) => a.dynamic);
  const common: ActDetail = compact({
    remote,
    refspecs: refArgs.length > 0 ? refArgs.map((a) => a.text) : undefined,
    setUpstream: has(o, '--set-upstream', '-u') || undefined,
    noVerify: has(o, '--no-verify') || undefined,
    followTags: has(o, '--follow-tags') || undefined,
    pushOptions: pushOptions(o),
  });
  const globalForce = force || lease || mirror;
  const forceDetail: ActDetail = compact({
    force: true,
    forceWithLease: lease || undefined,
    forceIfIncludes: has(o, '--force-if-includes') || undefined,
    mirror: mirror || undefined,
  });
  if (dests.length === 0) {
    if (del) return; // git refuses --delete without refs
    if (all || tags) {
      const scope: ActDetail = { ...(all ? { allBranches: true } : {}), ...(tags ? { allTags: true } : {}) };
      const guarded = all ? { protected: run.settings.protectedBranches.length > 0 } : {};
      if (globalForce) run.emit('git-force-push', { ...common, ...forceDetail, ...scope, ...guarded });
      else {
        if (all) run.emit('git-push', { ...common, allBranches: true, ...guarded });
        if (tags) run.emit('git-push-tags', { ...common, allTags: true });
      }
      if (prune)
        run.emit('git-delete-branch', { ...common, prune: true, branches: [], protectedUnknown: true });
      return;
    }
    // No refspec: push.default (simple/current) pushes the current branch.
    const current = run.state.repo.branch;
    dests.push(
      current === undefined
        ? { type: 'unknown', name: '', plus: false, del: false }
        : { type: 'branch', name: current, plus: false, del: false },
    );
  }
  if (prune) run.emit('git-delete-branch', { ...common, prune: true, branches: [], protectedUnknown: true });
  const deleted = dests.filter((d) => d.del);
  const pushed = dests.filter((d) => !d.del);
  const forced = globalForce ? pushed : pushed.filter((d) => d.plus);
  const plain = globalForce ? [] : pushed.filter((d) => !d.plus);
  const emit = (
    kind: 'git-push' | 'git-force-push' | 'git-push-tags' | 'git-delete-branch',
    list: Destination[],
    extra: ActDetail,
  ) => {
    if (list.length === 0) return;
    run.emit(kind, { ...common, ...summarize(list, run, dynamic), ...extra });
  };
  emit('git-delete-branch', deleted, {});
  emit('git-force-push', forced, { ...forceDetail, ...(tags ? { allTags: true } : {}) });
  emit(
    'git-push',
    plain.filter((d) => d.type !== 'tag'),
    {},
  );
  emit(
    'git-push-tags',
    plain.filter((d) => d.type === 'tag'),
    {},
  );
  if (tags && !globalForce && plain.every((d) => d.type !== 'tag'))
    run.emit('git-push-tags', { ...common, allTags: true });
}

/** What each ref argument pushes to (`tag <name>` is one destination). */
function destinations(refArgs: Arg[], del: boolean, current: string | undefined): Destination[] {
  const dests: Destination[] = [];
  for (let k = 0; k < refArgs.length; k++) {
    const ref = refArgs[k] as Arg;
    const next = refArgs[k + 1];
    if (ref.f === 'tag' && next) {
      dests.push({ type: next.dynamic ? 'unknown' : 'tag', name: next.text, plus: false, del });
      k++;
      continue;
    }
    dests.push(destination(ref, del, current));
  }
  return dests;
}

function destination(ref: Arg, del: boolean, current: string | undefined): Destination {
  const plus = ref.text.startsWith('+');
  if (ref.dynamic) return { type: 'unknown', name: ref.text, plus, del };
  const spec = plus ? ref.text.slice(1) : ref.text;
  const colon = spec.indexOf(':');
  const src = colon >= 0 ? spec.slice(0, colon) : spec;
  let dst = colon >= 0 && spec.slice(colon + 1) !== '' ? spec.slice(colon + 1) : src;
  const isDelete = del || (colon >= 0 && src === '');
  if (dst === 'HEAD' || dst === '@') {
    if (current === undefined) return { type: 'unknown', name: dst, plus, del: isDelete };
    dst = current;
  }
  if (colon < 0 && VERSION_TAG.test(dst)) return { type: 'tag', name: dst, plus, del: isDelete };
  const kind = refKind(dst);
  return { type: kind.type, name: kind.name, plus, del: isDelete };
}

function summarize(list: Destination[], run: Run, dynamic: boolean): ActDetail {
  const branches = list.filter((d) => d.type === 'branch').map((d) => d.name);
  const tags = list.filter((d) => d.type === 'tag').map((d) => d.name);
  const refs = list.filter((d) => d.type === 'ref').map((d) => d.name);
  const unknown = dynamic || list.some((d) => d.type === 'unknown');
  const guarded = branches.some((b) => isProtected(b, run.settings.protectedBranches));
  if (branches.length === 0 && !unknown)
    return compact({ tags: tags.length > 0 ? tags : undefined, refs: refs.length > 0 ? refs : undefined });
  return compact({
    branches,
    tags: tags.length > 0 ? tags : undefined,
    refs: refs.length > 0 ? refs : undefined,
    protected: guarded || (unknown ? undefined : false),
    protectedUnknown: !guarded && unknown ? true : undefined,
  });
}

function pushOptions(o: Options): string[] | undefined {
  const list = [...(o.values.get('-o') ?? []), ...(o.values.get('--push-option') ?? [])];
  return list.length > 0 ? list : undefined;
}
