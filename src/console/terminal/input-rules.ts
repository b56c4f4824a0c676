/**
 * What of a writer's typing may reach the agent's pane (pure). A browser terminal (xterm.js) sends on
 * one channel both the keys a person presses and the replies it makes on its own to what the pane
 * printed: cursor position (CPR), device attributes (DA), mode reports (DECRPM), focus and mouse
 * reports, window reports and OSC/DCS answers (colour queries, clipboard reads). Those replies are
 * answers to the program's output, so the program can steer them: forwarded, they are keys nobody
 * typed. They are dropped; keys pass: printable text (any UTF-8), C0 controls, ESC-prefixed meta
 * keys, CSI and SS3 cursor and function keys, and the bracketed paste markers.
 *
 * Keys are kept by a whitelist of CSI forms (the reports are many and vendors add more), and the
 * filter keeps a small state, so a report split across two frames is still dropped whole.
 */

export type InputMode = 'ground' | 'esc' | 'csi' | 'csi-skip' | 'ss3' | 'string' | 'string-esc' | 'x10';

export interface InputState {
  mode: InputMode;
  /** The sequence being read (ESC…, CSI…): kept only while undecided. */
  pending: string;
  /** Characters of an X10 mouse report (`CSI M Cb Cx Cy`) still to drop. */
  x10Left: number;
}

export interface InputResult {
  state: InputState;
  /** What to send to the pane. */
  keep: string;
  /** Sequences dropped in this chunk (reports, strings, malformed). */
  dropped: number;
}

export const INITIAL_INPUT: InputState = { mode: 'ground', pending: '', x10Left: 0 };

/** A CSI longer than this is no key: skipped (keeps the pending buffer bounded). */
const MAX_CSI = 64;

const ESC = '\x1b';
/** Finals of CSI key encodings (xterm, xterm.js): cursor keys, Home/End, F1–F4, Shift-Tab, `~` keys, CSI u. */
const KEY_FINALS = new Set(['A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'P', 'Q', 'S', 'Z', '~', 'u']);
/** ESC followed by these opens a string (OSC, DCS, SOS, PM, APC) that runs to ST or BEL. */
const STRING_INTRO = new Set([']', 'P', 'X', '^', '_']);
/** 8-bit C1 introducers (U+0080–U+009F) as the 7-bit forms they stand for. */
const C1_CSI = '\x9b';
const C1_SS3 = '\x8f';
const C1_ST = '\x9c';
const C1_STRINGS = new Set(['\x9d', '\x90', '\x98', '\x9e', '\x9f']);

/**
 * Whether a complete CSI (`params` between `CSI` and the final, `final` its last character) is a key.
 * Reports all fail: CPR `CSI r;c R` (xterm's Shift-F3 `CSI 1;2 R` collides with it and is lost with
 * it), DA `CSI ? … c` / `CSI > … c`, DECRPM `CSI ? … $ y`, focus `CSI I` / `CSI O`, SGR mouse
 * `CSI < … M/m`, window reports `CSI … t`, DSR `CSI … n`, keyboard flags `CSI ? … u`.
 */
export function isKeyCsi(params: string, final: string): boolean {
  // Keys carry only digits, `;` and `:` (CSI u sub-parameters); a prefix (`?`, `>`, `<`, `=`) or an
  // intermediate (`$`, space…) marks a report.
  return KEY_FINALS.has(final) && /^[0-9;:]*$/.test(params);
}

interface Step {
  state: InputState;
  keep: string;
  dropped: number;
}

const hold = (mode: InputMode, pending = '', x10Left = 0): Step => ({
  state: { mode, pending, x10Left },
  keep: '',
  dropped: 0,
});
const emit = (keep: string): Step => ({ state: INITIAL_INPUT, keep, dropped: 0 });
const drop = (): Step => ({ state: INITIAL_INPUT, keep: '', dropped: 1 });

/** Filter one chunk of a writer's input, continuing from `state`. */
export function filterInput(state: InputState, chunk: string): InputResult {
  let current = state;
  let keep = '';
  let dropped = 0;
  for (const ch of chunk) {
    const next = step(current, ch);
    current = next.state;
    keep += next.keep;
    dropped += next.dropped;
  }
  return { state: current, keep, dropped };
}

function step(state: InputState, ch: string): Step {
  switch (state.mode) {
    case 'ground':
      return fromGround(ch);
    case 'esc':
      return afterEsc(ch);
    case 'ss3':
      return afterSs3(state.pending, ch);
    case 'csi':
      return inCsi(state.pending, ch);
    case 'csi-skip':
      // A broken CSI is skipped through its final byte, so its tail is not taken for typed text.
      return ch >= '\x40' && ch <= '\x7e' ? drop() : hold('csi-skip');
    case 'x10':
      return state.x10Left > 1 ? hold('x10', '', state.x10Left - 1) : drop();
    case 'string':
      if (ch === '\x07' || ch === C1_ST) return drop();
      return ch === ESC ? hold('string-esc') : hold('string');
    case 'string-esc': {
      // ST is `ESC \`; any other ESC ends the string too (as in xterm) and starts a sequence.
      if (ch === '\\') return drop();
      const next = afterEsc(ch);
      return { ...next, dropped: next.dropped + 1 };
    }
  }
}

/** A character in ground state: a key (kept), an introducer (held), or a lone C1 control (dropped). */
function fromGround(ch: string): Step {
  if (ch === ESC) return hold('esc', ESC);
  if (ch === C1_CSI) return hold('csi', `${ESC}[`);
  if (ch === C1_SS3) return hold('ss3', `${ESC}O`);
  if (C1_STRINGS.has(ch)) return hold('string');
  const code = ch.codePointAt(0) ?? 0;
  // Other C1 controls are no key a browser sends; as UTF-8 some programs would read them as controls.
  if (code >= 0x80 && code <= 0x9f) return drop();
  return emit(ch);
}

/** The character after ESC: CSI, SS3, a string, or a meta key (Alt-x is `ESC x`). */
function afterEsc(ch: string): Step {
  if (ch === '[') return hold('csi', `${ESC}[`);
  if (ch === 'O') return hold('ss3', `${ESC}O`);
  if (STRING_INTRO.has(ch)) return hold('string');
  // ESC ESC: the first is the Escape key; the second may start a sequence.
  if (ch === ESC) return { ...hold('esc', ESC), keep: ESC };
  const next = fromGround(ch);
  if (next.dropped) return next;
  // ESC before a C1 introducer: the Escape key, then the sequence.
  return { ...next, keep: ESC + next.keep };
}

/** `ESC O <final>`: application cursor keys and F1–F4, never a report. */
function afterSs3(pending: string, ch: string): Step {
  if (ch >= '\x20' && ch <= '\x7e') return emit(pending + ch);
  // Alt-O followed by a control: both are keys.
  const next = fromGround(ch);
  return { ...next, keep: pending + next.keep };
}

/** One more character of a CSI (`pending` starts with `ESC [`). */
function inCsi(pending: string, ch: string): Step {
  const code = ch.codePointAt(0) ?? 0;
  // Parameter (0x30–0x3F) and intermediate (0x20–0x2F) bytes: keep reading, within bounds.
  if (code >= 0x20 && code <= 0x3f)
    return pending.length >= MAX_CSI ? hold('csi-skip') : hold('csi', pending + ch);
  if (code >= 0x40 && code <= 0x7e) {
    const params = pending.slice(2);
    // `CSI M` with no parameters is an X10 mouse report: three raw characters follow.
    if (ch === 'M' && params === '') return hold('x10', '', 3);
    return isKeyCsi(params, ch) ? emit(pending + ch) : drop();
  }
  // A control inside a CSI: malformed; skipped with the rest of it.
  return hold('csi-skip');
}

/**
 * The input ends here for now (no frame followed in a short while): decide what was pending. A lone
 * ESC is the Escape key, a bare `ESC [` or `ESC O` is Alt-[ or Alt-O; a half-read CSI, string or
 * mouse report is dropped. Browsers send a report in one piece, so the wait only delays a bare Escape.
 */
export function flushInput(state: InputState): InputResult {
  if (state.mode === 'ground') return { state: INITIAL_INPUT, keep: '', dropped: 0 };
  const key =
    state.mode === 'esc' || ((state.mode === 'csi' || state.mode === 'ss3') && state.pending.length === 2);
  return { state: INITIAL_INPUT, keep: key ? state.pending : '', dropped: key ? 0 : 1 };
}

/** Whether anything is waiting for the next frame (the adapter then arms its flush timer). */
export function inputPending(state: InputState): boolean {
  return state.mode !== 'ground';
}
