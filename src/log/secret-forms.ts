/**
 * The forms of a secret the scrubber masks. Pure: a value in, strings out.
 *
 * A credential is not only leaked whole. An agent that quotes a truncated tool result leaves part of
 * it; `env | base64` or `rev` leave it encoded or reversed. So a key's forms are the key, the key
 * reversed, and its base64 (standard and url-safe) as it appears inside a longer base64 stream — and
 * any run of `RUN` characters of any of these is masked (see secret-index.ts).
 */

/** Any run of this many consecutive characters of a key (or of one of its forms) is masked. */
export const RUN = 12;

/** Shorter values are never registered: they would mask ordinary words. */
export const MIN_SECRET = 8;

/**
 * `key`: a credential — masked whole, in part (runs of `RUN`), reversed and base64-encoded.
 * `exact`: a value secret by where it is configured that may be ordinary text (a URL, a path, a
 * model name read through `env:`): masked only whole, or it would blank out ordinary output.
 */
export type SecretKind = 'key' | 'exact';

/**
 * Whether a value read from a secret place of the config looks like a credential (then it gets the
 * `key` treatment): one printable word, not a URL or a path, with letters and digits.
 */
export function looksLikeKey(value: string): boolean {
  return (
    value.length >= 16 &&
    /^[\x21-\x7e]+$/.test(value) &&
    !value.includes('://') &&
    !/^[/.~]/.test(value) &&
    /[0-9]/.test(value) &&
    /[A-Za-z]/.test(value)
  );
}

/**
 * The base64 characters of `bytes` that do not depend on the bytes around them when they sit
 * `offset` bytes (0–2) past a 3-byte boundary of a longer stream. A value inside base64 output
 * (`env | base64`) is at one of these three alignments; its first and last characters there mix in
 * bits of its neighbours, so only this inner part is stable.
 */
export function base64Inner(bytes: Uint8Array, offset: 0 | 1 | 2): string {
  const padded = Buffer.concat([Buffer.alloc(offset), bytes]);
  const encoded = padded.toString('base64');
  // Character c holds bits [6c, 6c + 6): kept when they all come from `bytes`.
  const start = Math.ceil((8 * offset) / 6);
  const end = Math.floor((8 * (offset + bytes.length)) / 6);
  return encoded.slice(start, end);
}

const toUrlSafe = (base64: string): string => base64.replaceAll('+', '-').replaceAll('/', '_');

/** The value reversed by code point (`rev`, or a model asked to spell it backwards). */
export const reversed = (value: string): string => Array.from(value).reverse().join('');

/** Every form of a value that is masked, each at least `MIN_SECRET` long, without repeats. */
export function secretForms(value: string, kind: SecretKind): string[] {
  const forms = new Set<string>([value]);
  // Inside JSON (stored events, hook lines) a value with a quote or backslash is escaped.
  forms.add(JSON.stringify(value).slice(1, -1));
  if (kind === 'key') {
    forms.add(reversed(value));
    const bytes = Buffer.from(value, 'utf8');
    for (const offset of [0, 1, 2] as const) {
      const inner = base64Inner(bytes, offset);
      forms.add(inner);
      forms.add(toUrlSafe(inner));
    }
  }
  return [...forms].filter((form) => form.length >= MIN_SECRET);
}
