import { createHash } from 'node:crypto';
import { emptyUsage, type Usage } from '../core/events.js';

/**
 * OTLP/HTTP JSON payloads (`/v1/logs`, `/v1/metrics`) read into usage records. Pure: no I/O.
 *
 * The vocabulary is Claude Code's (observed with 2.1.197, see docs/engines.md): a log event
 * `claude_code.api_request` per model request (model, token counts, `cost_usd`, `request_id`), and
 * delta counters `claude_code.token.usage` (attribute `type`: input / output / cacheRead /
 * cacheCreation) and `claude_code.cost.usage` (USD). Events and metrics are recognised by their
 * suffix (`.api_request`, `.token.usage`, `.cost.usage`), so an engine speaking the same vocabulary
 * under another prefix is read too. Everything else is accepted and ignored.
 *
 * Every record that cannot be read is counted as rejected with a reason; what could be read is kept.
 */

export interface OtelUsageRecord {
  /** Stable per request or per export window: re-posting the same data adds nothing. */
  sourceId: string;
  at: string;
  /** The engine's own session id (`session.id`), when the record carries one. */
  engineSessionId: string | null;
  model: string | null;
  usage: Usage;
  /** The engine's own cost figure (USD), when it gave one. */
  costUsd: number | null;
}

export interface OtelParse {
  records: OtelUsageRecord[];
  /** Records (log records or data points) that were about usage but could not be read. */
  rejected: number;
  /** One line per kind of problem, with a count; never the values. */
  warnings: string[];
}

type Attr = string | number | boolean | null;

/** An OTLP `AnyValue`: only scalars are read (arrays and maps are not used for usage). */
function anyValue(v: unknown): Attr {
  if (!v || typeof v !== 'object') return null;
  const o = v as Record<string, unknown>;
  if (typeof o.stringValue === 'string') return o.stringValue;
  // int64 is a JSON string in OTLP/JSON (numbers are accepted too).
  if (typeof o.intValue === 'string' && /^-?\d{1,19}$/.test(o.intValue)) return Number(o.intValue);
  if (typeof o.intValue === 'number') return o.intValue;
  if (typeof o.doubleValue === 'number') return o.doubleValue;
  if (typeof o.doubleValue === 'string' && o.doubleValue.trim() !== '') {
    const n = Number(o.doubleValue);
    return Number.isFinite(n) ? n : null;
  }
  if (typeof o.boolValue === 'boolean') return o.boolValue;
  return null;
}

function attributes(list: unknown, into: Map<string, Attr> = new Map()): Map<string, Attr> {
  if (!Array.isArray(list)) return into;
  for (const kv of list.slice(0, 256)) {
    if (!kv || typeof kv !== 'object') continue;
    const { key, value } = kv as { key?: unknown; value?: unknown };
    if (typeof key === 'string' && key.length <= 256) into.set(key, anyValue(value));
  }
  return into;
}

const asArray = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: Attr | undefined): string | null =>
  typeof v === 'string' && v.length > 0 && v.length <= 256 ? v : null;

/**
 * A token count: absent is 0; a non-negative safe integer is itself; anything else (an unreadable
 * value included) is undefined, and the record is rejected — never read as 0.
 */
function count(v: Attr | undefined): number | undefined {
  if (v === undefined) return 0;
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined;
}

const MIN_TIME = Date.UTC(2000, 0, 1);
const MAX_SKEW_MS = 24 * 3600_000;

/**
 * A record's time from its nanosecond timestamp (or an ISO `event.timestamp`). A time before 2000 or
 * more than a day in the future is a skewed clock: the receive time is used, with a warning.
 */
function timeOf(nanos: unknown, iso: Attr | undefined, now: number, problems: Problems): string {
  let ms = Number.NaN;
  if (typeof iso === 'string') ms = Date.parse(iso);
  if (!Number.isFinite(ms) && (typeof nanos === 'string' || typeof nanos === 'number')) {
    const text = String(nanos);
    if (/^\d{1,20}$/.test(text)) ms = Number(text.length > 6 ? text.slice(0, -6) : '0');
  }
  if (!Number.isFinite(ms) || ms < MIN_TIME || ms > now + MAX_SKEW_MS) {
    problems.note('records with a missing or implausible timestamp were dated when received (clock skew?)');
    return new Date(now).toISOString();
  }
  return new Date(ms).toISOString();
}

class Problems {
  private readonly counts = new Map<string, number>();
  rejected = 0;
  note(what: string): void {
    this.counts.set(what, (this.counts.get(what) ?? 0) + 1);
  }
  reject(why: string, n = 1): void {
    this.rejected += n;
    this.counts.set(why, (this.counts.get(why) ?? 0) + n);
  }
  lines(): string[] {
    return [...this.counts].map(([what, n]) => `${n} × ${what}`);
  }
}

const sha = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 24);

/** `/v1/logs`: one record per `*.api_request` event. */
export function parseOtlpLogs(body: unknown, now = Date.now()): OtelParse {
  const problems = new Problems();
  const records: OtelUsageRecord[] = [];
  if (
    !body ||
    typeof body !== 'object' ||
    !Array.isArray((body as { resourceLogs?: unknown }).resourceLogs)
  ) {
    return { records, rejected: 0, warnings: ['not an OTLP logs payload (no resourceLogs array)'] };
  }
  for (const resourceLogs of asArray((body as { resourceLogs: unknown }).resourceLogs)) {
    const r = (resourceLogs ?? {}) as Record<string, unknown>;
    const resource = attributes((r.resource as Record<string, unknown> | undefined)?.attributes);
    for (const scopeLogs of asArray(r.scopeLogs)) {
      for (const logRecord of asArray((scopeLogs as Record<string, unknown> | null)?.logRecords)) {
        if (!logRecord || typeof logRecord !== 'object') continue;
        const l = logRecord as Record<string, unknown>;
        const a = attributes(l.attributes, new Map(resource));
        const bodyName = anyValue(l.body);
        const name = str(a.get('event.name')) ?? (typeof bodyName === 'string' ? bodyName : '');
        if (name !== 'api_request' && !name.endsWith('.api_request')) continue;
        const input = count(a.get('input_tokens'));
        const output = count(a.get('output_tokens'));
        const cacheRead = count(a.get('cache_read_tokens'));
        const cacheCreation = count(a.get('cache_creation_tokens'));
        if (
          input === undefined ||
          output === undefined ||
          cacheRead === undefined ||
          cacheCreation === undefined
        ) {
          problems.reject('api_request events with a token count that is not a non-negative integer');
          continue;
        }
        const cost = a.get('cost_usd');
        const engineSessionId = str(a.get('session.id'));
        const requestId = str(a.get('request_id'));
        const sequence = a.get('event.sequence');
        const promptId = str(a.get('prompt.id'));
        // Without a request id, the session, prompt and sequence number identify it (the sequence
        // restarts with each engine process, the prompt id does not repeat); failing that, its own
        // content (a re-post of the same record is still the same record).
        const sourceId = requestId
          ? `log:${requestId}`
          : engineSessionId && promptId && typeof sequence === 'number'
            ? `log:${engineSessionId}:${promptId}:${sequence}`
            : `log:sha:${sha(JSON.stringify(l))}`;
        records.push({
          sourceId,
          at: timeOf(l.timeUnixNano, a.get('event.timestamp'), now, problems),
          engineSessionId,
          model: str(a.get('model')),
          usage: {
            inputTokens: input,
            outputTokens: output,
            cacheReadTokens: cacheRead,
            cacheCreationTokens: cacheCreation,
            reasoningTokens: 0,
          },
          costUsd: typeof cost === 'number' && Number.isFinite(cost) && cost >= 0 ? cost : null,
        });
      }
    }
  }
  return { records, rejected: problems.rejected, warnings: problems.lines() };
}

const TOKEN_TYPES: Record<string, keyof Usage> = {
  input: 'inputTokens',
  output: 'outputTokens',
  cacheRead: 'cacheReadTokens',
  cacheCreation: 'cacheCreationTokens',
  reasoning: 'reasoningTokens',
};

const DELTA = 1;

/**
 * `/v1/metrics`: the `*.token.usage` and `*.cost.usage` data points of one export (same time) and
 * one (session, model) become one record. Only delta temporality is read: a cumulative counter would
 * count everything again at each export.
 */
export function parseOtlpMetrics(body: unknown, now = Date.now()): OtelParse {
  const problems = new Problems();
  if (
    !body ||
    typeof body !== 'object' ||
    !Array.isArray((body as { resourceMetrics?: unknown }).resourceMetrics)
  ) {
    return { records: [], rejected: 0, warnings: ['not an OTLP metrics payload (no resourceMetrics array)'] };
  }
  const windows = new Map<string, OtelUsageRecord>();
  for (const resourceMetrics of asArray((body as { resourceMetrics: unknown }).resourceMetrics)) {
    const r = (resourceMetrics ?? {}) as Record<string, unknown>;
    const resource = attributes((r.resource as Record<string, unknown> | undefined)?.attributes);
    for (const scopeMetrics of asArray(r.scopeMetrics)) {
      for (const metric of asArray((scopeMetrics as Record<string, unknown> | null)?.metrics)) {
        if (!metric || typeof metric !== 'object') continue;
        const m = metric as Record<string, unknown>;
        const name = typeof m.name === 'string' ? m.name : '';
        const isTokens = name.endsWith('.token.usage');
        const isCost = name.endsWith('.cost.usage');
        if (!isTokens && !isCost) continue;
        const sum = (m.sum ?? null) as Record<string, unknown> | null;
        const points = asArray(sum?.dataPoints);
        if (sum?.aggregationTemporality !== DELTA) {
          if (points.length > 0)
            problems.reject(
              `${name} points that are not delta counters (set the exporter's temporality to delta)`,
              points.length,
            );
          continue;
        }
        for (const point of points) {
          if (!point || typeof point !== 'object') continue;
          const p = point as Record<string, unknown>;
          const a = attributes(p.attributes, new Map(resource));
          const value = typeof p.asDouble === 'number' ? p.asDouble : anyValue({ intValue: p.asInt });
          if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
            problems.reject(`${name} points without a non-negative value`);
            continue;
          }
          const engineSessionId = str(a.get('session.id'));
          const model = str(a.get('model'));
          // One export: every point of it has the export's time (their start times differ: each
          // counter's window starts at its own first increment).
          const end = String(p.timeUnixNano ?? '');
          const key = `${engineSessionId ?? ''}\u0000${model ?? ''}\u0000${end}`;
          let record = windows.get(key);
          if (!record) {
            record = {
              sourceId: `metric:${sha(key)}`,
              at: timeOf(p.timeUnixNano, undefined, now, problems),
              engineSessionId,
              model,
              usage: emptyUsage(),
              costUsd: null,
            };
            windows.set(key, record);
          }
          if (isCost) {
            record.costUsd = (record.costUsd ?? 0) + value;
            continue;
          }
          const type = str(a.get('type'));
          const field = type && Object.hasOwn(TOKEN_TYPES, type) ? TOKEN_TYPES[type] : undefined;
          if (!field || !Number.isSafeInteger(value)) {
            problems.reject(`${name} points of an unknown type or with a fractional count`);
            continue;
          }
          record.usage[field] += value;
        }
      }
    }
  }
  return { records: [...windows.values()], rejected: problems.rejected, warnings: problems.lines() };
}
