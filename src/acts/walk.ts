import { handlersFor } from './commands.js';
import { cloneState, type Run, type Settings, type State, type Stdin } from './context.js';
import { type Arg, expandWord, type Lookup, literalArg } from './expand.js';
import { findRoots, redirectWrites } from './files.js';
import { redact, redactDetail } from './redact.js';
import type { Command, ParseBudget, Part, Redirect, SimpleCommand } from './shell-ast.js';
import { parseShell } from './shell-parse.js';
import { type ActDetail, type ActKind, type ClassifiedAct, type Evasion, LIMITS } from './types.js';
import { fold, programBase } from './unicode.js';

/**
 * Walks parsed command lines in order, keeping what a reader can know (cwd, branch, literal
 * variables), and hands each simple command to the handlers of its program. Substitutions are
 * classified before the command that contains them, because they run first.
 */

interface Frame {
  /** The simple command's text, for `ClassifiedAct.command`. */
  seg: string;
  state: State;
  /** Evasions of the enclosing constructs (sh -c, substitution, …). */
  ev: Evasion[];
  depth: number;
  stdin: Stdin | undefined;
}

/** Arguments that make a command with a hidden program name worth recording (`$GIT push`). */
const CONSEQUENTIAL_VERBS = new Set([
  'push',
  'merge',
  'publish',
  'upload',
  'release',
  'reset',
  'deploy',
  'unpublish',
  'yank',
]);

export class Walker {
  readonly acts: ClassifiedAct[] = [];
  private segments = 0;

  constructor(
    readonly settings: Settings,
    readonly budget: ParseBudget,
    private readonly truncated: boolean,
    /** The engine runs every command through a shell itself (Codex's `bash -lc`): that one is not an evasion. */
    private readonly engineWrapped = false,
  ) {}

  initialState(cwd: string | undefined, branch: string | undefined): State {
    return { cwd, previousCwd: undefined, dirs: [], repo: { branch }, vars: new Map(), remote: false };
  }

  script(text: string, state: State, ev: Evasion[], depth: number): void {
    const bounded = text.length > LIMITS.input ? text.slice(0, LIMITS.input) : text;
    const parsed = parseShell(bounded, depth, this.budget);
    if (!parsed) return;
    for (const pipeline of parsed.pipelines) this.pipeline(pipeline, parsed.src, state, ev, depth);
  }

  /** Classifies a command given as an argv (Codex's array commands, wrapped commands). */
  argv(args: Arg[], frame: Frame): void {
    if (args.length === 0) return;
    if (frame.depth > LIMITS.depth) {
      this.budget.hit.add('depth');
      return;
    }
    const first = args[0] as Arg;
    const ev = [...frame.ev];
    if (first.dynamic) {
      const verbs = args.slice(1).filter((a) => !a.dynamic && CONSEQUENTIAL_VERBS.has(a.f.toLowerCase()));
      if (verbs.length > 0) {
        this.emit(
          'dynamic-command',
          { reason: 'program name from an expansion', subcommand: verbs[0]?.text },
          frame.seg,
          ev,
        );
      }
      return;
    }
    // A non-breaking space inside a word reads as two words: `git push` spelled with U+00A0.
    const words = first.f.trim().split(/\s+/);
    const base = programBase(words[0] ?? '');
    const found = handlersFor(base.toLowerCase());
    if (!found) return;
    const extra = words.slice(1).map(literalArg);
    if (first.via) ev.push(first.via);
    if (first.quoted) ev.push('quoting');
    if (first.f !== first.text) ev.push('unicode');
    else if (base !== base.toLowerCase()) ev.push('case');
    const rest = [...extra, ...args.slice(1)];
    if (rest.some((a) => a.f !== a.text)) ev.push('unicode');
    for (const a of rest) if (a.via === 'brace-expansion' || a.via === 'ifs') ev.push(a.via);
    const run = this.makeRun(found.name, rest, { ...frame, ev: unique(ev) });
    for (const handler of found.handlers) handler(run);
  }

  /** Adds truncated-input acts for the limits that were hit. */
  finish(command: string): void {
    for (const reason of this.budget.hit) {
      this.acts.push({
        kind: 'truncated-input',
        command: bound(command),
        detail: {
          reason,
          limit: reason === 'depth' ? LIMITS.depth : reason === 'segments' ? LIMITS.segments : LIMITS.work,
        },
      });
    }
    // A push after a merge on the same line is how a merge reaches a remote branch.
    let merged = false;
    for (const act of this.acts) {
      if (act.kind === 'git-merge') merged = true;
      else if (merged && (act.kind === 'git-push' || act.kind === 'git-force-push'))
        act.detail.afterMerge = true;
    }
  }

  emit(kind: ActKind, detail: ActDetail, seg: string, ev: Evasion[]): void {
    const act: ClassifiedAct = {
      kind,
      command: bound(seg),
      detail: redactDetail(this.truncated ? { ...detail, truncated: true } : detail),
    };
    const evasion = unique(ev).join('+');
    if (evasion !== '') act.evasion = evasion;
    this.acts.push(act);
  }

  private pipeline(commands: Command[], src: string, state: State, ev: Evasion[], depth: number): void {
    for (let k = 0; k < commands.length; k++) {
      // Each part of a multi-command pipeline runs in a subshell: its `cd` does not leak out.
      const own = commands.length === 1 ? state : cloneState(state);
      this.command(commands[k] as Command, src, own, ev, depth, k > 0 ? commands[k - 1] : undefined);
    }
  }

  private command(
    cmd: Command,
    src: string,
    state: State,
    ev: Evasion[],
    depth: number,
    upstream?: Command,
  ): void {
    if (++this.segments > LIMITS.segments) {
      this.budget.hit.add('segments');
      return;
    }
    const seg = src.slice(cmd.start, cmd.end).trim();
    const frame: Frame = { seg, state, ev, depth, stdin: undefined };
    this.redirects(cmd.redirects, frame);
    if (cmd.type === 'group') {
      const inner = cmd.subshell || cmd.fn !== undefined ? cloneState(state) : state;
      const innerEv: Evasion[] = cmd.fn !== undefined ? [...ev, 'function'] : ev;
      for (const pipeline of cmd.body) this.pipeline(pipeline, src, inner, innerEv, depth);
      return;
    }
    const lookup = this.lookup(state);
    for (const word of [...cmd.assigns, ...cmd.words]) this.subs(word.parts, state, ev, depth);
    if (cmd.words.length === 0) {
      for (const assign of cmd.assigns)
        this.assign(assign.parts.length > 0 ? expandWord(assign, lookup) : [], state);
      return;
    }
    const args = cmd.words.flatMap((word) => expandWord(word, lookup));
    this.argv(args, { ...frame, stdin: this.stdinOf(cmd, upstream, lookup) });
  }

  private redirects(redirects: Redirect[], frame: Frame): void {
    if (redirects.length === 0) return;
    const lookup = this.lookup(frame.state);
    for (const r of redirects) {
      this.subs(r.target.parts, frame.state, frame.ev, frame.depth);
      if (r.heredoc) this.subs(r.heredoc.subs, frame.state, frame.ev, frame.depth);
    }
    const run = this.makeRun('redirect', [], frame);
    redirectWrites(
      run,
      redirects.map((r) => ({ op: r.op, target: expandWord(r.target, lookup)[0] })),
    );
  }

  private subs(parts: Part[], state: State, ev: Evasion[], depth: number): void {
    for (const part of parts) {
      if (part.type !== 'sub') continue;
      const inner = cloneState(state);
      for (const pipeline of part.script.pipelines) {
        this.pipeline(pipeline, part.script.src, inner, [...ev, 'substitution'], depth + 1);
      }
    }
  }

  private assign(args: Arg[], state: State): void {
    const arg = args[0];
    if (!arg) return;
    const eq = arg.text.indexOf('=');
    if (eq <= 0) return;
    const name = arg.text.slice(0, eq).replace(/\+$/, '');
    if (arg.dynamic) state.vars.delete(name);
    else state.vars.set(name, arg.text.slice(eq + 1));
  }

  private lookup(state: State): Lookup {
    return (name) => {
      const known = state.vars.get(name);
      if (known !== undefined) return known;
      if (name === 'HOME') return this.settings.home;
      if (name === 'PWD') return state.cwd;
      if (name === 'IFS') return ' \t\n';
      return undefined;
    };
  }

  /** What a command reads on stdin, when a shell reading it would run it as a script. */
  private stdinOf(cmd: SimpleCommand, upstream: Command | undefined, lookup: Lookup): Stdin | undefined {
    for (const r of cmd.redirects) {
      if (r.fd !== undefined && r.fd !== '0') continue;
      if (r.heredoc) return { text: r.heredoc.body, via: 'heredoc' };
      if (r.op === '<<<')
        return {
          text: expandWord(r.target, lookup)
            .map((a) => a.text)
            .join(' '),
          via: 'heredoc',
        };
      if (r.op === '<') return undefined;
    }
    if (!upstream) return undefined;
    if (upstream.type === 'group') return { text: undefined, via: 'pipe-to-shell', from: 'a subshell' };
    const args = upstream.words.flatMap((word) => expandWord(word, lookup));
    const name = programBase(fold(args[0]?.text ?? '')).toLowerCase();
    const rest = args.slice(1);
    if (name === 'echo' || name === 'printf') {
      const dynamic = rest.some((a) => a.dynamic);
      const words = name === 'echo' ? dropEchoFlags(rest) : rest;
      const text = words
        .map((a) => a.text)
        .join(' ')
        .replace(/\\n/g, '\n')
        .replace(/\\t/g, '\t');
      return dynamic
        ? { text: undefined, via: 'pipe-to-shell', from: `${name} of an expansion` }
        : { text, via: 'pipe-to-shell', from: name };
    }
    if (name === 'cat') {
      const heredoc = upstream.redirects.find((r) => r.heredoc)?.heredoc;
      if (heredoc) return { text: heredoc.body, via: 'pipe-to-shell', from: 'cat' };
    }
    // Programs that list paths under their operands (or the cwd): xargs gets paths under those.
    if (
      name === 'find' ||
      name === 'ls' ||
      (name === 'git' && /^(ls-files|diff|status)$/.test(rest[0]?.f ?? ''))
    ) {
      const operands =
        name === 'find' ? findRoots(rest) : name === 'ls' ? rest.filter((a) => !a.text.startsWith('-')) : [];
      const roots = operands.map((a) => (a.dynamic ? a.text : a.text));
      return {
        text: undefined,
        via: 'pipe-to-shell',
        from: name,
        findRoots: roots.length > 0 ? roots : ['.'],
      };
    }
    return { text: undefined, via: 'pipe-to-shell', from: name || 'another command' };
  }

  private makeRun(name: string, args: Arg[], frame: Frame): Run {
    const withEvasion = (evasion: Evasion | undefined) =>
      !evasion || (this.engineWrapped && evasion === 'sh-c' && frame.depth === 0 && frame.ev.length === 0)
        ? frame.ev
        : [...frame.ev, evasion];
    return {
      name,
      args,
      state: frame.state,
      settings: this.settings,
      stdin: frame.stdin,
      emit: (kind, detail, evasion) => this.emit(kind, detail, frame.seg, withEvasion(evasion)),
      script: (text, evasion, state) =>
        this.script(text, state ?? cloneState(frame.state), withEvasion(evasion), frame.depth + 1),
      argv: (inner, evasion, state) =>
        this.argv(inner, {
          ...frame,
          state: state ?? frame.state,
          ev: withEvasion(evasion),
          depth: frame.depth + 1,
        }),
      with: (inner, evasion, state) =>
        this.makeRun(name, inner, {
          ...frame,
          state: state ?? frame.state,
          ev: unique(withEvasion(evasion)),
        }),
      count: () => this.acts.length,
    };
  }
}

function dropEchoFlags(args: Arg[]): Arg[] {
  let k = 0;
  while (k < args.length && /^-[neE]+$/.test(args[k]?.text ?? '')) k++;
  return args.slice(k);
}

function unique<T>(list: T[]): T[] {
  return [...new Set(list)];
}

/** A command's text, with credentials masked, bounded. */
export function bound(text: string): string {
  const shown = text.length > 4 * LIMITS.commandText ? text.slice(0, 4 * LIMITS.commandText) : text;
  const masked = redact(shown);
  return masked.length > LIMITS.commandText ? `${masked.slice(0, LIMITS.commandText - 1)}…` : masked;
}
