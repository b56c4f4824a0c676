import { checkTarget, type Tmux } from '../../runners/tmux/tmux.js';
import { statusLines } from './flow-rules.js';

/** What the hub asks tmux about a session's window: its size, its status bar, its active pane. */

export interface WindowInfo {
  cols: number;
  rows: number;
  /** Lines tmux draws below the window in each client (the `status` option). */
  status: number;
  /** The active pane (`%N`), where a writer's keys go. */
  paneId: string;
  /** Lines in the active pane's history (above its screen). */
  history: number;
}

const PANE_ID = /^%\d+$/;

/** The window of `=<target>:` (its current window), or null when the session is gone. */
export async function windowInfo(tmux: Tmux, target: string): Promise<WindowInfo | null> {
  const r = await tmux.run([
    'display-message',
    '-p',
    '-t',
    `=${checkTarget(target)}:`,
    '#{window_width} #{window_height} #{status} #{pane_id} #{history_size}',
  ]);
  if (!r.ok) return null;
  const [cols, rows, status, paneId, history] = r.stdout.trim().split(' ');
  const c = Number(cols);
  const h = Number(rows);
  if (!Number.isInteger(c) || !Number.isInteger(h) || c < 1 || h < 1) return null;
  // The pane id goes on a tmux command line: only tmux's own form is accepted.
  if (!paneId || !PANE_ID.test(paneId)) return null;
  return { cols: c, rows: h, status: statusLines(status ?? ''), paneId, history: Number(history) || 0 };
}

/** A window's size and the status lines its clients draw under it (client rows = rows + status). */
export interface WindowSize {
  cols: number;
  rows: number;
  status: number;
}

/**
 * The size of `=<target>:`'s window, for the hub's poll (lighter than windowInfo); a tmux error (the
 * session gone, the server too) is a value, for the caller to log and ignore.
 */
export async function windowSize(
  tmux: Tmux,
  target: string,
): Promise<{ ok: true; size: WindowSize } | { ok: false; why: string }> {
  const r = await tmux.run([
    'display-message',
    '-p',
    '-t',
    `=${checkTarget(target)}:`,
    '#{window_width} #{window_height} #{status}',
  ]);
  if (!r.ok) return { ok: false, why: r.stderr.trim() || `exit ${r.code}` };
  const [cols, rows, status] = r.stdout.trim().split(' ');
  const c = Number(cols);
  const h = Number(rows);
  if (!Number.isInteger(c) || !Number.isInteger(h) || c < 1 || h < 1) {
    return { ok: false, why: `unexpected answer ${JSON.stringify(r.stdout.trim())}` };
  }
  return { ok: true, size: { cols: c, rows: h, status: statusLines(status ?? '') } };
}

/**
 * Make the window's size the writer's alone. tmux ignores `ignore-size` clients when sizing a window
 * only while some attached client lacks the flag (tmux 3.3a resize.c, ignore_client_size): with only
 * our read-only viewers attached, their ptys would size the agent's window (checked here). Agent
 * windows are created `window-size manual`; this makes sure of it before any viewer attaches.
 */
export async function pinWindowSize(tmux: Tmux, target: string): Promise<boolean> {
  const r = await tmux.run(['set-option', '-w', '-t', `=${checkTarget(target)}:`, 'window-size', 'manual']);
  return r.ok;
}

/**
 * The pane's history, the lines above its screen (`capture-pane -e`: with their colours), as bytes a
 * terminal of `rows` lines shows in its scrollback: each line ended with CR LF and the attributes reset,
 * then a screenful of empty lines to push the last of them off the screen — tmux's attach clears the screen
 * and redraws it, and a terminal keeps in its scrollback only what scrolled off.
 */
export async function scrollback(
  tmux: Tmux,
  target: string,
  window: { rows: number; history: number },
  maxLines = 2000,
): Promise<Buffer> {
  // With no history, `-E -1` is clamped to the screen's first line (tmux cmd-capture-pane.c): ask nothing.
  const lines = Math.min(maxLines, window.history);
  if (lines <= 0) return Buffer.alloc(0);
  const r = await tmux.run([
    'capture-pane',
    '-p',
    '-e',
    '-S',
    String(-lines),
    '-E',
    '-1',
    '-t',
    `=${checkTarget(target)}:`,
  ]);
  if (!r.ok || r.stdout === '') return Buffer.alloc(0);
  const text = r.stdout.replace(/\n$/, '').split('\n').join('\x1b[0m\r\n');
  return Buffer.from(`${text}\x1b[0m${'\r\n'.repeat(window.rows)}`, 'utf8');
}
