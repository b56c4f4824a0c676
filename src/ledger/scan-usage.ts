/**
 * The usage object of a transcript record, read from its bytes without JSON.parse: a parser of the
 * JSON `JSON.stringify` writes (Claude Code's transcripts) — no whitespace, strings without
 * escapes, whole non-negative numbers of up to 15 digits. It checks the whole object as JSON.parse
 * would and keeps the counts the ledger needs; anything it does not read (whitespace, an escape, a
 * number like `1.0`, `-5` or `1e3`, a broken object, one over 16 KB) makes it answer false, and the
 * caller hands the object to JSON.parse instead. So when it answers true, the figures are exactly
 * what JSON.parse's object would give (a repeated key: the last one counts, as there).
 */

/** A count that is absent or null (read as 0), or present and no whole number (not a count). */
export const ABSENT = -1;
export const NOT_A_COUNT = -2;

/** The figures of the last object `parseUsage` read (whole numbers, ABSENT or NOT_A_COUNT). */
export const USAGE_FIELDS = {
  input: ABSENT,
  output: ABSENT,
  cacheRead: ABSENT,
  cacheCreation: ABSENT,
  oneHour: ABSENT,
};

type Field = 'input' | 'output' | 'cacheRead' | 'cacheCreation' | 'oneHour';

const TOP_KEYS: ReadonlyArray<[Buffer, Field | 'split']> = [
  [Buffer.from('input_tokens'), 'input'],
  [Buffer.from('output_tokens'), 'output'],
  [Buffer.from('cache_read_input_tokens'), 'cacheRead'],
  [Buffer.from('cache_creation_input_tokens'), 'cacheCreation'],
  [Buffer.from('cache_creation'), 'split'],
];
const ONE_HOUR: ReadonlyArray<[Buffer, Field | 'split']> = [
  [Buffer.from('ephemeral_1h_input_tokens'), 'oneHour'],
];

/** What a value was: a whole number (>= 0), or one of these. */
const NULL_VALUE = -1;
const OTHER = -2;
const FAIL = -3;
/** Deeper than this, the object is left to JSON.parse. */
const MAX_DEPTH = 32;

/** The parser's state: the bytes, where it is, and where it must stop. */
let b: Buffer = Buffer.alloc(0);
let p = 0;
let lim = 0;

/** Read the object whose `{` is at `open` (within `end` and 16 KB); false: leave it to JSON.parse. */
export function parseUsage(buf: Buffer, open: number, end: number): boolean {
  const f = USAGE_FIELDS;
  f.input = ABSENT;
  f.output = ABSENT;
  f.cacheRead = ABSENT;
  f.cacheCreation = ABSENT;
  f.oneHour = ABSENT;
  b = buf;
  p = open;
  lim = Math.min(end, open + 16_384);
  return open >= 0 && b[p] === 0x7b && object(TOP_KEYS, 0) !== FAIL;
}

/** The key at `p` (its opening quote): which of `keys` it is (-1: another), FAIL when no plain string. */
function key(keys: ReadonlyArray<[Buffer, Field | 'split']> | null): number {
  const start = p + 1;
  if (string() === FAIL) return FAIL;
  if (keys === null) return -1;
  const length = p - 1 - start;
  for (let k = 0; k < keys.length; k++) {
    const name = (keys[k] as [Buffer, Field | 'split'])[0];
    if (name.length !== length) continue;
    let i = 0;
    while (i < length && b[start + i] === name[i]) i++;
    if (i === length) return k;
  }
  return -1;
}

/** An object at `p`; the counts of `keys` (null: none wanted) are kept in USAGE_FIELDS. */
function object(keys: ReadonlyArray<[Buffer, Field | 'split']> | null, depth: number): number {
  if (depth > MAX_DEPTH) return FAIL;
  p++;
  if (p < lim && b[p] === 0x7d) {
    p++;
    return OTHER;
  }
  for (;;) {
    if (p >= lim || b[p] !== 0x22) return FAIL;
    const k = key(keys);
    if (k === FAIL || p >= lim || b[p] !== 0x3a) return FAIL;
    p++;
    const field = k >= 0 && keys ? (keys[k] as [Buffer, Field | 'split'])[1] : undefined;
    let v: number;
    if (field === 'split') {
      // The cache writes by lifetime: a new `cache_creation` replaces what an earlier one said.
      USAGE_FIELDS.oneHour = ABSENT;
      v = p < lim && b[p] === 0x7b ? object(ONE_HOUR, depth + 1) : value(depth + 1);
    } else v = value(depth + 1);
    if (v === FAIL) return FAIL;
    if (field !== undefined && field !== 'split') {
      USAGE_FIELDS[field] = v >= 0 ? v : v === NULL_VALUE ? ABSENT : NOT_A_COUNT;
    }
    if (p >= lim) return FAIL;
    const c = b[p++];
    if (c === 0x7d) return OTHER;
    if (c !== 0x2c) return FAIL;
  }
}

function array(depth: number): number {
  if (depth > MAX_DEPTH) return FAIL;
  p++;
  if (p < lim && b[p] === 0x5d) {
    p++;
    return OTHER;
  }
  for (;;) {
    if (value(depth + 1) === FAIL || p >= lim) return FAIL;
    const c = b[p++];
    if (c === 0x5d) return OTHER;
    if (c !== 0x2c) return FAIL;
  }
}

/** A string at `p` without escapes or control characters (which JSON.parse is left to judge). */
function string(): number {
  for (let i = p + 1; i < lim; i++) {
    const c = b[i] as number;
    if (c === 0x22) {
      p = i + 1;
      return OTHER;
    }
    if (c === 0x5c || c < 0x20) return FAIL;
  }
  return FAIL;
}

/** A whole number of up to 15 digits (exact in a double); anything else is left to JSON.parse. */
function number(): number {
  let n = 0;
  const start = p;
  while (p < lim) {
    const c = b[p] as number;
    if (c < 0x30 || c > 0x39) break;
    n = n * 10 + (c - 0x30);
    p++;
  }
  const digits = p - start;
  if (digits === 0 || digits > 15 || (digits > 1 && b[start] === 0x30)) return FAIL;
  // A fraction or an exponent: JSON.parse decides what it is.
  if (p < lim && (b[p] === 0x2e || b[p] === 0x65 || b[p] === 0x45)) return FAIL;
  return n;
}

const literal = (text: Buffer, result: number): number => {
  if (p + text.length > lim) return FAIL;
  for (let i = 0; i < text.length; i++) if (b[p + i] !== text[i]) return FAIL;
  p += text.length;
  return result;
};
const TRUE = Buffer.from('true');
const FALSE = Buffer.from('false');
const NULL = Buffer.from('null');

function value(depth: number): number {
  if (p >= lim) return FAIL;
  const c = b[p] as number;
  if (c === 0x22) return string();
  if (c >= 0x30 && c <= 0x39) return number();
  if (c === 0x7b) return object(null, depth);
  if (c === 0x5b) return array(depth);
  if (c === 0x74) return literal(TRUE, OTHER);
  if (c === 0x66) return literal(FALSE, OTHER);
  if (c === 0x6e) return literal(NULL, NULL_VALUE);
  return FAIL;
}
