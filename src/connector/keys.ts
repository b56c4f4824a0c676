import type { Key } from './backend.js';
import { ConnectorError } from './names.js';

/**
 * The connector's key grammar: `(C-|M-|S-)*(Enter|Escape|Tab|BSpace|Space|Up|…|F1..F12|[a-z0-9])`,
 * each modifier at most once. A word outside it is an error (E_UNKNOWN_KEY), never text: tmux's
 * `send-keys` types a name it does not know as literal characters (`NotAKey`, and on 3.3a even
 * `S-a`, `S-Enter` or `C-M-Enter`), so only chords verified to reach a pane as their terminal bytes
 * are admitted, and each is given the one tmux name that sends them. Pure: no I/O.
 */

/** Keys that carry any modifier as an xterm modifier parameter (`ESC [1;5A`): every chord is meaningful. */
const MODIFIABLE = new Set([
  'Up',
  'Down',
  'Left',
  'Right',
  'Home',
  'End',
  'PageUp',
  'PageDown',
  'Insert',
  'Delete',
  ...Array.from({ length: 12 }, (_, i) => `F${i + 1}`),
]);

/**
 * For the other named keys, the modifier sets that have bytes on a terminal without extended keys
 * (`c`, `m`, `s` for ctrl, meta, shift). Checked on tmux 3.3a: `C-Enter`, `C-Tab`, `C-BSpace`,
 * `C-Escape` send nothing, and `S-Enter`, `S-Space`, `S-Escape`, `S-BSpace` are typed as their name.
 */
const CHORDS: Readonly<Record<string, readonly string[]>> = {
  Enter: ['', 'm'],
  Escape: ['', 'm'],
  Tab: ['', 'm', 's', 'ms'],
  BSpace: ['', 'm'],
  Space: ['', 'c', 'm', 'cm'],
};

/** tmux's own names where they differ from the grammar's. */
const TMUX_BASE: Readonly<Record<string, string>> = {
  PageUp: 'PPage',
  PageDown: 'NPage',
  Insert: 'IC',
  Delete: 'DC',
};

const KITTY_BASE: Readonly<Record<string, string>> = {
  Enter: 'enter',
  Escape: 'escape',
  Tab: 'tab',
  BSpace: 'backspace',
  Space: 'space',
  PageUp: 'page_up',
  PageDown: 'page_down',
};

const MAX_WORD = 32;
const WORD = /^((?:[CMS]-){0,3})([A-Za-z0-9]+)$/;

/** A bad word for an error message: quoted (so controls and look-alikes show as escapes), bounded. */
function quoted(word: string): string {
  const text = JSON.stringify(word.length > MAX_WORD ? `${word.slice(0, MAX_WORD)}…` : word);
  return text.replace(/[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (c) => {
    return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  });
}

function unknown(word: string, why: string): ConnectorError {
  return new ConnectorError('E_UNKNOWN_KEY', `unknown key ${quoted(word)}: ${why}`);
}

const isBase = (base: string): boolean =>
  MODIFIABLE.has(base) || Object.hasOwn(CHORDS, base) || /^[a-z0-9]$/.test(base);

/** Whether a parsed chord has bytes on a terminal (see CHORDS); letters take any modifiers. */
function meaningful(key: Key): boolean {
  if (MODIFIABLE.has(key.base) || /^[a-z]$/.test(key.base)) return true;
  const set = `${key.ctrl ? 'c' : ''}${key.meta ? 'm' : ''}${key.shift ? 's' : ''}`;
  if (/^[0-9]$/.test(key.base)) return set === '' || set === 'm';
  return (CHORDS[key.base] ?? []).includes(set);
}

/** One word of the grammar as a Key, or E_UNKNOWN_KEY naming it. */
export function parseKey(word: string): Key {
  if (typeof word !== 'string' || word.length === 0) throw unknown(String(word), 'an empty key');
  if (word.length > MAX_WORD) throw unknown(word, `longer than ${MAX_WORD} characters`);
  const match = WORD.exec(word);
  if (!match) throw unknown(word, 'not of the form (C-|M-|S-)*<key>');
  const prefix = match[1] ?? '';
  const base = match[2] ?? '';
  const mods = prefix.split('-').filter((m) => m !== '');
  if (new Set(mods).size !== mods.length) throw unknown(word, 'a modifier given twice');
  if (!isBase(base)) {
    throw unknown(
      word,
      'keys are Enter, Escape, Tab, BSpace, Space, arrows, Home, End, PageUp, PageDown, Insert, Delete, F1..F12, a-z, 0-9',
    );
  }
  const key: Key = { ctrl: mods.includes('C'), meta: mods.includes('M'), shift: mods.includes('S'), base };
  if (!meaningful(key)) throw unknown(word, 'that chord has no bytes on a terminal');
  return key;
}

/** Every word as a Key, all or nothing: one bad word and none is returned (nothing is pressed). */
export function parseKeys(words: readonly string[]): Key[] {
  return words.map(parseKey);
}

/** The name tmux's `send-keys` takes for a key (checked on tmux 3.3a to send the key's bytes). */
export function tmuxKeyName(key: Key): string {
  if (!isBase(key.base) || !meaningful(key)) throw unknown(key.base, 'not a key of the grammar');
  if (key.base === 'Tab' && key.shift) return `${key.meta ? 'M-' : ''}BTab`;
  if (/^[a-z]$/.test(key.base)) {
    // tmux 3.3a types `S-a` as three characters; the shifted letter is the upper-case one.
    const letter = key.shift ? key.base.toUpperCase() : key.base;
    return `${key.ctrl ? 'C-' : ''}${key.meta ? 'M-' : ''}${letter}`;
  }
  const base = TMUX_BASE[key.base] ?? key.base;
  return `${key.ctrl ? 'C-' : ''}${key.meta ? 'M-' : ''}${key.shift ? 'S-' : ''}${base}`;
}

/** The key in kitty's `send-key` syntax: `ctrl+alt+a`, `shift+tab`, `page_up`, `f5`. */
export function kittyKeyName(key: Key): string {
  if (!isBase(key.base) || !meaningful(key)) throw unknown(key.base, 'not a key of the grammar');
  const base = KITTY_BASE[key.base] ?? key.base.toLowerCase();
  return `${key.ctrl ? 'ctrl+' : ''}${key.meta ? 'alt+' : ''}${key.shift ? 'shift+' : ''}${base}`;
}

/** The grammar's word for a key (for logs and audit rows). */
export function keyWord(key: Key): string {
  return `${key.ctrl ? 'C-' : ''}${key.meta ? 'M-' : ''}${key.shift ? 'S-' : ''}${key.base}`;
}
