/**
 * Text from outside (GitHub payloads, engine output, stored rows) made safe to show: the one place
 * that knows which characters a terminal acts on instead of showing. Prompts, pastes and every line
 * the CLI prints go through `stripControls`.
 */

// Escape sequences are removed whole, so no printable remnant (`[31m`, `0;title`) is left behind:
// strings (OSC, DCS, SOS, PM, APC, 7- or 8-bit) up to BEL or ST (or the end of the line), then CSI,
// then any other ESC sequence (intermediates and a final byte).
const ESC_STRING =
  /(?:\u001b[\]PX^_]|[\u0090\u0098\u009d\u009e\u009f])[^\u0007\u001b\u009c\n]*(?:\u0007|\u001b\\|\u009c)?/g;
const CSI = /(?:\u001b\[|\u009b)[0-?]*[ -/]*[@-~]?/g;
const ESC_OTHER = /\u001b[ -/]*[0-~]?/g;
/** C0 but tab and newline, DEL, C1: this also takes any ESC left over. */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
/** Bidi overrides and isolates, line and paragraph separators: they reorder or break what is shown. */
const REORDERING = /[\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * Remove escape sequences whole, every C0 control except newline and tab (so `\r` too), DEL, every C1
 * control, and bidi overrides: what is left prints as itself.
 */
export function stripControls(text: string): string {
  return text
    .replace(ESC_STRING, '')
    .replace(CSI, '')
    .replace(ESC_OTHER, '')
    .replace(CONTROL, '')
    .replace(REORDERING, '');
}

/** One line of untrusted text made safe for a terminal: controls removed, newlines and tabs as spaces, length bounded. */
export function oneLine(text: string, max = 160): string {
  const clean = stripControls(text)
    .replace(/[\n\t]+/g, ' ')
    .trim();
  return clean.length > max ? `${clean.slice(0, max - 1)}…` : clean;
}

/**
 * JSON for a terminal or a pipe: `JSON.stringify` escapes C0 controls (ESC becomes `\u001b`) but
 * leaves DEL, C1 controls and bidi overrides raw; these are escaped too. The value is unchanged.
 */
export function toJson(value: unknown, indent?: number): string {
  return (JSON.stringify(value, null, indent) ?? 'null').replace(
    /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** Bytes of untrusted text kept in a prompt (UTF-8: the prompt travels as one argv element). */
export const UNTRUSTED_LIMIT = 64 * 1024;

/** Remove escape sequences and every C0/C1 control character except newline and tab; normalise newlines. */
export function sanitizeUntrusted(text: string, limit = UNTRUSTED_LIMIT): string {
  const clean = stripControls(text.replace(/\r\n?/g, '\n'));
  const bytes = Buffer.byteLength(clean, 'utf8');
  if (bytes <= limit) return clean;
  // Cut at a byte limit without splitting a character (a cut inside one decodes as U+FFFD).
  let cut = Buffer.from(clean, 'utf8').subarray(0, limit).toString('utf8');
  while (cut.endsWith('\uFFFD')) cut = cut.slice(0, -1);
  return `${cut}\n[… ${bytes - Buffer.byteLength(cut, 'utf8')} more bytes not shown]`;
}

/** One line of untrusted text (titles, logins): no newlines at all. */
export const sanitizeLine = (text: string, limit = 300): string =>
  sanitizeUntrusted(text, limit).replace(/[\n\t]+/g, ' ');

/**
 * `1,234,567`: what `toLocaleString('en-US')` writes for an integer, without its cost — the first
 * call of any Intl formatter loads ICU data (~20–100 ms), more than the rest of a command's output.
 * Fixed, never the host's locale: the CLI and the comments the daemon writes on GitHub read the same.
 */
export const formatInt = (n: number): string =>
  Number.isSafeInteger(n) ? String(n).replace(/\B(?=(\d{3})+$)/g, ',') : n.toLocaleString('en-US');
