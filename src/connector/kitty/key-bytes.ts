import type { Key } from '../backend.js';
import { ConnectorError } from '../names.js';

/**
 * A key of the grammar (keys.ts) as the bytes a terminal sends for it, in the legacy xterm encoding
 * every shell and TUI reads. kitty 0.26.5 has no `send-key` remote command (only `send-text`), so
 * the kitty backend writes these bytes through `send-text --stdin`. Cursor keys are sent in normal
 * mode (`ESC [ A`); programs in application-cursor mode (vim, less) accept that form as well.
 * Pure: no I/O.
 */

const ESC = '\u001b';

/** Keys with a final letter: `ESC [ A`, with modifiers `ESC [ 1 ; m A`. F1–F4 use SS3 unmodified. */
const LETTER_KEYS: Readonly<Record<string, string>> = {
  Up: 'A',
  Down: 'B',
  Right: 'C',
  Left: 'D',
  Home: 'H',
  End: 'F',
  F1: 'P',
  F2: 'Q',
  F3: 'R',
  F4: 'S',
};

/** Keys of the form `ESC [ n ~`, with modifiers `ESC [ n ; m ~`. */
const TILDE_KEYS: Readonly<Record<string, number>> = {
  Insert: 2,
  Delete: 3,
  PageUp: 5,
  PageDown: 6,
  F5: 15,
  F6: 17,
  F7: 18,
  F8: 19,
  F9: 20,
  F10: 21,
  F11: 23,
  F12: 24,
};

const PLAIN: Readonly<Record<string, string>> = {
  Enter: '\r',
  Escape: ESC,
  Tab: '\t',
  BSpace: '\u007f',
  Space: ' ',
};

/** xterm's modifier parameter: 1 + shift + 2·alt + 4·ctrl. */
const modifierParam = (key: Key): number => 1 + (key.shift ? 1 : 0) + (key.meta ? 2 : 0) + (key.ctrl ? 4 : 0);

function special(key: Key): string | null {
  const m = modifierParam(key);
  const letter = LETTER_KEYS[key.base];
  if (letter !== undefined) {
    if (m === 1) return /^F[1-4]$/.test(key.base) ? `${ESC}O${letter}` : `${ESC}[${letter}`;
    return `${ESC}[1;${m}${letter}`;
  }
  const tilde = TILDE_KEYS[key.base];
  if (tilde !== undefined) return m === 1 ? `${ESC}[${tilde}~` : `${ESC}[${tilde};${m}~`;
  return null;
}

/** A letter, digit, or Enter/Escape/Tab/BSpace/Space with the chords keys.ts admits for them. */
function simple(key: Key): string | null {
  const meta = key.meta ? ESC : '';
  if (/^[a-z]$/.test(key.base)) {
    // Ctrl folds case in the legacy encoding: C-a and C-S-a are both 0x01.
    if (key.ctrl) return meta + String.fromCharCode(key.base.charCodeAt(0) - 0x60);
    return meta + (key.shift ? key.base.toUpperCase() : key.base);
  }
  if (/^[0-9]$/.test(key.base) && !key.ctrl && !key.shift) return meta + key.base;
  if (key.base === 'Tab' && key.shift && !key.ctrl) return `${meta}${ESC}[Z`;
  if (key.base === 'Space' && key.ctrl && !key.shift) return `${meta}\u0000`;
  const plain = PLAIN[key.base];
  if (plain !== undefined && !key.ctrl && !key.shift) return meta + plain;
  return null;
}

/** The bytes for one key, or E_UNKNOWN_KEY for a chord the legacy encoding cannot carry. */
export function keyBytes(key: Key): string {
  const bytes = special(key) ?? simple(key);
  if (bytes === null) {
    const word = `${key.ctrl ? 'C-' : ''}${key.meta ? 'M-' : ''}${key.shift ? 'S-' : ''}${key.base}`;
    throw new ConnectorError(
      'E_UNKNOWN_KEY',
      `unknown key ${JSON.stringify(word)}: it has no bytes on kitty`,
    );
  }
  return bytes;
}
