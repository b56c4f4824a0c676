import { stripControls } from '../../core/text.js';
import type { Key, ReadResult, Terminal } from '../backend.js';
import { tmuxKeyName } from '../keys.js';
import { ConnectorError } from '../names.js';
import { checkBuffer, checkPane, type TmuxExec, token } from './tmux-exec.js';
import { fused } from './tmux-fused.js';

/** Reading a pane, pasting text, pressing keys, closing: each one tmux call fused with the identity check. */

/** Most lines one read returns. */
export const MAX_READ_LINES = 10_000;
/** Most bytes one paste carries (the server refuses larger texts before they get here). */
export const MAX_TEXT_BYTES = 256 * 1024;
/** Most keys one send carries. */
export const MAX_KEYS = 256;

/** Lines of a capture: trailing spaces and trailing blank lines dropped, escape sequences stripped. */
export function captureLines(text: string): string[] {
  const lines = stripControls(text.replace(/\r/g, ''))
    .split('\n')
    .map((line) => line.trimEnd());
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

export async function readPane(
  exec: TmuxExec,
  terminal: Terminal,
  options: { lines: number; history: boolean },
): Promise<ReadResult> {
  const pane = checkPane(terminal.id);
  const want = Math.max(1, Math.min(MAX_READ_LINES, Math.floor(options.lines)));
  const mark = `the-loop-cursor-${token()}`;
  // With history: enough scrollback for `want` lines above a screen of blank rows, plus one to know
  // whether more was there.
  const start = options.history ? ` -S -${want + 1}` : '';
  const out = await fused(exec, terminal, {
    act: `display-message -p -t ${pane} '${mark} #{cursor_x},#{cursor_y}' ; capture-pane -p -J -t ${pane}${start}`,
    require: 'none',
  });
  const newline = out.indexOf('\n');
  const head = newline < 0 ? out : out.slice(0, newline);
  const cursorMatch = head.startsWith(mark) ? /^(\d+),(\d+)$/.exec(head.slice(mark.length + 1)) : null;
  const lines = captureLines(newline < 0 ? '' : out.slice(newline + 1));
  return {
    lines: lines.slice(-want),
    truncated: lines.length > want,
    cursor: cursorMatch ? { x: Number(cursorMatch[1]), y: Number(cursorMatch[2]) } : null,
  };
}

/** Text made inert for a paste: CR/LF normalised, escape sequences and controls (but \n, \t) removed. */
export function pasteText(text: string): string {
  const clean = stripControls(text.replace(/\r\n?/g, '\n'));
  if (Buffer.byteLength(clean, 'utf8') > MAX_TEXT_BYTES) {
    throw new ConnectorError('E_INVALID', `text over ${MAX_TEXT_BYTES} bytes: send it in parts`);
  }
  return clean;
}

/**
 * Paste text: loaded from stdin into a buffer of ours, then pasted bracketed (`-p`: tmux adds the
 * markers only when the program asked for bracketed paste) and deleted (`-d`) — only when the pane is
 * still the listed terminal and not in a mode or dead. The buffer is deleted on every other path.
 */
export async function sendText(exec: TmuxExec, terminal: Terminal, text: string): Promise<void> {
  const pane = checkPane(terminal.id);
  const clean = pasteText(text);
  if (clean === '') return;
  const buffer = checkBuffer(`the-loop-${token()}`);
  let pasted = false;
  try {
    await fused(exec, terminal, {
      before: ['load-buffer', '-b', buffer, '-'],
      act: `paste-buffer -p -d -b ${buffer} -t ${pane}`,
      require: 'idle',
      input: clean,
    });
    pasted = true;
  } finally {
    if (!pasted) await exec.run(['delete-buffer', '-b', buffer]);
  }
}

/** Press keys by their tmux names (never `-l`, never text), in one call with the check. */
export async function sendKeys(exec: TmuxExec, terminal: Terminal, keys: readonly Key[]): Promise<void> {
  const pane = checkPane(terminal.id);
  if (keys.length === 0) return;
  if (keys.length > MAX_KEYS)
    throw new ConnectorError('E_INVALID', `${keys.length} keys; the limit is ${MAX_KEYS}`);
  // tmuxKeyName returns only names built from the grammar's fixed words: letters, digits and `-`.
  const names = keys.map(tmuxKeyName);
  if (names.some((n) => !/^[A-Za-z0-9-]{1,16}$/.test(n))) throw new Error('refusing an unexpected key name');
  await fused(exec, terminal, { act: `send-keys -t ${pane} ${names.join(' ')}`, require: 'idle' });
}

export async function closePane(exec: TmuxExec, terminal: Terminal): Promise<void> {
  const pane = checkPane(terminal.id);
  await fused(exec, terminal, { act: `kill-pane -t ${pane}`, require: 'none' });
}
