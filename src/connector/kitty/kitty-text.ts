import { stripControls } from '../../core/text.js';

/**
 * `kitty @ get-text` output as lines. Without `--ansi` kitty returns the cells' characters only, so
 * what a program printed as escape sequences is not there; what is left is stripped anyway (a
 * character a program put in a cell may still be a control), and the one suffix we asked for with
 * `--add-cursor` is parsed off first.
 */

// `--add-cursor` appends: show/hide cursor, its position (1-based row;col), and maybe its shape.
const CURSOR_SUFFIX = /\u001b\[\?25([hl])\u001b\[(\d+);(\d+)H(?:\u001b\[\d* q)?\n?$/;

export interface ScreenText {
  lines: string[];
  /** 0-based column and row on the visible screen; null when kitty did not report it. */
  cursor: { x: number; y: number } | null;
}

/** The text as lines, controls stripped, trailing blank lines dropped. */
export function screenLines(text: string): string[] {
  const lines = stripControls(text.replace(/\r\n?/g, '\n')).split('\n');
  while (lines.length > 0 && (lines[lines.length - 1] ?? '').trim() === '') lines.pop();
  return lines.map((line) => line.trimEnd());
}

/** `get-text --add-cursor` output: its lines and the cursor it appended. */
export function screenWithCursor(text: string): ScreenText {
  const m = CURSOR_SUFFIX.exec(text);
  if (!m) return { lines: screenLines(text), cursor: null };
  return {
    lines: screenLines(text.slice(0, m.index)),
    cursor: { x: Number(m[3]) - 1, y: Number(m[2]) - 1 },
  };
}
