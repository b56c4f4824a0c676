import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

export interface LogSink {
  write(line: string): void;
  close?(): void;
}

/** Keys whose values are never written, whatever they hold (an env, a credential, a header). */
const SECRET_KEY =
  /(^env$|environment|secret|token|password|passwd|api[-_]?key|authorization|credential|cookie)/i;

/**
 * Remove secret-bearing keys from a value before it is logged. Strings are passed through the
 * scrubber, which masks any known secret value in any of its forms (see `SecretScrubber`).
 */
export function sanitizeForLog(value: unknown, scrub: (text: string) => string, depth = 0): unknown {
  if (depth > 6) return '[deep]';
  if (typeof value === 'string') return scrub(value);
  if (Array.isArray(value)) return value.slice(0, 50).map((v) => sanitizeForLog(v, scrub, depth + 1));
  if (value instanceof Error) return { name: value.name, message: scrub(value.message) };
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) {
      out[key] = SECRET_KEY.test(key) ? '[redacted]' : sanitizeForLog(inner, scrub, depth + 1);
    }
    return out;
  }
  return value;
}

export { SecretScrubber } from './secret-scrubber.js';

export function fileSink(path: string): LogSink {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  // Opened once (not per line): the daemon logs on every delivery.
  let fd: number | null = openSync(path, 'a', 0o600);
  return {
    write: (line) => {
      if (fd !== null) writeSync(fd, line);
    },
    close: () => {
      if (fd !== null) closeSync(fd);
      fd = null;
    },
  };
}

export const memorySink = (): LogSink & { lines: string[] } => {
  const lines: string[] = [];
  return { lines, write: (line) => lines.push(line) };
};

/** A leveled logger writing one JSON object per line. */
export function createLogger(options: {
  level: LogLevel;
  sinks: LogSink[];
  scrub?: (text: string) => string;
  fields?: LogFields;
  now?: () => Date;
}): Logger {
  const scrub = options.scrub ?? ((t: string) => t);
  const now = options.now ?? (() => new Date());
  const base = options.fields ?? {};
  const emit = (level: LogLevel, message: string, fields?: LogFields) => {
    if (ORDER[level] < ORDER[options.level]) return;
    const record = {
      time: now().toISOString(),
      level,
      msg: scrub(message),
      ...(sanitizeForLog({ ...base, ...fields }, scrub) as LogFields),
    };
    const line = `${JSON.stringify(record)}\n`;
    for (const sink of options.sinks) {
      try {
        sink.write(line);
      } catch {
        // A log sink that fails (disk full) must not take the daemon down with it.
      }
    }
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger({ ...options, fields: { ...base, ...fields } }),
  };
}

export const nullLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => nullLogger,
};
