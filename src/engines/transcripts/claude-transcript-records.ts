/**
 * Claude Code transcript records as TurnEvents (the mapping half of `claude-transcript.ts`, which
 * reads the files `$CLAUDE_CONFIG_DIR/projects/<cwd, "/" → "-">/<session-id>.jsonl`): the meter for sessions whose stdout we do not read (the TUI in tmux) and for
 * `the-loop usage scan`. Mirrors `claude-stream-json.ts`, with the transcript's own quirks (observed
 * with 2.1.197, see test/fixtures/transcripts/claude/):
 * - one `assistant` record per content block, all with the same `message.id` and `requestId`, each
 *   carrying the whole message's final `usage`: usage is counted once per message id;
 * - there is no `result` event: usage comes per model request, not per turn;
 * - tool results are `user` records with `tool_result` blocks (and a `toolUseResult` object);
 * - only the TUI writes `system`/`turn_duration` at the end of a turn, and an Escape leaves a user text
 *   record `[Request interrupted by user…]` (and no `turn_duration`): both are markers, not TurnEvents;
 * - many other record types (`queue-operation`, `attachment`, `last-prompt`, `ai-title`, `mode`,
 *   `permission-mode`, `file-history-snapshot`, `summary`, and newer ones) carry nothing we meter.
 *
 * `mapTranscriptRecord` / `mapTranscriptLine` are pure: the de-duplication state is passed in and the
 * key to add to it is returned. `readTranscriptFrom` (claude-transcript.ts) is the I/O edge.
 */

import { z } from 'zod';
import type { TurnEvent, Usage } from '../../core/events.js';
import { contentBlockOf } from '../protocols/claude-content-block.js';
import { nonNegative, summarize } from '../protocols/protocol.js';

export type TranscriptMarker = 'interrupt' | 'turnEnd';

/** One model request's usage, with the ids a ledger row needs to be idempotent. */
export interface TranscriptRequest {
  /** The de-duplication key: `message.id`, else `requestId`, else the record's `uuid`. */
  key: string;
  messageId?: string | undefined;
  requestId?: string | undefined;
  sessionId?: string | undefined;
  timestamp?: string | undefined;
  model?: string | undefined;
  /** A subagent's request (`isSidechain`): billed like any other, not part of the main conversation. */
  sidechain: boolean;
  usage: Usage;
  /** Cache writes by lifetime, when the record splits them (priced differently). */
  cacheCreation5m?: number | undefined;
  cacheCreation1h?: number | undefined;
  /** Older Claude Code versions wrote their own cost estimate per record (`costUSD`). */
  costUsd?: number | undefined;
}

export interface MappedRecord {
  events: TurnEvent[];
  markers: TranscriptMarker[];
  /** Present when this record's usage is counted: the caller adds `request.key` to its seen set. */
  request?: TranscriptRequest | undefined;
  /** Why the record was not usable (bad JSON, failed schema); never contains the line's content. */
  warning?: string | undefined;
  /** The record's own `uuid` (any type), by which a duplicated record is recognised. */
  uuid?: string | undefined;
  /**
   * A later copy of a request already counted (one is written per content block), with its output
   * count: while the answer streams, early copies can carry a placeholder, so the caller keeps the
   * largest and reports the difference.
   */
  copy?:
    | { key: string; outputTokens: number; model?: string | undefined; at?: string | undefined }
    | undefined;
}

/**
 * The whole text of the record Claude Code writes when a person interrupts a turn. Matched exactly:
 * a prompt (which may carry outside text) that merely starts with it is not an interrupt.
 */
const INTERRUPT = /^\[Request interrupted by user(?: for tool use)?\]$/;

const contentBlock = contentBlockOf(z);
const content = z.union([z.string(), z.array(contentBlock)]).nullish();
// Usage fields are read leniently (nonNegative): an odd value costs that figure, not the record.
const usageSchema = z.record(z.string(), z.unknown()).nullish();
const common = {
  uuid: z.string().optional(),
  sessionId: z.string().optional(),
  timestamp: z.string().optional(),
  isSidechain: z.boolean().nullish(),
};

const schemas = {
  assistant: z.object({
    ...common,
    type: z.literal('assistant'),
    requestId: z.string().optional(),
    isApiErrorMessage: z.boolean().nullish(),
    costUSD: z.number().nullish(),
    message: z.object({
      id: z.string().optional(),
      model: z.string().optional(),
      content,
      usage: usageSchema,
    }),
  }),
  user: z.object({
    ...common,
    type: z.literal('user'),
    toolUseResult: z.unknown().optional(),
    message: z.object({ content }),
  }),
  system: z.object({ ...common, type: z.literal('system'), subtype: z.string().optional() }),
};

export type TranscriptRecord = z.infer<(typeof schemas)[keyof typeof schemas]>;
type AssistantRecord = z.infer<typeof schemas.assistant>;
type ContentBlock = z.infer<typeof contentBlock>;
type UserRecord = z.infer<typeof schemas.user>;

const none = (): MappedRecord => ({ events: [], markers: [] });
const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * A summary that does not keep its source alive: V8 makes a slice of 13+ characters a view into the
 * parent string, so a 2 KB summary of a 50 MB tool output would pin the 50 MB.
 */
const detach = (text: string): string => Buffer.from(text, 'utf8').toString('utf8');

function usageOf(
  raw: Record<string, unknown>,
): Pick<TranscriptRequest, 'usage' | 'cacheCreation5m' | 'cacheCreation1h'> {
  const byTtl = raw.cache_creation;
  const ttl = byTtl && typeof byTtl === 'object' ? (byTtl as Record<string, unknown>) : undefined;
  const usage: Usage = {
    inputTokens: nonNegative(raw.input_tokens),
    outputTokens: nonNegative(raw.output_tokens),
    cacheReadTokens: nonNegative(raw.cache_read_input_tokens),
    cacheCreationTokens: nonNegative(raw.cache_creation_input_tokens),
    reasoningTokens: 0,
  };
  const oneHour = cacheWrite1h(usage.cacheCreationTokens, ttl?.ephemeral_1h_input_tokens);
  if (oneHour > 0) usage.cacheCreation1hTokens = oneHour;
  return {
    usage,
    cacheCreation5m: ttl ? nonNegative(ttl.ephemeral_5m_input_tokens) : undefined,
    cacheCreation1h: ttl ? nonNegative(ttl.ephemeral_1h_input_tokens) : undefined,
  };
}

/**
 * The 1-hour part of a request's cache writes (`usage.cache_creation.ephemeral_1h_input_tokens`),
 * never more than the writes it is part of: a count that says otherwise is held to the total.
 */
export function cacheWrite1h(total: number, oneHour: unknown): number {
  return Math.min(total, nonNegative(oneHour));
}

function mapAssistant(record: AssistantRecord, seen: ReadonlySet<string>): MappedRecord {
  const out = none();
  const { message } = record;
  const sidechain = record.isSidechain === true;
  // Claude Code writes API failures (and a few notices) as `<synthetic>` messages: no request billed.
  const synthetic = message.model === '<synthetic>';
  const apiError = record.isApiErrorMessage === true;
  if (!sidechain) {
    const blocks: ContentBlock[] =
      typeof message.content === 'string'
        ? [{ type: 'text', text: message.content }]
        : (message.content ?? []);
    for (const block of blocks) {
      if (block.type === 'text' && typeof block.text === 'string') {
        if (apiError || (synthetic && block.text.startsWith('API Error'))) {
          out.events.push({ type: 'error', message: summarize(block.text) });
        } else if (!synthetic) out.events.push({ type: 'text', text: block.text });
      } else if (block.type === 'tool_use') {
        out.events.push({
          type: 'tool-use',
          id: str(block.id) ?? '',
          name: str(block.name) ?? 'unknown',
          input: block.input ?? null,
        });
      }
    }
  }
  if (synthetic || !message.usage) return out;
  const key = message.id ?? record.requestId ?? record.uuid;
  if (key === undefined) {
    out.warning = 'assistant record with usage but no message id, request id or uuid: usage not counted';
    return out;
  }
  if (seen.has(key)) {
    out.copy = {
      key,
      outputTokens: usageOf(message.usage).usage.outputTokens,
      model: message.model,
      at: record.timestamp,
    };
    return out;
  }
  const request: TranscriptRequest = {
    key,
    messageId: message.id,
    requestId: record.requestId,
    sessionId: record.sessionId,
    timestamp: record.timestamp,
    model: message.model,
    sidechain,
    ...usageOf(message.usage),
    costUsd: record.costUSD ?? undefined,
  };
  out.request = request;
  out.events.push({
    type: 'usage',
    usage: request.usage,
    model: request.model,
    costUsd: request.costUsd,
    sourceId: request.key,
    at: request.timestamp,
  });
  return out;
}

/** Text of a `toolUseResult`: a string (errors, rejections) or an object with stdout/stderr. */
function toolUseResultText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (!value || typeof value !== 'object') return '';
  const { stdout, stderr } = value as { stdout?: unknown; stderr?: unknown };
  return [stdout, stderr].filter((s): s is string => typeof s === 'string' && s !== '').join('\n');
}

function mapUser(record: UserRecord): MappedRecord {
  const out = none();
  if (record.isSidechain === true) return out;
  const body = record.message.content;
  if (typeof body === 'string') {
    if (INTERRUPT.test(body.trim())) out.markers.push('interrupt');
    return out;
  }
  const interrupted =
    record.toolUseResult !== null &&
    typeof record.toolUseResult === 'object' &&
    (record.toolUseResult as { interrupted?: unknown }).interrupted === true;
  for (const block of body ?? []) {
    if (block.type === 'text' && INTERRUPT.test(block.text?.trim() ?? '')) {
      if (!out.markers.includes('interrupt')) out.markers.push('interrupt');
    } else if (block.type === 'tool_result') {
      let summary = summarize(block.content);
      if (summary === '') summary = summarize(toolUseResultText(record.toolUseResult));
      out.events.push({
        type: 'tool-result',
        id: str(block.tool_use_id) ?? '',
        ok: block.is_error !== true && !interrupted,
        summary: detach(summary),
      });
    }
  }
  return out;
}

/**
 * Map one validated transcript record. `seen` holds the keys of requests already counted; when the
 * result has a `request`, the caller adds `request.key` to it.
 */
export function mapTranscriptRecord(record: TranscriptRecord, seen: ReadonlySet<string>): MappedRecord {
  switch (record.type) {
    case 'assistant':
      return mapAssistant(record, seen);
    case 'user':
      return mapUser(record);
    case 'system':
      return record.subtype === 'turn_duration' && record.isSidechain !== true
        ? { events: [], markers: ['turnEnd'] }
        : none();
  }
}

/**
 * Decode, validate and map one line. Blank lines and records of other types give nothing; a line
 * that is not a JSON object with a string `type`, or fails its type's schema, gives a warning.
 */
export function mapTranscriptLine(line: string, seen: ReadonlySet<string>): MappedRecord {
  if (line.trim() === '') return none();
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { ...none(), warning: 'not JSON' };
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    return { ...none(), warning: 'not a JSON object' };
  }
  const type = (value as { type?: unknown }).type;
  if (typeof type !== 'string') return { ...none(), warning: 'record without a string "type"' };
  const uuid = str((value as { uuid?: unknown }).uuid);
  if (!Object.hasOwn(schemas, type)) return { ...none(), uuid };
  const result = schemas[type as keyof typeof schemas].safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue?.path.length ? issue.path.join('.') : '(root)';
    return { ...none(), uuid, warning: `bad "${type}" record: ${where}: ${issue?.message ?? 'invalid'}` };
  }
  return { ...mapTranscriptRecord(result.data, seen), uuid };
}
