import type { RunRequest, RunResult, Terminal } from '../backend.js';
import { ConnectorError } from '../names.js';
import { checkChannel, checkPane, checkSession, type TmuxExec, token } from './tmux-exec.js';
import { fused } from './tmux-fused.js';
import { captureLines, MAX_READ_LINES } from './tmux-io.js';

/**
 * `run` in a new pane: a detached window in the target's session whose end tmux records. No marker is
 * echoed anywhere: the window starts on a placeholder that waits, gets `remain-on-exit` and a
 * `pane-died` hook that signals a channel of ours, a `tmux wait-for` child starts listening, and
 * only then `respawn-pane -k` replaces the placeholder with `<shell> -c <command>` — the command one
 * argv element (tmux 3.3a does not expand `#{}`/`#()` there). Its status is `#{pane_dead_status}`.
 */

/** Shells we start a command with; the server's `default-shell` when it is one of them, else /bin/sh. */
const KNOWN_SHELL = /^\/[A-Za-z0-9._/-]{1,200}\/(bash|zsh|sh|dash|ksh|mksh)$/;
/** The placeholder only has to outlive the three calls before `respawn-pane -k` replaces it. */
const PLACEHOLDER = 'sleep 2147483647';

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

/**
 * Wait for the pane's end. tmux 3.3a can miss a SIGCHLD when several panes end at once: the pane is
 * dead (its pty closed) but its process stays a zombie — no status, no `pane-died` — until the server
 * reaps some other child. So while waiting, look at the pane now and then (100 ms, doubling to 1 s);
 * when it is dead without a status, have the server run and reap a job of its own (`run-shell true`),
 * which reaps ours too and fires the hook.
 */
async function waitForEnd(
  exec: TmuxExec,
  pane: string,
  done: Promise<void>,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<Outcome> {
  const deadline = Date.now() + timeoutMs;
  for (let interval = 100; ; interval = Math.min(interval * 2, 1000)) {
    const outcome = await race(done, Math.min(interval, deadline - Date.now()), signal);
    if (outcome.kind === 'done') return outcome;
    if (signal?.aborted || Date.now() >= deadline) return { kind: 'timeout' };
    const r = await exec.run([
      'display-message',
      '-p',
      '-t',
      pane,
      '#{pane_dead}:#{pane_dead_status}#{pane_dead_signal}',
    ]);
    if (r.ok && r.stdout.trim() === '1:') await exec.run(['run-shell', 'true']);
  }
}

async function shellFor(exec: TmuxExec): Promise<string> {
  const r = await exec.run(['show-options', '-g', '-v', 'default-shell']);
  const shell = r.stdout.trim();
  return r.ok && KNOWN_SHELL.test(shell) ? shell : '/bin/sh';
}

/** Create the window (only while the target is still the listed terminal); returns its pane id. */
async function newWindow(exec: TmuxExec, terminal: Terminal): Promise<string> {
  const session = checkSession(terminal.identity.split('@')[0] ?? '');
  const mark = `the-loop-pane-${token()}`;
  const out = await fused(exec, terminal, {
    // Single quotes: tmux's parser would expand `$3` as an environment variable.
    act: `new-window -d -P -F '${mark} #{pane_id}' -n the-loop-run -t '${session}:' ${PLACEHOLDER}`,
    require: 'none',
  });
  const line = out.split('\n').find((l) => l.startsWith(mark)) ?? '';
  return checkPane(line.slice(mark.length + 1).trim());
}

/** The status, the signal and the output of the new pane. */
async function collect(
  exec: TmuxExec,
  pane: string,
): Promise<{ status: number | null; signal: number | null; lines: string[] }> {
  const mark = `the-loop-status-${token()}`;
  const r = await exec.run([
    'display-message',
    '-p',
    '-t',
    pane,
    `${mark} #{pane_dead} #{pane_dead_status} #{pane_dead_signal}`,
    ';',
    'capture-pane',
    '-p',
    '-J',
    '-S',
    '-',
    '-E',
    '-',
    '-t',
    pane,
  ]);
  if (!r.ok) return { status: null, signal: null, lines: [] };
  const newline = r.stdout.indexOf('\n');
  const [dead, status, signal] = r.stdout.slice(mark.length + 1, newline).split(' ');
  const number = (s: string | undefined) => (dead === '1' && s && /^\d+$/.test(s) ? Number(s) : null);
  const lines = captureLines(r.stdout.slice(newline + 1));
  // Older tmux prints its own line when a pane dies (3.3a's remain-on-exit-format is emptied below).
  if (/^Pane is dead \(/.test(lines[lines.length - 1] ?? '')) lines.pop();
  return { status: number(status), signal: number(signal), lines };
}

async function removePane(exec: TmuxExec, pane: string): Promise<boolean> {
  const r = await exec.run(['set-hook', '-p', '-u', '-t', pane, 'pane-died', ';', 'kill-pane', '-t', pane]);
  return r.ok;
}

export async function runInNewPane(
  exec: TmuxExec,
  terminal: Terminal,
  request: RunRequest,
  signal?: AbortSignal,
): Promise<RunResult> {
  const started = Date.now();
  const shell = await shellFor(exec);
  const pane = await newWindow(exec, terminal);
  const channel = checkChannel(`the-loop-run-${token()}`);
  const armed = await exec.run([
    ...['set-option', '-p', '-t', pane, 'remain-on-exit', 'on', ';'],
    ...['set-hook', '-p', '-t', pane, 'pane-died', `wait-for -S ${channel}`, ';'],
    ...['set-option', '-p', '-t', pane, 'remain-on-exit-format', ''],
  ]);
  if (!armed.ok && !/remain-on-exit-format/.test(armed.stderr)) {
    await removePane(exec, pane);
    throw new Error(`tmux could not prepare the run pane ${pane}: ${armed.stderr.trim()}`);
  }
  const waiter = exec.waitFor(channel);
  try {
    const spawned = await exec.run(['respawn-pane', '-k', '-t', pane, '--', shell, '-c', request.command]);
    if (!spawned.ok) {
      await removePane(exec, pane);
      throw new ConnectorError('E_TARGET_GONE', `the run pane ${pane} went away before the command started`);
    }
    const outcome = await waitForEnd(exec, pane, waiter.done, request.timeoutMs, signal);
    waiter.kill();
    const { status, signal: sig, lines } = await collect(exec, pane);
    const timedOut = outcome.kind === 'timeout';
    const kept = !timedOut && request.keep ? true : !(await removePane(exec, pane));
    return {
      exitStatus: timedOut ? null : status,
      signal: timedOut ? null : sig,
      timedOut,
      ...tail(lines, request.maxLines),
      ranIn: pane,
      kept,
      durationMs: Date.now() - started,
    };
  } finally {
    waiter.kill();
  }
}
