import { type Handler, parseOptions, type Run } from './context.js';
import { type Arg, literalArg } from './expand.js';
import { resolvePath } from './paths.js';

/**
 * Builtins that change what later commands mean (cd, pushd, popd, export, unset), builtins that
 * store commands to run later (alias, trap), and interpreters with inline code (python -c, node -e,
 * perl -e, awk 'BEGIN{system(…)}'), whose language we do not parse.
 */

export const alias: Handler = (run) => {
  for (const arg of run.args) {
    const eq = arg.text.indexOf('=');
    if (eq > 0) run.script(arg.text.slice(eq + 1), 'alias');
  }
};

export const trap: Handler = (run) => {
  const o = parseOptions(run.args, new Set());
  if (o.values.has('-p') || o.values.has('-l')) return;
  const action = o.positionals[0];
  if (!action || action.text === '' || action.text === '-' || /^\d+$/.test(action.text)) return;
  run.script(action.text, 'trap');
};

/** cd/pushd/popd: later relative paths resolve against the new directory. */
export const cd: Handler = (run) => {
  const state = run.state;
  if (run.name === 'popd') {
    state.cwd = state.dirs.pop();
    return;
  }
  const o = parseOptions(run.args, new Set());
  const target = o.positionals[0];
  const previous = state.cwd;
  let next: string | undefined;
  if (!target) next = run.settings.home;
  else if (target.text === '-') next = state.previousCwd;
  else next = resolvePath(target.text, state.cwd, run.settings.home, run.settings.workspace).path;
  if (
    target?.dynamic &&
    !/^\$\(\s*git\s+rev-parse\s+--show-toplevel\s*\)|^(\$HOME|\$\{HOME\})/.test(target.text)
  ) {
    next = undefined;
  }
  if (run.name === 'pushd') state.dirs.push(previous);
  state.previousCwd = previous;
  state.cwd = next;
};

/** export/declare/local/readonly NAME=value: later `$NAME` is known. */
export const declare: Handler = (run) => {
  for (const arg of run.args) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(arg.text);
    if (!m) continue;
    const name = m[1] as string;
    if (arg.dynamic) run.state.vars.delete(name);
    else run.state.vars.set(name, arg.text.slice(name.length + 1));
  }
};

export const unset: Handler = (run) => {
  for (const arg of run.args) run.state.vars.delete(arg.text);
};

/** Inline code that names a consequential command: we cannot read the language, so it is recorded. */
const MENTION =
  /\b(?:git|gh|hub)\b[^\n]{0,80}?\b(?:push|merge|reset|release|api)\b|\b(?:npm|pnpm|yarn|cargo|twine|poetry|gem|docker)\b[^\n]{0,40}?\b(?:publish|upload|push)\b|\brm\b[^\n]{0,12}?-[a-zA-Z]*[rR]/;

function inline(run: Run, code: string | undefined, via: string): void {
  if (code === undefined || !MENTION.test(code)) return;
  run.emit('dynamic-command', { reason: 'inline code names a consequential command', via }, 'interpreter');
}

/** Options of each interpreter that take inline code, and the ones that take a module to run. */
const INTERPRETERS: Record<string, { code: string[]; valued: string[]; module?: string }> = {
  python: { code: ['-c'], valued: ['-W', '-X', '-Q'], module: '-m' },
  node: {
    code: ['-e', '--eval', '-p', '--print'],
    valued: ['-r', '--require', '--import', '--loader', '--env-file'],
  },
  perl: { code: ['-e', '-E'], valued: ['-I', '-M', '-m'] },
  ruby: { code: ['-e'], valued: ['-I', '-r', '-C'] },
  php: { code: ['-r'], valued: ['-c', '-d', '-f'] },
  deno: { code: [], valued: [] },
};

export function interpreter(kind: keyof typeof INTERPRETERS): Handler {
  const spec = INTERPRETERS[kind] as (typeof INTERPRETERS)[string];
  return (run) => {
    const args = run.args;
    if (kind === 'deno') {
      if (args[0]?.f === 'eval') inline(run, args[1]?.text, 'deno eval');
      return;
    }
    for (let i = 0; i < args.length; i++) {
      const arg = args[i] as Arg;
      const t = arg.f;
      if (arg.dynamic || !t.startsWith('-') || t === '-' || t === '--') return;
      if (spec.module !== undefined && (t === spec.module || (t.startsWith(spec.module) && t.length > 2))) {
        const module = t === spec.module ? args[i + 1] : literalArg(t.slice(2));
        const after = args.slice(t === spec.module ? i + 2 : i + 1);
        if (module) run.argv([module, ...after], 'wrapper');
        return;
      }
      // `-c code`, `-ne code` (perl), `--eval=code`
      const eq = t.indexOf('=');
      if (eq > 0 && spec.code.includes(t.slice(0, eq))) {
        inline(run, arg.text.slice(arg.text.indexOf('=') + 1), `${run.name} ${t.slice(0, eq)}`);
        return;
      }
      const short = !t.startsWith('--')
        ? spec.code.find((c) => c.length === 2 && t.endsWith(c[1] as string))
        : undefined;
      if (spec.code.includes(t) || short) {
        inline(run, args[i + 1]?.text, `${run.name} ${short ?? t}`);
        return;
      }
      if (spec.valued.includes(t)) i++;
    }
  };
}

export const awk: Handler = (run) => {
  const o = parseOptions(run.args, new Set(['-F', '-v', '-f', '--field-separator', '--assign', '--file']));
  if (o.values.has('-f') || o.values.has('--file')) return;
  const program = o.positionals[0]?.text;
  if (program !== undefined && /\bsystem\s*\(|\|\s*"|"\s*\|/.test(program)) inline(run, program, run.name);
};
