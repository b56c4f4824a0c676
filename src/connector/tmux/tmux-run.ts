import { existsSync, readFileSync } from 'node:fs';
import type { RunRequest, RunResult, Terminal } from '../backend.js';
import { ConnectorError } from '../names.js';
import { checkChannel, checkPane, checkSession, type ExecResult, type TmuxExec, token } from './tmux-exec.js';
import { fused } from './tmux-fused.js';
import { captureLines, MAX_READ_LINES } from './tmux-io.js';

/**
 * `run` in a new pane: a detached window in the target's session whose end tmux records. No marker is
 * echoed anywhere. One tmux call does it all, in order: a window (named with a random token) whose
 * program — a fixed `sh -c` wrapper, the command one argv element of it (tmux does not expand
 * `#{}`/`#()` there) — first waits for a line on its terminal; `remain-on-exit`, a `pane-died` hook
 * that signals a channel of ours, a `pipe-pane` (with one, tmux reads all of a pane's output before
 * it calls the pane dead); then the identity check, and only when it holds, Enter in the new pane:
 * the command starts. When the check fails the window is killed before anything ran. Then a
 * second tmux child waits on the channel and collects (collectArgs). The status is
 * `#{pane_dead_status}`. The Enter's echo is the pane's first line.
 */

/**
 * The wrapper: waits for the go line, then runs the command in the pane's shell (`$SHELL`, which tmux
 * sets to the session's `default-shell`) when that is a known POSIX-like shell, else in /bin/sh.
 */
const WRAPPER = [
  'IFS= read -r _ || exit 125;',
  'case "$' + '{SHELL##*/}" in',
  'bash|zsh|sh|dash|ksh|mksh) exec "$SHELL" -c "$1" ;;',
  '*) exec /bin/sh -c "$1" ;;',
  'esac',
].join(' ');
/** The window's name and the channel its end signals: `the-loop-run-<hex>`. */
const channelOf = (hex: string): string => checkChannel(`the-loop-run-${hex}`);

export interface Outcome {
  kind: 'done' | 'timeout';
}

/** Wait for the waiter, the timeout or the abort signal, whichever comes first. */
export function race(done: Promise<void>, timeoutMs: number, signal?: AbortSignal): Promise<Outcome> {
  return new Promise((resolve) => {
    const finish = (kind: Outcome['kind']) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve({ kind });
    };
    const onAbort = () => finish('timeout');
    const timer = setTimeout(() => finish('timeout'), Math.max(0, timeoutMs));
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) finish('timeout');
    void done.then(() => finish('done'));
  });
}

/** The last `maxLines` lines of a capture, and whether more were cut. */
export function tail(lines: string[], maxLines: number): { output: string; truncated: boolean } {
  const keep = Math.max(1, Math.min(MAX_READ_LINES, Math.floor(maxLines)));
  return { output: lines.slice(-keep).join('\n'), truncated: lines.length > keep };
}

const number = (s: string | undefined): number | null => (s && /^\d{1,9}$/.test(s) ? Number(s) : null);

/** A process's state letter from /proc (`Z`: a zombie); `gone` once reaped; null where there is no /proc. */
function processState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) || null;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' && existsSync('/proc/self') ? 'gone' : null;
  }
}

/** What `run` learns of the new pane when it starts it. */
interface RunPane {
  pane: string;
  /** The pane's process, and the tmux server's (which reaps it): null when not numbers. */
  pid: number | null;
  server: number | null;
}

/**
 * Wait for the pane's end. tmux 3.3a as Debian builds it (with utempter) loses a SIGCHLD that comes
 * while it waits for its utempter helper — which it runs when a pane's pty closes, so often the very
 * pane whose process just exited: the process stays an unreaped zombie, its status unknown and
 * `pane-died` unfired, until the server reaps some other child. So while waiting, watch the pane's
 * process in /proc (no tmux call: every 2 ms, doubling to 250 ms); a zombie gets the server a
 * SIGCHLD of ours, and it reaps (a spare one costs it one `waitpid`). Without /proc, the pane is
 * asked instead (100 ms, doubling to 1 s): dead without a status gets the server a job of its own to
 * run and reap (`run-shell true`), which reaps ours too.
 */
async function waitForEnd(
  exec: TmuxExec,
  started: RunPane,
  done: Promise<void>,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<Outcome> {
  const deadline = Date.now() + timeoutMs;
  let asked = Date.now();
  let askEvery = 100;
  for (let step = 2; ; step = Math.min(step * 2, 250)) {
    const outcome = await race(done, Math.min(step, deadline - Date.now()), signal);
    if (outcome.kind === 'done') return outcome;
    if (signal?.aborted || Date.now() >= deadline) return { kind: 'timeout' };
    const state = started.pid === null ? null : processState(started.pid);
    if (state === 'Z' && started.server !== null) {
      nudge(started.server);
    } else if (state === null && Date.now() - asked >= askEvery) {
      const format = '#{pane_dead}:#{pane_dead_status}#{pane_dead_signal}';
      const r = await exec.run(['display-message', '-p', '-t', started.pane, format]);
      if (r.ok && r.stdout.trim() === '1:') await exec.run(['run-shell', 'true']);
      asked = Date.now();
      askEvery = Math.min(askEvery * 2, 1000);
    }
  }
}

/** SIGCHLD to the tmux server: it reaps what has exited. Never another signal, never another PID. */
function nudge(server: number): void {
  try {
    process.kill(server, 'SIGCHLD');
  } catch {
    // the server is gone: the waiter ends with it
  }
}

/**
 * Create the window, arm it, and start the command (only while the target is still the listed
 * terminal); returns the new pane's id and its process's. tmux ends a command at an argument ending
 * in `;`: the command gets a trailing newline, so it never does.
 */
async function startWindow(
  exec: TmuxExec,
  terminal: Terminal,
  hex: string,
  command: string,
): Promise<RunPane> {
  const session = checkSession(terminal.identity.split('@')[0] ?? '');
  const name = channelOf(hex);
  const window = `${session}:=${name}`;
  const mark = `the-loop-pane-${token()}`;
  const before = [
    ...[
      'new-window',
      '-d',
      '-P',
      '-F',
      `${mark} #{pane_id} #{pane_pid} #{pid}`,
      '-n',
      name,
      '-t',
      `${session}:`,
    ],
    ...['--', '/bin/sh', '-c', WRAPPER, 'the-loop', `${command}\n`, ';'],
    ...['set-option', '-p', '-t', window, 'remain-on-exit', 'on', ';'],
    ...['set-hook', '-p', '-t', window, 'pane-died', `wait-for -S ${name}`, ';'],
    ...['pipe-pane', '-t', window, 'cat >/dev/null', ';'],
    // tmux 3.2 has no remain-on-exit-format (-q: no error); 3.3 prints its line in the pane without it.
    ...['set-option', '-p', '-q', '-t', window, 'remain-on-exit-format', ''],
  ];
  try {
    // Single quotes: tmux's parser would expand `$3` as an environment variable.
    const out = await fused(exec, terminal, {
      before,
      act: `send-keys -t '${window}' Enter`,
      require: 'none',
    });
    const line = out.split('\n').find((l) => l.startsWith(`${mark} `)) ?? '';
    const [pane, pid, server] = line.split(' ').slice(1);
    return { pane: checkPane(pane ?? ''), pid: number(pid), server: number(server) };
  } catch (error) {
    // The check failed (or tmux did): the window, if it was made, never ran the command.
    await exec.run(['kill-window', '-t', window]);
    throw error;
  }
}

interface Collected {
  status: number | null;
  signal: number | null;
  lines: string[];
  /** The pane is still there (kept, or the call failed with the pane alive). */
  kept: boolean;
}

/**
 * The tmux commands that read the new pane's status, signal and output, remove its hook and (unless
 * kept) kill it — after a `wait-for` on its channel when given one: then one tmux child waits for the
 * pane's death and collects, started as soon as the pane exists (a channel signalled before anyone
 * waits on it stays signalled).
 */
function collectArgs(pane: string, keep: boolean, mark: string, channel?: string): string[] {
  return [
    ...(channel ? ['wait-for', channel, ';'] : []),
    ...[
      'display-message',
      '-p',
      '-t',
      pane,
      `${mark} #{pane_dead} #{pane_dead_status} #{pane_dead_signal}`,
      ';',
    ],
    ...['capture-pane', '-p', '-J', '-S', '-', '-E', '-', '-t', pane, ';'],
    ...['set-hook', '-p', '-u', '-t', pane, 'pane-died'],
    ...(keep ? [] : [';', 'kill-pane', '-t', pane]),
  ];
}

function parseCollected(r: ExecResult, mark: string, keep: boolean): Collected {
  if (!r.stdout.startsWith(mark)) return { status: null, signal: null, lines: [], kept: false };
  const newline = r.stdout.indexOf('\n');
  const [dead, status, signal] = r.stdout.slice(mark.length + 1, newline).split(' ');
  const ended = (s: string | undefined) => (dead === '1' ? number(s) : null);
  const lines = captureLines(r.stdout.slice(newline + 1));
  // The first line holds the echo of the Enter that started the command.
  if (lines[0] === '') lines.shift();
  // tmux 3.2 prints its own line when a pane dies (3.3 and later: remain-on-exit-format is emptied).
  if (/^Pane is dead \(/.test(lines[lines.length - 1] ?? '')) {
    lines.pop();
    while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  }
  return { status: ended(status), signal: ended(signal), lines, kept: keep || !r.ok };
}

/** Most bytes of a command: tmux sends its command line to the server in one message of 16 KiB. */
export const MAX_COMMAND_BYTES = 12 * 1024;

export async function runInNewPane(
  exec: TmuxExec,
  terminal: Terminal,
  request: RunRequest,
  signal?: AbortSignal,
): Promise<RunResult> {
  if (Buffer.byteLength(request.command, 'utf8') > MAX_COMMAND_BYTES) {
    throw new ConnectorError(
      'E_INVALID',
      `the command is over ${MAX_COMMAND_BYTES} bytes (tmux passes it on its command line): put it in a script and run that`,
    );
  }
  const startedAt = Date.now();
  const hex = token();
  const started = await startWindow(exec, terminal, hex, request.command);
  const { pane } = started;
  const mark = `the-loop-status-${token()}`;
  const collector = exec.start(collectArgs(pane, request.keep, mark, channelOf(hex)));
  try {
    const done = collector.result.then(() => undefined);
    const late = (await waitForEnd(exec, started, done, request.timeoutMs, signal)).kind === 'timeout';
    let got: Collected;
    if (late) collector.kill();
    const first = await collector.result;
    // It may have ended at the very moment the time ran out: then it did end.
    const ended = first.stdout.startsWith(mark);
    if (ended) got = parseCollected(first, mark, request.keep);
    else got = parseCollected(await exec.run(collectArgs(pane, false, mark)), mark, false);
    const timedOut = late && !ended;
    return {
      exitStatus: timedOut ? null : got.status,
      signal: timedOut ? null : got.signal,
      timedOut,
      ...tail(got.lines, request.maxLines),
      ranIn: pane,
      kept: got.kept,
      durationMs: Date.now() - startedAt,
    };
  } finally {
    collector.kill();
  }
}
