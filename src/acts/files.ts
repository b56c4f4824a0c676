import { compact, type Handler, parseOptions, type Run, type Settings } from './context.js';
import { type Arg, literalArg } from './expand.js';
import { inGitDir, locateTarget, resolvePath, within } from './paths.js';
import type { ActDetail, ActKind } from './types.js';
import { fold } from './unicode.js';

/**
 * Files: recursive deletes that reach outside the workspace (`rm -r`, `find -delete`), and writes
 * into a `.git` directory (hooks, config) by redirects, cp/mv/install/ln/tee/touch/chmod/dd, or a
 * patch. Writes outside the workspace by shell commands are not acts here (agents write logs to
 * /tmp all the time); by file tools they are (`classifyWritePath`).
 */

/** rm with -r/-R/--recursive (force or not): targets outside the workspace, or the workspace itself. */
export const classifyRm: Handler = (run) => {
  let recursive = false;
  let force = false;
  let noPreserveRoot = false;
  let end = false;
  const targets: Arg[] = [];
  for (const arg of run.args) {
    const t = arg.f;
    if (!end && !arg.dynamic && t === '--') end = true;
    else if (!end && !arg.dynamic && t.startsWith('--')) {
      if (t === '--recursive') recursive = true;
      else if (t === '--force') force = true;
      else if (t === '--no-preserve-root') noPreserveRoot = true;
    } else if (!end && !arg.dynamic && t.startsWith('-') && t.length > 1) {
      for (const ch of t.slice(1)) {
        if (ch === 'r' || ch === 'R') recursive = true;
        else if (ch === 'f') force = true;
      }
    } else targets.push(arg);
  }
  if (!recursive) return;
  deleteTargets(
    run,
    targets,
    compact({ force: force || undefined, noPreserveRoot: noPreserveRoot || undefined }),
  );
};

/** Reports the targets of a recursive delete that are not strictly inside the workspace. */
export function deleteTargets(run: Run, targets: Arg[], extra: ActDetail): void {
  const outside = targets
    .map((arg) => ({ arg, where: locateTarget(arg, run.state, run.settings.workspace, run.settings.home) }))
    .filter(({ where }) => !where.inside);
  if (outside.length === 0) return;
  run.emit(
    'rm-rf-outside-workspace',
    compact({
      targets: outside.map(({ arg, where }) => where.resolved ?? arg.text),
      recursive: true,
      ...extra,
      reason: outside[0]?.where.reason,
      cwd: run.state.cwd,
    }),
  );
}

/** The `.git` paths among `paths` (resolved against the cwd): each is a git-internals-write. */
export function gitWrites(run: Run, paths: Arg[], via: string): void {
  for (const arg of paths) {
    if (arg.dynamic) continue;
    const { path } = resolvePath(arg.text, run.state.cwd, run.settings.home, run.settings.workspace);
    const shown = path ?? arg.text;
    if (!inGitDir(shown)) continue;
    run.emit('git-internals-write', {
      path: shown,
      insideWorkspace: within(shown, run.settings.workspace),
      via,
    });
  }
}

const COPY_VALUED = new Set([
  '-t',
  '--target-directory',
  '-S',
  '--suffix',
  '-m',
  '--mode',
  '-o',
  '--owner',
  '-g',
  '--group',
]);

/** cp/mv/install/ln: the destination (last operand, or -t DIR). */
export const classifyCopy: Handler = (run) => {
  const o = parseOptions(run.args, COPY_VALUED);
  const target = o.values.get('-t') ?? o.values.get('--target-directory');
  if (target) gitWrites(run, target.map(literalArg), run.name);
  else if (o.positionals.length >= 2) gitWrites(run, o.positionals.slice(-1), run.name);
};

/** tee/touch/truncate: every file operand; chmod: the operands after the mode. */
export const classifyFileOperands: Handler = (run) => {
  const o = parseOptions(run.args, new Set(['-d', '-r', '-t', '-s', '--reference', '--size', '--date']));
  const operands =
    run.name === 'chmod' && !o.values.has('--reference') ? o.positionals.slice(1) : o.positionals;
  gitWrites(run, operands, run.name);
};

export const classifyDd: Handler = (run) => {
  const out = run.args.filter((a) => a.text.startsWith('of='));
  gitWrites(
    run,
    out.map((a) => ({ ...a, text: a.text.slice(3), f: a.f.slice(3) })),
    'dd',
  );
};

/** Redirect operators that write to their target. */
const WRITE_REDIRECTS = new Set(['>', '>>', '>|', '&>', '&>>', '<>', '>&']);

export function redirectWrites(run: Run, redirects: { op: string; target: Arg | undefined }[]): void {
  const targets = redirects
    .filter((r) => WRITE_REDIRECTS.has(r.op) && r.target !== undefined)
    .map((r) => r.target as Arg)
    .filter((t) => !/^(-|\d+)$/.test(t.text));
  gitWrites(run, targets, 'redirect');
}

const PATCH_PATH = /^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+)$/gm;

/** Codex `apply_patch`: the files its patch adds, updates, deletes or moves to. */
export const classifyApplyPatch: Handler = (run) => {
  const text = run.args[0] && !run.args[0].dynamic ? run.args[0].text : run.stdin?.text;
  if (text === undefined) return;
  for (const path of patchPaths(text)) {
    const act = classifyWritePath(path, run.state.cwd, run.settings);
    if (act) run.emit(act.kind, { ...act.detail, via: 'apply_patch' });
  }
};

export function patchPaths(patch: string): string[] {
  return [...patch.matchAll(PATCH_PATH)].map((m) => (m[1] as string).trim());
}

/**
 * A file write by a tool: `git-internals-write` when the path is in a `.git` directory,
 * `write-outside-workspace` when it is outside the workspace, else no act.
 */
export function classifyWritePath(
  path: string,
  cwd: string | undefined,
  settings: Settings,
): { kind: ActKind; detail: ActDetail } | undefined {
  const resolved = resolvePath(path, cwd ?? settings.workspace, settings.home, settings.workspace);
  if (resolved.path === undefined) {
    return {
      kind: 'write-outside-workspace',
      detail: { path, insideWorkspace: false, reason: resolved.reason },
    };
  }
  const inside = within(resolved.path, settings.workspace);
  if (inGitDir(resolved.path)) {
    return { kind: 'git-internals-write', detail: { path: resolved.path, insideWorkspace: inside } };
  }
  if (!inside)
    return { kind: 'write-outside-workspace', detail: { path: resolved.path, insideWorkspace: false } };
  return undefined;
}

/** Starting points of a `find` (the operands before the first expression). */
export function findRoots(args: Arg[]): Arg[] {
  const roots: Arg[] = [];
  for (const arg of args) {
    if (arg.text.startsWith('-') || arg.text === '(' || arg.text === '!' || arg.text === ',') break;
    roots.push(arg);
  }
  return roots;
}

/** `find … -exec cmd {} \;` runs cmd; `find ROOT … -delete` deletes under ROOT. */
export const classifyFind: Handler = (run) => {
  const args = run.args.filter((a, k) => !(k === 0 && /^-[HLP]$/.test(a.text)));
  const roots = findRoots(args);
  const rootTexts = roots.length > 0 ? roots.map((r) => r.text) : ['.'];
  for (let k = roots.length; k < args.length; k++) {
    const t = args[k]?.f;
    if (t === '-delete') {
      const targets = rootTexts.map((r) => ({
        ...literalArg(`${r.replace(/\/$/, '')}/*`),
        dynamic: roots.some((x) => x.dynamic),
        glob: true,
      }));
      deleteTargets(run, targets, { via: 'find -delete' });
    } else if (t === '-exec' || t === '-execdir' || t === '-ok' || t === '-okdir') {
      let end = k + 1;
      while (end < args.length && args[end]?.text !== ';' && args[end]?.text !== '+') end++;
      const root = rootTexts[0] as string;
      const stand = { glob: true, dynamic: roots.some((x) => x.dynamic) };
      const under = `${root.replace(/\/$/, '')}/*`;
      const command = args.slice(k + 1, end).map((a) =>
        a.text.includes('{}')
          ? {
              ...a,
              text: a.text.replaceAll('{}', under),
              f: fold(a.text.replaceAll('{}', under)),
              ...orFlags(a, stand),
            }
          : a,
      );
      run.argv(command, 'wrapper');
      k = end;
    }
  }
};

function orFlags(arg: Arg, stand: { glob: boolean; dynamic: boolean }): { glob: boolean; dynamic: boolean } {
  return { glob: stand.glob || arg.glob, dynamic: stand.dynamic || arg.dynamic };
}
