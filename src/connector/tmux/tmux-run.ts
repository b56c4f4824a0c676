import { existsSync, readFileSync } from 'node:fs';
import type { RunRequest, RunResult, Terminal } from '../backend.js';
import { ConnectorError } from '../names.js';
import { checkChannel, checkPane, checkSession, type ExecResult, type TmuxExec, token } from './tmux-exec.js';
import { fused } from './tmux-fused.js';
import { captureLines, MAX_READ_LINES } from './tmux-io.js';
import type { RunFiles } from './tmux-scratch.js';

/**
 * `run` in a new pane: a detached window in the target's session whose end tmux records. No marker is
 * echoed anywhere. The command is written to a private file (tmux-scratch.ts); one tmux call then
 * checks the target's identity and only when it holds, in that branch: a window (named with a random
 * token) running the fixed wrapper, which first waits for a line on its terminal; `remain-on-exit`,
 * a `pane-died` hook that signals a channel of ours, a `pipe-pane` (with one, tmux reads all of a
 * pane's output before it calls the pane dead); then Enter in the new pane: the command starts. The
 * branch holds only validated ids, names and paths. Then a second tmux child waits on the channel
 * and collects (collectArgs). The status is `#{pane_dead_status}`. The Enter's echo is the pane's
 * first line.
 */

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
 * Create the window, arm it, and start the command — all only while the target is still the listed
 * terminal; returns the new pane's id, its process's and the tmux server's.
 */
async function startWindow(
  exec: TmuxExec,
  terminal: Terminal,
  hex: string,
  paths: { wrapper: string; file: string },
): Promise<RunPane> {
  const session = checkSession(terminal.identity.split('@')[0] ?? '');
  const name = channelOf(hex);
  // Single quotes: tmux's parser would expand `$3` as an environment variable.
  const window = `'${session}:=${name}'`;
  const mark = `the-loop-pane-${token()}`;
  const act = [
    `new-window -d -P -F '${mark} #{pane_id} #{pane_pid} #{pid}' -n ${name} -t '${session}:' /bin/sh ${paths.wrapper} ${paths.file}`,
    `set-option -p -t ${window} remain-on-exit on`,
    `set-hook -p -t ${window} pane-died 'wait-for -S ${name}'`,
    `pipe-pane -t ${window} 'cat >/dev/null'`,
    // tmux 3.2 has no remain-on-exit-format (-q: no error); 3.3 prints its line in the pane without it.
    `set-option -p -q -t ${window} remain-on-exit-format ''`,
    `send-keys -t ${window} Enter`,
  ].join(' ; ');
  const out = await fused(exec, terminal, { act, require: 'none' });
  const line = out.split('\n').find((l) => l.startsWith(`${mark} `)) ?? '';
  const [pane, pid, server] = line.split(' ').slice(1);
  return { pane: checkPane(pane ?? ''), pid: number(pid), server: number(server) };
}

interface Collected {
  status: number | null;
  signal: number | null;
  lines: string[];
  /** The pane's history was full: its first lines are gone. */
  clipped: boolean;
  /** The pane is still there (kept, or the call failed with the pane alive). */
  kept: boolean;
}

/** The pane's end, and how full its history is (older output may be gone). */
const STATE = '#{pane_dead} #{pane_dead_status} #{pane_dead_signal} #{history_size} #{history_limit}';

/**
 * The tmux commands that read the new pane's status, signal and output, remove its hook and (unless
 * kept) kill it — after a `wait-for` on its channel when given one: then one tmux child waits for the
 * pane's death and collects, started as soon as the pane exists (a channel signalled before anyone
 * waits on it stays signalled).
 */
function collectArgs(pane: string, keep: boolean, mark: string, channel?: string): string[] {
  return [
    ...(channel ? ['wait-for', channel, ';'] : []),
    ...['display-message', '-p', '-t', pane, `${mark} ${STATE}`, ';'],
    ...['capture-pane', '-p', '-J', '-S', '-', '-E', '-', '-t', pane, ';'],
    ...['set-hook', '-p', '-u', '-t', pane, 'pane-died'],
    // A kept pane keeps its pipe's `cat` until it is closed (tmux 3.3a closes no pipe of a dead pane).
    ...(keep ? [] : [';', 'kill-pane', '-t', pane]),
  ];
}

function parseCollected(r: ExecResult, mark: string, keep: boolean): Collected {
  if (!r.stdout.startsWith(mark))
    return { status: null, signal: null, lines: [], clipped: false, kept: false };
  const newline = r.stdout.indexOf('\n');
  const [dead, status, signal, size, limit] = r.stdout.slice(mark.length + 1, newline).split(' ');
  const ended = (s: string | undefined) => (dead === '1' ? number(s) : null);
  const lines = captureLines(r.stdout.slice(newline + 1));
  // The first line holds the echo of the Enter that started the command.
  if (lines[0] === '') lines.shift();
  // tmux 3.2 prints its own line when a pane dies (3.3 and later: remain-on-exit-format is emptied).
  if (/^Pane is dead \(/.test(lines[lines.length - 1] ?? '')) {
    lines.pop();
    while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  }
  // tmux drops the oldest tenth of a full history at once: at 90% of the limit, some may be gone.
  const [held, most] = [number(size), number(limit)];
  const clipped = held !== null && most !== null && most > 0 && held >= most - Math.floor(most / 10);
  return { status: ended(status), signal: ended(signal), lines, clipped, kept: keep || !r.ok };
}

export async function runInNewPane(
  exec: TmuxExec,
  files: RunFiles,
  terminal: Terminal,
  request: RunRequest,
  signal?: AbortSignal,
): Promise<RunResult> {
  const startedAt = Date.now();
  const hex = token();
  const paths = files.write(hex, request.command);
  let collector: { kill(): void } | null = null;
  try {
    const started = await startWindow(exec, terminal, hex, paths);
    const { pane } = started;
    const mark = `the-loop-status-${token()}`;
    const collecting = exec.start(collectArgs(pane, request.keep, mark, channelOf(hex)));
    collector = collecting;
    const done = collecting.result.then(() => undefined);
    const late = (await waitForEnd(exec, started, done, request.timeoutMs, signal)).kind === 'timeout';
    let got: Collected;
    if (late) collecting.kill();
    const first = await collecting.result;
    // It may have ended at the very moment the time ran out: then it did end.
    const ended = first.stdout.startsWith(mark);
    if (ended) got = parseCollected(first, mark, request.keep);
    else got = parseCollected(await exec.run(collectArgs(pane, false, mark)), mark, false);
    if (!late && !ended) {
      // Its waiting child ended without the pane's death: the window was killed, or we are stopping.
      throw new ConnectorError('E_TARGET_GONE', `the run pane ${pane} went away before its command ended`);
    }
    const timedOut = late && !ended;
    const { output, truncated } = tail(got.lines, request.maxLines);
    return {
      exitStatus: timedOut ? null : got.status,
      signal: timedOut ? null : got.signal,
      timedOut,
      output,
      truncated: truncated || got.clipped,
      ranIn: pane,
      kept: got.kept,
      durationMs: Date.now() - startedAt,
    };
  } finally {
    collector?.kill();
    files.remove(paths.file);
  }
}
