import type { Arg } from './expand.js';
import type { ActDetail, ActKind, Evasion } from './types.js';
import { fold } from './unicode.js';

/** What the command line has established so far, as far as a reader can tell without running it. */
export interface State {
  /** The working directory; undefined once it can no longer be known (`cd "$X"`). */
  cwd: string | undefined;
  previousCwd: string | undefined;
  dirs: (string | undefined)[];
  /**
   * The checked-out branch, tracked through `git checkout`/`git switch`. Shared by reference with
   * subshells: a checkout in `( … )` changes the repository, not just the subshell.
   */
  repo: { branch: string | undefined };
  /** Variables assigned a literal value earlier on the line (`G=git`). */
  vars: Map<string, string>;
  /** Commands that run on another machine (`ssh host '…'`): none of its paths is in the workspace. */
  remote: boolean;
}

export const cloneState = (state: State): State => ({
  ...state,
  dirs: [...state.dirs],
  vars: new Map(state.vars),
});

/** What a command reads on its standard input, when a shell could run it as a script. */
export interface Stdin {
  /** The text, when it is on the command line (a heredoc, a here-string, `echo '…' |`); else unknown. */
  text: string | undefined;
  via: 'heredoc' | 'pipe-to-shell';
  /** The program that writes into the pipe. */
  from?: string;
  /** The starting points of an upstream `find` (xargs then gets paths under them). */
  findRoots?: string[];
}

export interface Settings {
  /** Absolute, normalized workspace root. */
  workspace: string;
  protectedBranches: readonly string[];
  home: string | undefined;
}

/** One simple command being classified, with the means to report acts and to look inside it. */
export interface Run {
  /** The program, folded and lower-cased (`/usr/bin/GIT` → `git`). */
  name: string;
  /** Its arguments. */
  args: Arg[];
  state: State;
  settings: Settings;
  stdin: Stdin | undefined;
  emit(kind: ActKind, detail: ActDetail, evasion?: Evasion): void;
  /** Classifies shell text this command runs (`sh -c`, `eval`, an alias body). */
  script(text: string, evasion: Evasion | undefined, state?: State): void;
  /** Classifies a command this one runs with the given argv (`sudo …`, `xargs …`, `find -exec …`). */
  argv(args: Arg[], evasion: Evasion | undefined, state?: State): void;
  /** The same command with other arguments (a git alias expanded); acts carry `evasion` too. */
  with(args: Arg[], evasion?: Evasion, state?: State): Run;
  /** How many acts have been reported so far (to tell whether a handler found one). */
  count(): number;
}

export type Handler = (run: Run) => void;

export interface Options {
  /** Option (as folded, e.g. `--force`, `-f`) → its values ('' for a flag), in order. */
  values: Map<string, string[]>;
  /**
   * Options written in plain ASCII. Options that *suppress* an act (`--dry-run`) only count when
   * plain: a look-alike `--dry‐run` is not a dry run to git, and must not hide the act.
   */
  plain: Set<string>;
  positionals: Arg[];
  /** Index of the first argument not parsed (with `stopAtPositional`: where the wrapped command starts). */
  rest: number;
}

/**
 * getopt-style parsing: `--name=value`, `--name value` (when `valued` has it), `-abc` clusters,
 * `-Xvalue`, `--` ends options. Dynamic arguments (`"$FLAGS"`) are positionals.
 */
export function parseOptions(
  args: readonly Arg[],
  valued: ReadonlySet<string>,
  stopAtPositional = false,
): Options {
  const out: Options = { values: new Map(), plain: new Set(), positionals: [], rest: args.length };
  const add = (name: string, value: string, arg: Arg) => {
    const list = out.values.get(name);
    if (list) list.push(value);
    else out.values.set(name, [value]);
    if (arg.text === arg.f) out.plain.add(name);
  };
  let end = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as Arg;
    const t = arg.f;
    if (end || arg.dynamic || t.length < 2 || !t.startsWith('-')) {
      if (stopAtPositional) {
        out.rest = i;
        return out;
      }
      out.positionals.push(arg);
      continue;
    }
    if (t === '--') {
      end = true;
      if (stopAtPositional) {
        out.rest = i + 1;
        return out;
      }
      continue;
    }
    if (t.startsWith('--')) {
      const eq = t.indexOf('=');
      if (eq > 0) {
        const rawEq = arg.text.indexOf('=');
        add(t.slice(0, eq), rawEq >= 0 ? arg.text.slice(rawEq + 1) : t.slice(eq + 1), arg);
      } else if (valued.has(t)) {
        add(t, args[i + 1]?.text ?? '', arg);
        i++;
      } else add(t, '', arg);
      continue;
    }
    for (let k = 1; k < t.length; k++) {
      const name = `-${t[k]}`;
      if (valued.has(name)) {
        const attached = t.slice(k + 1);
        if (attached !== '') add(name, attached, arg);
        else {
          add(name, args[i + 1]?.text ?? '', arg);
          i++;
        }
        break;
      }
      add(name, '', arg);
    }
  }
  return out;
}

export const has = (options: Options, ...names: string[]) => names.some((n) => options.values.has(n));

/** The last value given to any of `names`. */
export function value(options: Options, ...names: string[]): string | undefined {
  let found: string | undefined;
  for (const name of names) {
    const list = options.values.get(name);
    if (list && list.length > 0) found = list[list.length - 1];
  }
  return found;
}

/** `--dry-run` (or another suppressor) given in plain ASCII and not set to false. */
export function plainFlag(options: Options, ...names: string[]): boolean {
  return names.some(
    (n) => options.plain.has(n) && (options.values.get(n) ?? []).some((v) => v === '' || v === 'true'),
  );
}

const patternCache = new Map<string, RegExp>();

/** `*` matches any run of characters; everything else is literal. */
export function globMatch(pattern: string, text: string): boolean {
  let re = patternCache.get(pattern);
  if (!re) {
    const source = pattern
      .split('*')
      .map((piece) => piece.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*');
    re = new RegExp(`^${source}$`, 's');
    if (patternCache.size > 256) patternCache.clear();
    patternCache.set(pattern, re);
  }
  return re.test(text);
}

/**
 * Whether a destination branch is protected. Names are compared folded, so a look-alike `mаin`
 * (Cyrillic а) counts as `main`; a destination pattern (`refs/heads/*`) counts when it covers one.
 */
export function isProtected(branch: string, patterns: readonly string[]): boolean {
  if (patterns.length === 0) return false;
  const folded = fold(branch);
  return patterns.some(
    (p) =>
      globMatch(p, branch) ||
      globMatch(p, folded) ||
      (folded.includes('*') && globMatch(folded, p.replaceAll('*', ''))),
  );
}

/** `refs/heads/x` → branch x, `refs/tags/v1` → tag v1, other `refs/…` → ref, anything else → branch. */
export function refKind(ref: string): { type: 'branch' | 'tag' | 'ref'; name: string } {
  if (ref.startsWith('refs/heads/')) return { type: 'branch', name: ref.slice('refs/heads/'.length) };
  if (ref.startsWith('refs/tags/')) return { type: 'tag', name: ref.slice('refs/tags/'.length) };
  if (ref.startsWith('refs/')) return { type: 'ref', name: ref };
  return { type: 'branch', name: ref };
}

/** Drops undefined fields so details stay small and compare cleanly. */
export function compact<T extends object>(detail: T): T {
  return Object.fromEntries(Object.entries(detail).filter(([, v]) => v !== undefined)) as T;
}
