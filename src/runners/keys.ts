/**
 * Keystrokes for `the-loop sessions keys`, shared by every runner that can take them: which words are
 * named keys, how literal text is cleaned, and (for an engine on a PTY, where no tmux translates key
 * names) the bytes a terminal sends for each named key. Pure: no I/O.
 */

/** tmux key names that are pressed as keys; any other word is typed as literal text. */
export const NAMED_KEY =
  /^(Escape|Enter|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|PageUp|PageDown|PPage|NPage|DC|IC|F[1-9]|F1[0-2]|[CM]-[a-z0-9])$/;

/** C0 and C1 control characters (ESC among them): what a literal word must not carry. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
const HAS_CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** One key as sent: a named key, or literal text. */
export interface SentKey {
  key: string;
  literal: boolean;
}

/**
 * The keys of a `sessions keys` command line: named keys as they are, other words as literal text
 * stripped of control characters (a keystroke is what is typed, not a sequence); words left empty
 * by the stripping are dropped. Words in a row are one text, typed with the spaces the shell took
 * from between them (`typed text here` is typed as `typed text here`).
 */
export function planKeys(words: readonly string[]): SentKey[] {
  const planned: SentKey[] = [];
  for (const word of words) {
    if (NAMED_KEY.test(word)) {
      planned.push({ key: word, literal: false });
      continue;
    }
    const text = word.replace(CONTROL, '');
    if (text === '') continue;
    const last = planned[planned.length - 1];
    if (last?.literal) last.key = `${last.key} ${text}`;
    else planned.push({ key: text, literal: true });
  }
  return planned;
}

// What an xterm sends for each key in its default modes (normal cursor keys, no modifyOtherKeys).
const KEY_BYTES: Readonly<Record<string, string>> = {
  Escape: '\x1b',
  // A terminal's Enter is CR; the line discipline (ICRNL) turns it into \n for a cooked reader.
  Enter: '\r',
  Tab: '\t',
  BTab: '\x1b[Z',
  BSpace: '\x7f',
  Space: ' ',
  Up: '\x1b[A',
  Down: '\x1b[B',
  Right: '\x1b[C',
  Left: '\x1b[D',
  Home: '\x1b[H',
  End: '\x1b[F',
  PageUp: '\x1b[5~',
  PPage: '\x1b[5~',
  PageDown: '\x1b[6~',
  NPage: '\x1b[6~',
  DC: '\x1b[3~',
  IC: '\x1b[2~',
  F1: '\x1bOP',
  F2: '\x1bOQ',
  F3: '\x1bOR',
  F4: '\x1bOS',
  F5: '\x1b[15~',
  F6: '\x1b[17~',
  F7: '\x1b[18~',
  F8: '\x1b[19~',
  F9: '\x1b[20~',
  F10: '\x1b[21~',
  F11: '\x1b[23~',
  F12: '\x1b[24~',
};

/** The bytes a terminal sends for a named key, or why it has none. */
export function namedKeyBytes(key: string): { bytes: string } | { error: string } {
  if (Object.hasOwn(KEY_BYTES, key)) return { bytes: KEY_BYTES[key] as string };
  const chord = /^([CM])-([a-z0-9])$/.exec(key);
  if (chord?.[1] === 'M') return { bytes: `\x1b${chord[2]}` };
  if (chord?.[1] === 'C') {
    const char = chord[2] as string;
    // C-a … C-z are 0x01 … 0x1a. A control digit has no one byte that terminals agree on.
    if (char >= 'a' && char <= 'z') return { bytes: String.fromCharCode(char.charCodeAt(0) - 0x60) };
    return { error: `${key} has no control character on a terminal (C-a … C-z have)` };
  }
  return { error: `${key} is not a named key` };
}

/** Most keys one request may carry. */
export const MAX_KEYS_PER_REQUEST = 256;

/** A checked key request: each key with the bytes to write for it. */
export type KeysRequest =
  | { ok: true; keys: Array<SentKey & { bytes: string }> }
  | { ok: false; error: string };

/**
 * Check one request line of the keys socket, `{"keys":["Escape","y","Enter"]}`, and map each key to
 * its bytes. All or nothing: a request with one bad key writes none. A literal word carrying control
 * characters is refused, not stripped: the CLI strips them before sending (`planKeys`), so only a
 * client that means to drive the terminal with raw sequences sends them.
 */
export function parseKeysRequest(line: string): KeysRequest {
  let request: unknown;
  try {
    request = JSON.parse(line);
  } catch {
    return { ok: false, error: 'the request is not JSON: send one line like {"keys":["Escape","y"]}' };
  }
  if (!request || typeof request !== 'object' || Array.isArray(request)) {
    return { ok: false, error: 'the request must be a JSON object with a "keys" array' };
  }
  const extra = Object.keys(request).filter((k) => k !== 'keys');
  if (extra.length > 0) return { ok: false, error: `unknown field ${JSON.stringify(extra[0])}` };
  const keys = (request as { keys?: unknown }).keys;
  if (!Array.isArray(keys)) return { ok: false, error: '"keys" must be an array of strings' };
  if (keys.length > MAX_KEYS_PER_REQUEST) {
    return { ok: false, error: `${keys.length} keys in one request; the limit is ${MAX_KEYS_PER_REQUEST}` };
  }
  const out: Array<SentKey & { bytes: string }> = [];
  for (const [i, key] of keys.entries()) {
    if (typeof key !== 'string') return { ok: false, error: `key ${i + 1} is not a string` };
    if (key === '') return { ok: false, error: `key ${i + 1} is empty` };
    if (NAMED_KEY.test(key)) {
      const mapped = namedKeyBytes(key);
      if ('error' in mapped) return { ok: false, error: `key ${i + 1}: ${mapped.error}` };
      out.push({ key, literal: false, bytes: mapped.bytes });
    } else if (HAS_CONTROL.test(key)) {
      return {
        ok: false,
        error: `key ${i + 1} is literal text with control characters; press named keys (Escape, C-c) instead`,
      };
    } else {
      out.push({ key, literal: true, bytes: key });
    }
  }
  return { ok: true, keys: out };
}
