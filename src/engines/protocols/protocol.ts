import type { z } from 'zod';
import type { TurnEvent } from '../../core/events.js';

/**
 * A protocol turns an engine's stdout into TurnEvents. `jsonl` protocols get one complete line at a
 * time (see LineReader); `text` protocols get raw decoded text. Parsers hold only per-turn state and
 * do no I/O.
 */
export interface ProtocolParser {
  /** One complete line (jsonl) or one decoded chunk (text). */
  push(input: string): TurnEvent[];
  /** End of output. */
  end(): TurnEvent[];
}

export interface Protocol {
  framing: 'jsonl' | 'text';
  /** True when the protocol has its own end-of-turn event (else process exit ends the turn). */
  hasResultEvent: boolean;
  create(): ProtocolParser;
}

/** Bound on any text we keep from an engine (tool output summaries, error messages). */
export const SUMMARY_LIMIT = 2000;

/** JSON.stringify that never throws (JSON.parse accepts nesting JSON.stringify overflows on). */
export function safeStringify(value: unknown): string {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '[value too deeply nested or not serialisable]';
  }
}

export function summarize(value: unknown, limit = SUMMARY_LIMIT): string {
  let text: string;
  if (typeof value === 'string') text = value;
  else if (Array.isArray(value)) {
    text = value
      .map((part) =>
        part && typeof part === 'object' && 'text' in part && typeof part.text === 'string'
          ? part.text
          : safeStringify(part),
      )
      .join('\n');
  } else if (value === undefined || value === null) text = '';
  else text = safeStringify(value);
  if (text.length <= limit) return text;
  // A V8 slice keeps its whole parent string alive; copy the excerpt so a kept summary does not pin
  // a huge tool output in memory.
  const excerpt = Buffer.from(text.slice(0, limit), 'utf8').toString('utf8');
  return `${excerpt}… [${text.length - limit} more chars]`;
}

const num = (value: unknown): number =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0;

export { num as nonNegative };

/**
 * A hand-written mirror of the schemas, for the hot path: true only for a value of a known type that
 * its type's schema accepts, and then the caller reads the parsed value as it is (only the schema's
 * fields).
 */
export type QuickCheck = (type: string, value: Record<string, unknown>) => boolean;

/**
 * Decode and validate one JSON line: a diagnostic for anything that is not a JSON object with a
 * string `type`, or that fails the schema given for its type. Unknown types yield `null` (tolerated).
 * With `check`, a value it accepts skips the schema; any other value goes to the schema, which
 * decides and words the error — a check too strict costs time, never a result.
 */
export function decodeLine<T>(
  line: string,
  schemas: Record<string, z.ZodType<T>>,
  check?: QuickCheck,
): { ok: true; value: T; type: string } | { ok: false; event: TurnEvent | null } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    // A blank line is no event (JSON.parse refuses it too: it is tested only then, off the hot path).
    if (line.trim() === '') return { ok: false, event: null };
    return { ok: false, event: { type: 'diagnostic', message: `not JSON: ${summarize(line, 200)}` } };
  }
  if (
    !parsed ||
    typeof parsed !== 'object' ||
    Array.isArray(parsed) ||
    typeof (parsed as { type?: unknown }).type !== 'string'
  ) {
    return {
      ok: false,
      event: { type: 'diagnostic', message: `not an event object: ${summarize(line, 200)}` },
    };
  }
  const type = (parsed as { type: string }).type;
  if (check?.(type, parsed as Record<string, unknown>)) return { ok: true, value: parsed as T, type };
  const schema = Object.hasOwn(schemas, type) ? schemas[type] : undefined;
  if (!schema) return { ok: false, event: null };
  const result = schema.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue?.path.length ? issue.path.join('.') : '(root)';
    return {
      ok: false,
      event: { type: 'diagnostic', message: `bad "${type}" event: ${where}: ${issue?.message ?? 'invalid'}` },
    };
  }
  return { ok: true, value: result.data, type };
}
