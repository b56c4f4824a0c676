/**
 * The reading of one candidate transcript line as usage scan did it before it parsed the usage
 * object from its bytes (JSON.parse of the object, Date for the timestamp, Buffer searches on a
 * subarray): the reference the fast reading (src/ledger/scan-record.ts) is checked against, record
 * for record, reason for reason.
 */
import type { ScannedRecord } from '../../src/ledger/scan-file.js';

const USAGE = Buffer.from('"usage":{');
const MESSAGE = Buffer.from('"message":{');
const ID = Buffer.from('"id":"');
const MODEL = Buffer.from('"model":"');
const REQUEST_ID = Buffer.from('"requestId":"');
const TIMESTAMP = Buffer.from('"timestamp":"');
const SESSION_ID = Buffer.from('"sessionId":"');

/** The string value after `key` (no escapes expected in these fields; a backslash rejects it). */
function stringAfter(line: Buffer, at: number, key: Buffer): string | undefined {
  if (at < 0) return undefined;
  const start = at + key.length;
  const end = line.indexOf(0x22, start);
  if (end < 0 || end - start > 512) return undefined;
  const value = line.toString('latin1', start, end);
  return value.includes('\\') ? undefined : value;
}

const OUTPUT = Buffer.from('"output_tokens":');

/** The output count of the line's own usage object, read without parsing it. */
function outputTokensOf(line: Buffer): number | undefined {
  const at = line.indexOf(OUTPUT, line.lastIndexOf(USAGE));
  if (at < 0) return undefined;
  let n = 0;
  let digits = 0;
  for (let i = at + OUTPUT.length; i < line.length && digits < 15; i++, digits++) {
    const c = line[i] as number;
    if (c < 0x30 || c > 0x39) break;
    n = n * 10 + (c - 0x30);
  }
  return digits > 0 ? n : undefined;
}

/** The `{…}` object starting at `open`, by brace depth, skipping strings. */
function objectAt(line: Buffer, open: number): string | undefined {
  let depth = 0;
  let inString = false;
  for (let i = open; i < line.length && i - open < 16_384; i++) {
    const c = line[i];
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b) depth++;
    else if (c === 0x7d) {
      depth--;
      if (depth === 0) return line.toString('utf8', open, i + 1);
    }
  }
  return undefined;
}

const count = (value: unknown): number | undefined =>
  value === undefined || value === null
    ? 0
    : Number.isSafeInteger(value) && (value as number) >= 0
      ? (value as number)
      : undefined;

/**
 * A candidate line → a record, the reason it is unusable, or `null` when its key is in `seen` (a
 * copy: the other fields are not even read). Fields are looked for where Claude Code writes them —
 * ids and model at the start of the message, usage at its end, request id and timestamp after it —
 * so no search walks the whole line.
 */
export function referenceRecordOf(
  line: Buffer,
  seen?: ReadonlyMap<string, ScannedRecord>,
  metered?: ReadonlySet<string>,
): ScannedRecord | string | null {
  const m = line.indexOf(MESSAGE);
  const messageId = m >= 0 ? stringAfter(line, line.indexOf(ID, m), ID) : undefined;
  const first = messageId === undefined ? undefined : seen?.get(messageId);
  if (first) {
    // A copy (one per content block): while the answer streams, early copies can carry a
    // placeholder output count — the largest one seen is the message's.
    const output = outputTokensOf(line);
    if (output !== undefined && output > first[5]) first[5] = output;
    // A copy in a session metered per turn marks the message as that session's (a fork read first).
    if (metered && metered.size > 0 && !metered.has(first[1])) {
      const sessionId = stringAfter(line, line.indexOf(SESSION_ID), SESSION_ID);
      if (sessionId && metered.has(sessionId)) first[1] = sessionId;
    }
    return null;
  }
  const u = line.lastIndexOf(USAGE);
  const text = objectAt(line, u + USAGE.length - 1);
  if (text === undefined) return 'usage object not closed';
  let usage: Record<string, unknown>;
  try {
    usage = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return 'usage object is not JSON';
  }
  const requestId = stringAfter(line, line.indexOf(REQUEST_ID, u), REQUEST_ID);
  const key = messageId ?? requestId;
  if (!key) return 'no message or request id';
  const copyOf = seen?.get(key);
  if (copyOf) {
    const output = count(usage.output_tokens);
    if (output !== undefined && output > copyOf[5]) copyOf[5] = output;
    return null;
  }
  const timestamp = stringAfter(line, line.lastIndexOf(TIMESTAMP), TIMESTAMP);
  if (!timestamp || Number.isNaN(Date.parse(timestamp))) return 'no usable timestamp';
  const input = count(usage.input_tokens);
  const output = count(usage.output_tokens);
  const cacheRead = count(usage.cache_read_input_tokens);
  const cacheCreation = count(usage.cache_creation_input_tokens);
  if (input === undefined || output === undefined || cacheRead === undefined || cacheCreation === undefined) {
    return 'a token count is not a non-negative whole number';
  }
  return [
    key,
    stringAfter(line, line.indexOf(SESSION_ID), SESSION_ID) ?? '',
    new Date(timestamp).toISOString(),
    stringAfter(line, line.indexOf(MODEL, Math.max(m, 0)), MODEL) ?? '',
    input,
    output,
    cacheRead,
    cacheCreation,
    oneHourWrites(usage.cache_creation, cacheCreation),
  ];
}

/** The 1-hour cache writes of a usage object's `cache_creation` split: a part of `total`, never more. */
function oneHourWrites(split: unknown, total: number): number {
  if (typeof split !== 'object' || split === null) return 0;
  const oneHour = count((split as Record<string, unknown>).ephemeral_1h_input_tokens);
  return oneHour === undefined ? 0 : Math.min(oneHour, total);
}
