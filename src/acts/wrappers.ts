import { alias, awk, cd, declare, interpreter, trap, unset } from './builtins.js';
import { cloneState, type Handler, parseOptions, type Run } from './context.js';
import { type Arg, literalArg } from './expand.js';
import { resolvePath } from './paths.js';
import { evalCommand, shell } from './shells.js';
import { fold } from './unicode.js';

/**
 * Commands that run other commands: shells (`sh -c`, stdin scripts), `eval`, process wrappers (env,
 * sudo, nohup, timeout, xargs, …), remote shells (ssh), deferred commands (alias, trap, watch), and
 * interpreters with inline code. Plus the builtins that change what later commands mean: cd, pushd,
 * popd, export and plain assignments.
 */

interface WrapperSpec {
  /** Options that take a separate value. */
  valued?: string[];
  /** Operands before the command (`timeout DURATION`, `flock FILE`, `chroot DIR`). */
  operands?: number;
  /** `NAME=value` words before the command are environment settings (env, sudo). */
  assignments?: boolean;
  /** Options whose value is a shell command (`su -c`, `flock -c`, `script -c`). */
  scripts?: string[];
  /** Options that mean no command runs (`command -v`, `sudo -l`). */
  noRun?: string[];
  /** Options whose value is the command's working directory (`env -C`, `sudo -D`). */
  chdir?: string[];
  /** Options whose value is split into the command (`env -S '…'`). */
  split?: string[];
  /** Operands are not a command (su's user, script's file). */
  noArgv?: boolean;
}

function wrapper(spec: WrapperSpec): Handler {
  const valued = new Set(spec.valued ?? []);
  const has = (list: string[] | undefined, name: string) => list?.includes(name) ?? false;
  return (run) => {
    const args = run.args;
    let operands = spec.operands ?? 0;
    let cwd = run.state.cwd;
    let chdir = false;
    let i = 0;
    while (i < args.length) {
      const arg = args[i] as Arg;
      const t = arg.f;
      if (spec.assignments && !arg.dynamic && /^[A-Za-z_][A-Za-z0-9_]*=/.test(arg.text)) {
        i++;
        continue;
      }
      if (!arg.dynamic && t === '--') {
        i++;
        break;
      }
      if (arg.dynamic || !t.startsWith('-') || t.length < 2) {
        if (operands > 0) {
          operands--;
          i++;
          continue;
        }
        break;
      }
      let name = t;
      let val: string | undefined;
      let consumed = 1;
      if (t.startsWith('--')) {
        const eq = t.indexOf('=');
        if (eq > 0) {
          name = t.slice(0, eq);
          val = arg.text.slice(arg.text.indexOf('=') + 1);
        } else if (valued.has(t)) {
          val = args[i + 1]?.text;
          consumed = 2;
        }
      } else {
        for (let k = 1; k < t.length; k++) {
          const short = `-${t[k]}`;
          if (has(spec.noRun, short)) return;
          if (valued.has(short)) {
            name = short;
            const attached = t.slice(k + 1);
            if (attached !== '') val = attached;
            else {
              val = args[i + 1]?.text;
              consumed = 2;
            }
            break;
          }
        }
      }
      if (has(spec.noRun, name)) return;
      if (val !== undefined && has(spec.scripts, name)) run.script(val, 'sh-c');
      if (val !== undefined && has(spec.chdir, name)) {
        cwd = resolvePath(val, cwd, run.settings.home, run.settings.workspace).path;
        chdir = true;
      }
      if (val !== undefined && has(spec.split, name)) {
        run.script([val, ...args.slice(i + consumed).map((a) => a.text)].join(' '), 'wrapper');
        return;
      }
      i += consumed;
    }
    if (spec.noArgv) return;
    const command = args.slice(i);
    if (command.length === 0) return;
    run.argv(command, 'wrapper', chdir ? { ...cloneState(run.state), cwd } : undefined);
  };
}

const watch: Handler = (run) => {
  const o = parseOptions(run.args, new Set(['-n', '--interval', '-q', '--equexit']), true);
  const command = run.args.slice(o.rest);
  if (command.length === 0) return;
  if (o.values.has('-x') || o.values.has('--exec')) run.argv(command, 'wrapper');
  else run.script(command.map((a) => a.text).join(' '), 'wrapper');
};

const XARGS_VALUED = [
  '-I',
  '-L',
  '-n',
  '-P',
  '-s',
  '-d',
  '-E',
  '-a',
  '--arg-file',
  '--delimiter',
  '--max-args',
  '--max-procs',
  '--max-chars',
  '--max-lines',
  '--replace',
  '--eof',
  '--process-slot-var',
];

/** xargs: the command gets arguments from stdin (paths under an upstream `find`, else unknown). */
const xargs: Handler = (run) => {
  const o = parseOptions(run.args, new Set(XARGS_VALUED), true);
  const command = run.args.slice(o.rest);
  if (command.length === 0) return;
  const fromStdin: Arg[] = run.stdin?.findRoots
    ? run.stdin.findRoots.map((root) => ({ ...literalArg(`${root.replace(/\/$/, '')}/*`), glob: true }))
    : [{ ...literalArg('<stdin>'), dynamic: true }];
  const placeholder =
    o.values.get('-I')?.[0] ?? o.values.get('--replace')?.[0] ?? (o.values.has('-i') ? '{}' : undefined);
  if (placeholder) {
    const stand = fromStdin[0] as Arg;
    const replaced = command.map((a) =>
      a.text.includes(placeholder) ? substitute(a, a.text.replaceAll(placeholder, stand.text), stand) : a,
    );
    run.argv(replaced, 'wrapper');
    return;
  }
  run.argv([...command, ...fromStdin], 'wrapper');
};

/** An argument with a placeholder (`{}`) replaced by what stands for it. */
export function substitute(arg: Arg, text: string, stand: Pick<Arg, 'glob' | 'dynamic'>): Arg {
  return { ...arg, text, f: fold(text), glob: stand.glob || arg.glob, dynamic: stand.dynamic || arg.dynamic };
}

const SSH_VALUED = '-b -c -D -E -e -F -I -i -J -L -l -m -O -o -p -Q -R -S -W -w -B'.split(' ');

/** ssh host 'command': runs on another machine. Its paths are never in the workspace. */
const ssh: Handler = (run) => {
  const o = parseOptions(run.args, new Set(SSH_VALUED), true);
  const command = run.args.slice(o.rest + 1);
  if (command.length === 0) return;
  run.script(command.map((a) => a.text).join(' '), 'ssh', {
    ...cloneState(run.state),
    remote: true,
    cwd: undefined,
  });
};

const SHELLS = ['sh', 'bash', 'zsh', 'dash', 'ksh', 'mksh', 'ash', 'fish', 'yash', 'posh', 'busybox'];

export const WRAPPER_HANDLERS: Record<string, Handler> = {
  ...Object.fromEntries(
    SHELLS.map((s) => [s, s === 'busybox' ? (run: Run) => shell(run.with(run.args.slice(1))) : shell]),
  ),
  eval: evalCommand,
  alias,
  trap,
  watch,
  xargs,
  ssh,
  cd,
  pushd: cd,
  popd: cd,
  export: declare,
  declare,
  typeset: declare,
  local: declare,
  readonly: declare,
  unset,
  env: wrapper({
    valued: ['-u', '--unset', '-C', '--chdir', '-S', '--split-string'],
    assignments: true,
    chdir: ['-C', '--chdir'],
    split: ['-S', '--split-string'],
  }),
  sudo: wrapper({
    valued: [
      '-u',
      '-g',
      '-h',
      '-p',
      '-C',
      '-D',
      '-r',
      '-t',
      '-T',
      '-U',
      '--user',
      '--group',
      '--host',
      '--prompt',
      '--close-from',
      '--chdir',
      '--role',
      '--type',
      '--command-timeout',
      '--other-user',
    ],
    assignments: true,
    chdir: ['-D', '--chdir'],
    noRun: [
      '-l',
      '--list',
      '-v',
      '--validate',
      '-K',
      '--remove-timestamp',
      '-e',
      '--edit',
      '-V',
      '--version',
    ],
  }),
  doas: wrapper({ valued: ['-u', '-C'], noRun: ['-C'] }),
  su: wrapper({
    valued: ['-c', '--command', '-s', '--shell', '-g', '--group', '-G', '--supp-group', '-w'],
    scripts: ['-c', '--command'],
    operands: 1,
    noArgv: true,
  }),
  runuser: wrapper({
    valued: ['-c', '--command', '-s', '--shell', '-g', '--group', '-G', '-u', '--user', '-w'],
    scripts: ['-c', '--command'],
    operands: 1,
    noArgv: true,
  }),
  script: wrapper({
    valued: [
      '-c',
      '--command',
      '-t',
      '--timing',
      '-T',
      '-I',
      '-O',
      '-B',
      '-E',
      '--echo',
      '-m',
      '--logging-format',
    ],
    scripts: ['-c', '--command'],
    noArgv: true,
  }),
  flock: wrapper({
    valued: ['-c', '--command', '-w', '--wait', '--timeout', '-E', '--conflict-exit-code'],
    scripts: ['-c', '--command'],
    operands: 1,
  }),
  nohup: wrapper({}),
  setsid: wrapper({}),
  chronic: wrapper({}),
  unbuffer: wrapper({}),
  torsocks: wrapper({}),
  proxychains: wrapper({ valued: ['-f'] }),
  proxychains4: wrapper({ valued: ['-f'] }),
  caffeinate: wrapper({ valued: ['-t', '-w'] }),
  time: wrapper({ valued: ['-f', '--format', '-o', '--output'] }),
  nice: wrapper({ valued: ['-n', '--adjustment'] }),
  ionice: wrapper({ valued: ['-c', '--class', '-n', '--classdata', '-p', '--pid', '-P', '-u'] }),
  timeout: wrapper({ valued: ['-s', '--signal', '-k', '--kill-after'], operands: 1 }),
  stdbuf: wrapper({ valued: ['-i', '-o', '-e', '--input', '--output', '--error'] }),
  strace: wrapper({ valued: ['-o', '-e', '-p', '-s', '-u', '-E', '-O', '-a', '-b', '-I', '-P', '-X'] }),
  ltrace: wrapper({ valued: ['-o', '-e', '-p', '-s', '-u', '-n', '-a'] }),
  taskset: wrapper({ operands: 1 }),
  chrt: wrapper({ operands: 1 }),
  chroot: wrapper({ valued: ['--userspec', '--groups'], operands: 1 }),
  command: wrapper({ noRun: ['-v', '-V'] }),
  builtin: wrapper({}),
  exec: wrapper({ valued: ['-a'] }),
  noglob: wrapper({}),
  nocorrect: wrapper({}),
  'xvfb-run': wrapper({
    valued: [
      '-n',
      '--server-num',
      '-f',
      '--auth-file',
      '-e',
      '--error-file',
      '-p',
      '--xauth-protocol',
      '-s',
      '--server-args',
      '-w',
      '--wait',
    ],
  }),
  'dbus-run-session': wrapper({ valued: ['--config-file', '--dbus-daemon'] }),
  'cross-env': wrapper({ assignments: true }),
  dotenv: wrapper({ valued: ['-e', '-c', '-v'] }),
  python: interpreter('python'),
  python3: interpreter('python'),
  python2: interpreter('python'),
  pypy: interpreter('python'),
  pypy3: interpreter('python'),
  py: interpreter('python'),
  node: interpreter('node'),
  nodejs: interpreter('node'),
  perl: interpreter('perl'),
  ruby: interpreter('ruby'),
  php: interpreter('php'),
  deno: interpreter('deno'),
  awk,
  gawk: awk,
  mawk: awk,
  nawk: awk,
};

/** `python3.12` → python, `pip3.11` stays unknown: versioned interpreter names. */
export function interpreterName(name: string): string | undefined {
  const m = /^(python|pypy|ruby|perl|php|node)\d+(\.\d+)*$/.exec(name);
  return m ? (m[1] as string) : undefined;
}
