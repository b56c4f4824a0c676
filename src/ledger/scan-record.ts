/**
 * One candidate line of a Claude Code transcript (an `assistant` record with a `"usage":{` key; see
 * scan-file.ts) → the usage record the ledger needs, read from the bytes where they are: only the
 * ids, the model, the timestamp, the session id and the usage object's counts are decoded, nothing
 * else of the line. The usage object (~250 bytes) is read by a small parser of the JSON that
 * `JSON.stringify` writes — no whitespace, no escapes, whole non-negative numbers — which hands
 * anything else (a space, an escape, `1.0`, `-5`, `1e3`, a broken object) to `JSON.parse`, so the
 * result is always what `JSON.parse` would give. Likewise a timestamp already in the form
 * `toISOString` writes is taken as it is, and any other goes through `Date`.
 *
 * Why byte patterns are safe here: inside a JSON string a quote is escaped (`\"`), so the literal
 * `"usage":{` or `"type":"assistant"` can only be a key or value of the record's own objects.
 * The record's own `message.usage` is the last `"usage":{` of its line (it follows the content).
 */

import { ABSENT, NOT_A_COUNT, parseUsage, USAGE_FIELDS } from './scan-usage.js';

/**
 * key, session id, time, model, input, output, cache read, cache write — and of the cache writes,
 * those written for an hour (`usage.cache_creation.ephemeral_1h_input_tokens`; 0 when not said).
 */
export type ScannedRecord = [string, string, string, string, number, number, number, number, number];

export const USAGE = Buffer.from('"usage":{');
const MESSAGE = Buffer.from('"message":{');
const ID = Buffer.from('"id":"');
const MODEL = Buffer.from('"model":"');
const REQUEST_ID = Buffer.from('"requestId":"');
const TIMESTAMP = Buffer.from('"timestamp":"');
const SESSION_ID = Buffer.from('"sessionId":"');
const OUTPUT = Buffer.from('"output_tokens":');

/** Where `needle` first starts in `buf[from, end)`, or -1 (a line never holds a needle's `\n`). */
export function indexIn(buf: Buffer, needle: Buffer, from: number, end: number): number {
  const at = buf.indexOf(needle, from);
  return at >= 0 && at + needle.length <= end ? at : -1;
}

/** Where `needle` last starts in `buf[start, end)` at or before `before`, or -1. */
export function lastIndexIn(buf: Buffer, needle: Buffer, start: number, end: number, before = end): number {
  const from = Math.min(before, end - needle.length);
  if (from < start) return -1;
  const at = buf.lastIndexOf(needle, from);
  return at >= start ? at : -1;
}

/**
 * The string value that starts at `from` (after a key's opening quote), up to its closing quote
 * within `end`: undefined when it holds a backslash (no escapes expected in these fields) or is
 * longer than 512 bytes.
 */
function stringAt(buf: Buffer, from: number, end: number): string | undefined {
  const stop = Math.min(end, from + 513);
  for (let i = from; i < stop; i++) {
    const c = buf[i];
    if (c === 0x22) return buf.toString('latin1', from, i);
    if (c === 0x5c) return undefined;
  }
  return undefined;
}

/** The string value after the key found at `at` (-1: none). */
const stringAfter = (buf: Buffer, at: number, key: Buffer, end: number): string | undefined =>
  at < 0 ? undefined : stringAt(buf, at + key.length, end);

/** Does `buf` hold `needle` at `at`? */
function holds(buf: Buffer, at: number, needle: Buffer): boolean {
  if (at + needle.length > buf.length) return false;
  for (let i = 0; i < needle.length; i++) if (buf[at + i] !== needle[i]) return false;
  return true;
}

const count = (value: unknown): number | undefined =>
  value === undefined || value === null
    ? 0
    : Number.isSafeInteger(value) && (value as number) >= 0
      ? (value as number)
      : undefined;

/** A count the parser found: absent or null (0), a whole number, or something that is no count. */
const countOf = (n: number): number | undefined => (n === ABSENT ? 0 : n === NOT_A_COUNT ? undefined : n);

/** The usage object's figures (as `count` reads them), from the fast parser or from JSON.parse. */
interface UsageFigures {
  input: number | undefined;
  output: number | undefined;
  cacheRead: number | undefined;
  cacheCreation: number | undefined;
  /** `cache_creation.ephemeral_1h_input_tokens` as `count` reads it (undefined: not a count). */
  oneHour: number | undefined;
}

/** The usage object at `open` (its `{`): its figures, or why it is unusable. */
function usageAt(buf: Buffer, open: number, end: number): UsageFigures | string {
  if (parseUsage(buf, open, end)) {
    const f = USAGE_FIELDS;
    return {
      input: countOf(f.input),
      output: countOf(f.output),
      cacheRead: countOf(f.cacheRead),
      cacheCreation: countOf(f.cacheCreation),
      oneHour: countOf(f.oneHour),
    };
  }
  const text = objectAt(buf, open, end);
  if (text === undefined) return 'usage object not closed';
  let usage: Record<string, unknown>;
  try {
    usage = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return 'usage object is not JSON';
  }
  const split = usage.cache_creation;
  return {
    input: count(usage.input_tokens),
    output: count(usage.output_tokens),
    cacheRead: count(usage.cache_read_input_tokens),
    cacheCreation: count(usage.cache_creation_input_tokens),
    oneHour:
      typeof split === 'object' && split !== null
        ? count((split as Record<string, unknown>).ephemeral_1h_input_tokens)
        : 0,
  };
}

/** The `{…}` object starting at `open`, by brace depth, skipping strings (within 16 KB of the line). */
function objectAt(buf: Buffer, open: number, end: number): string | undefined {
  let depth = 0;
  let inString = false;
  for (let i = open; i < end && i - open < 16_384; i++) {
    const c = buf[i];
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b) depth++;
    else if (c === 0x7d) {
      depth--;
      if (depth === 0) return buf.toString('utf8', open, i + 1);
    }
  }
  return undefined;
}

/** The output count of the usage object at `u`, read without parsing it. */
function outputTokensAt(buf: Buffer, u: number, end: number): number | undefined {
  if (u < 0) return undefined;
  const at = indexIn(buf, OUTPUT, u, end);
  if (at < 0) return undefined;
  let n = 0;
  let digits = 0;
  for (let i = at + OUTPUT.length; i < end && digits < 15; i++, digits++) {
    const c = buf[i] as number;
    if (c < 0x30 || c > 0x39) break;
    n = n * 10 + (c - 0x30);
  }
  return digits > 0 ? n : undefined;
}

/** Where `toISOString`'s form has digits. */
const DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22];
const DIGIT = (c: number | undefined) => c !== undefined && c >= 0x30 && c <= 0x39;
const two = (buf: Buffer, at: number) => ((buf[at] as number) - 0x30) * 10 + ((buf[at + 1] as number) - 0x30);

/**
 * The timestamp as the ledger stores it (`toISOString`), or undefined when it is no date. One already
 * in that form (`2026-11-20T10:00:00.000Z`, a day up to the 28th) is taken as it is.
 */
function timestampAt(buf: Buffer, from: number, end: number): string | undefined {
  if (from + 25 <= end && buf[from + 24] === 0x22 && canonical(buf, from)) {
    return buf.toString('latin1', from, from + 24);
  }
  const text = stringAt(buf, from, end);
  if (!text || Number.isNaN(Date.parse(text))) return undefined;
  return new Date(text).toISOString();
}

function canonical(buf: Buffer, at: number): boolean {
  for (const i of DIGITS) if (!DIGIT(buf[at + i])) return false;
  if (buf[at + 4] !== 0x2d || buf[at + 7] !== 0x2d || buf[at + 10] !== 0x54) return false;
  if (buf[at + 13] !== 0x3a || buf[at + 16] !== 0x3a || buf[at + 19] !== 0x2e || buf[at + 23] !== 0x5a)
    return false;
  // A day up to the 28th is in every month: a later one goes through Date.
  const month = two(buf, at + 5);
  const day = two(buf, at + 8);
  const hms = two(buf, at + 11) <= 23 && two(buf, at + 14) <= 59 && two(buf, at + 17) <= 59;
  return month >= 1 && month <= 12 && day >= 1 && day <= 28 && hms;
}

/**
 * The candidate line `buf[start, end)` → a record, the reason it is unusable, or `null` when its
 * key is in `seen` (a copy: the other fields are not even read). `u`: where its last `"usage":{`
 * starts (-1: none), when the caller knows. Fields are looked for where Claude Code writes them —
 * ids and model at the start of the message, usage at its end, request id and timestamp after it —
 * so no search walks the whole line.
 */
export function recordAt(
  buf: Buffer,
  start: number,
  end: number,
  seen?: ReadonlyMap<string, ScannedRecord>,
  metered?: ReadonlySet<string>,
  u = lastIndexIn(buf, USAGE, start, end),
): ScannedRecord | string | null {
  const m = indexIn(buf, MESSAGE, start, end);
  const idAt =
    m < 0 ? -1 : holds(buf, m + MESSAGE.length, ID) ? m + MESSAGE.length : indexIn(buf, ID, m, end);
  const messageId = m < 0 ? undefined : stringAfter(buf, idAt, ID, end);
  const first = messageId === undefined ? undefined : seen?.get(messageId);
  if (first) {
    // A copy (one per content block): while the answer streams, early copies can carry a
    // placeholder output count — the largest one seen is the message's.
    const output = outputTokensAt(buf, u, end);
    if (output !== undefined && output > first[5]) first[5] = output;
    // A copy in a session metered per turn marks the message as that session's (a fork read first).
    if (metered && metered.size > 0 && !metered.has(first[1])) {
      const sessionId = stringAfter(buf, indexIn(buf, SESSION_ID, start, end), SESSION_ID, end);
      if (sessionId && metered.has(sessionId)) first[1] = sessionId;
    }
    return null;
  }
  return firstRecord(buf, start, end, u, m, messageId, seen);
}

/** A line whose message id is not in `seen`: its record (or a copy found by its request id). */
function firstRecord(
  buf: Buffer,
  start: number,
  end: number,
  u: number,
  m: number,
  messageId: string | undefined,
  seen?: ReadonlyMap<string, ScannedRecord>,
): ScannedRecord | string | null {
  // No usage key (a caller's line, never the scan's): where JSON.parse was asked to look before.
  const usage = usageAt(buf, (u < 0 ? start - 1 : u) + USAGE.length - 1, end);
  if (typeof usage === 'string') return usage;
  const requestId = u < 0 ? undefined : stringAfter(buf, indexIn(buf, REQUEST_ID, u, end), REQUEST_ID, end);
  const key = messageId ?? requestId;
  if (!key) return 'no message or request id';
  const copyOf = seen?.get(key);
  if (copyOf) {
    if (usage.output !== undefined && usage.output > copyOf[5]) copyOf[5] = usage.output;
    return null;
  }
  const t = lastIndexIn(buf, TIMESTAMP, start, end);
  const timestamp = t < 0 ? undefined : timestampAt(buf, t + TIMESTAMP.length, end);
  if (timestamp === undefined) return 'no usable timestamp';
  const { input, output, cacheRead, cacheCreation, oneHour } = usage;
  if (input === undefined || output === undefined || cacheRead === undefined || cacheCreation === undefined) {
    return 'a token count is not a non-negative whole number';
  }
  return [
    key,
    stringAfter(buf, indexIn(buf, SESSION_ID, start, end), SESSION_ID, end) ?? '',
    timestamp,
    stringAfter(buf, indexIn(buf, MODEL, Math.max(m, start), end), MODEL, end) ?? '',
    input,
    output,
    cacheRead,
    cacheCreation,
    oneHour === undefined ? 0 : Math.min(oneHour, cacheCreation),
  ];
}

/** One candidate line (a whole buffer) → a record, why it is unusable, or null for a copy (see recordAt). */
export function recordOf(
  line: Buffer,
  seen?: ReadonlyMap<string, ScannedRecord>,
  metered?: ReadonlySet<string>,
): ScannedRecord | string | null {
  return recordAt(line, 0, line.length, seen, metered);
}
