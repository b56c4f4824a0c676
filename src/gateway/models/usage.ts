import type { Usage } from '../../core/events.js';
import { nonNegative } from '../../engines/protocols/protocol.js';
import type { ModelApi, WireUsage } from '../types.js';
import { type SseEvent, SseParser } from './sse.js';

/**
 * The `wire` meter: the usage of one model response, read from the response itself as it streams
 * through the gateway. Pure and incremental: `push` each body chunk as it passes, `finish` once at
 * the end (normal or cut). What each vendor reports, and how it maps onto our disjoint `Usage`
 * (the same mapping as the engine protocol parsers, so a wire row equals the engine's own figure):
 *
 * - Anthropic Messages (https://docs.anthropic.com/en/api/messages-streaming): `message_start`
 *   carries `message.id`, `model` and the input-side usage (with a placeholder `output_tokens`);
 *   `message_delta` carries the usage again, cumulative: the last value of each field wins. Kinds
 *   are already disjoint. A non-stream body is the message itself.
 * - OpenAI Responses (https://platform.openai.com/docs/api-reference/responses-streaming):
 *   `response.created` names the response; `response.completed` / `.incomplete` / `.failed` carry
 *   `response.usage`. `input_tokens` includes the cached (read and written) ones and `output_tokens`
 *   the reasoning ones: subtracted, to keep kinds disjoint. A non-stream body is the response.
 * - Gemini (https://ai.google.dev/api/generate-content): every `:streamGenerateContent?alt=sse`
 *   chunk is a GenerateContentResponse (`responseId`, `modelVersion`); `usageMetadata` is
 *   cumulative (the last wins) and complete on the chunk with a `finishReason`.
 *   `cachedContentTokenCount` is part of `promptTokenCount`; thoughts are apart from candidates.
 *
 * A response that ends before its final usage event gives its figures so far, marked `partial`; a
 * response that carries no usage at all (an error body) gives none.
 */

/** Numeric usage fields as the vendor named them, nested ones flattened (`input_tokens_details.cached_tokens`). */
type Counts = Record<string, number>;

interface ReadState {
  responseId: string | null;
  model: string | null;
  counts: Counts;
  /** Any usage figure arrived. */
  seen: boolean;
  /** The vendor's final usage arrived: the figures are complete. */
  final: boolean;
}

interface VendorReader {
  /** Event names that can carry ids or usage; the rest (text deltas) is skipped undecoded. */
  accept?: (eventName: string) => boolean;
  /** Whether a decoded SSE event is worth parsing as JSON. */
  wants(event: SseEvent, state: ReadState): boolean;
  /** One parsed SSE event's data. */
  event(json: unknown, state: ReadState): void;
  /** A whole non-stream JSON body. */
  body(json: unknown, state: ReadState): void;
  toUsage(counts: Counts): Usage;
}

export interface UsageMeter {
  /** One chunk of the response body, as it passed. */
  push(chunk: Buffer): void;
  /** The body ended (or was cut): the usage read, or undefined when the response carried none. */
  finish(at: string): WireUsage | undefined;
  /** Why figures may be missing (an oversized event or body, a body that is not JSON). */
  readonly note: string | undefined;
}

export interface UsageMeterOptions {
  /** The model named by the request (Gemini's path), used when the response names none. */
  modelHint?: string | undefined;
  /** Bound on one SSE event, and on a buffered JSON body (default 16 Mi). */
  maxBytes?: number;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** Merge the numbers of a usage object into `counts` (later values win); true when there were any. */
function mergeCounts(counts: Counts, usage: unknown, prefix = '', depth = 0): boolean {
  if (!isRecord(usage) || depth > 2) return false;
  let any = false;
  for (const [key, value] of Object.entries(usage)) {
    if (typeof value === 'number' && Number.isFinite(value)) {
      counts[prefix + key] = value;
      any = true;
    } else if (isRecord(value) && mergeCounts(counts, value, `${prefix}${key}.`, depth + 1)) any = true;
  }
  return any;
}

const take = (state: ReadState, usage: unknown): void => {
  if (mergeCounts(state.counts, usage)) state.seen = true;
};

const anthropic: VendorReader = {
  accept: (name) => name === '' || name === 'message_start' || name === 'message_delta',
  wants: (e) =>
    e.event === ''
      ? e.data.includes('"message_')
      : e.event === 'message_start' || e.event === 'message_delta',
  event(json, state) {
    if (!isRecord(json)) return;
    if (json.type === 'message_start' && isRecord(json.message)) {
      state.responseId = str(json.message.id) ?? state.responseId;
      state.model = str(json.message.model) ?? state.model;
      take(state, json.message.usage);
    } else if (json.type === 'message_delta' && isRecord(json.usage)) {
      take(state, json.usage);
      state.final = true;
    }
  },
  body(json, state) {
    if (!isRecord(json) || json.type === 'error') return;
    state.responseId = str(json.id) ?? state.responseId;
    state.model = str(json.model) ?? state.model;
    take(state, json.usage);
    state.final = state.seen;
  },
  toUsage: (c) => {
    const usage: Usage = {
      inputTokens: nonNegative(c.input_tokens),
      outputTokens: nonNegative(c.output_tokens),
      cacheReadTokens: nonNegative(c.cache_read_input_tokens),
      cacheCreationTokens: nonNegative(c.cache_creation_input_tokens),
      reasoningTokens: 0,
    };
    // The 1-hour cache writes (billed higher than the 5-minute ones), part of the total, never more.
    const oneHour = Math.min(
      usage.cacheCreationTokens,
      nonNegative(c['cache_creation.ephemeral_1h_input_tokens']),
    );
    if (oneHour > 0) usage.cacheCreation1hTokens = oneHour;
    return usage;
  },
};

const OPENAI_NAMES = new Set(['response.created', 'response.in_progress']);
const OPENAI_FINAL = new Set(['response.completed', 'response.incomplete', 'response.failed']);

const openai: VendorReader = {
  // Without `event:` lines (some compatible servers), the type is only in the data: parse it.
  accept: (name) => name === '' || OPENAI_NAMES.has(name) || OPENAI_FINAL.has(name),
  wants: () => true,
  event(json, state) {
    if (!isRecord(json) || typeof json.type !== 'string' || !isRecord(json.response)) return;
    const r = json.response;
    state.responseId = str(r.id) ?? state.responseId;
    state.model = str(r.model) ?? state.model;
    if (OPENAI_FINAL.has(json.type)) {
      take(state, r.usage);
      state.final = true;
    }
  },
  body(json, state) {
    if (!isRecord(json)) return;
    state.responseId = str(json.id) ?? state.responseId;
    state.model = str(json.model) ?? state.model;
    take(state, json.usage);
    state.final = state.seen;
  },
  toUsage: (c) => {
    // Cached (read and written) tokens are part of input_tokens, reasoning part of output_tokens.
    const cached = nonNegative(c['input_tokens_details.cached_tokens']);
    const written = nonNegative(c['input_tokens_details.cache_write_tokens']);
    const reasoning = nonNegative(c['output_tokens_details.reasoning_tokens']);
    return {
      inputTokens: Math.max(0, nonNegative(c.input_tokens) - cached - written),
      outputTokens: Math.max(0, nonNegative(c.output_tokens) - reasoning),
      cacheReadTokens: cached,
      cacheCreationTokens: written,
      reasoningTokens: reasoning,
    };
  },
};

function geminiChunk(json: unknown, state: ReadState): void {
  if (!isRecord(json)) return;
  state.responseId = str(json.responseId) ?? state.responseId;
  state.model = str(json.modelVersion) ?? state.model;
  take(state, json.usageMetadata);
  const candidates = Array.isArray(json.candidates) ? json.candidates : [];
  const finished = candidates.some((c) => isRecord(c) && str(c.finishReason) !== undefined);
  // A blocked prompt ends the response with usage and no candidates.
  const blocked = isRecord(json.promptFeedback) && str(json.promptFeedback.blockReason) !== undefined;
  if (finished || blocked) state.final = true;
}

const gemini: VendorReader = {
  // Chunks have no event names; text-only chunks between the first and the last are skipped unread.
  wants: (e, state) =>
    state.responseId === null || e.data.includes('"usageMetadata"') || e.data.includes('"finishReason"'),
  event: geminiChunk,
  body(json, state) {
    // `:generateContent` answers one object; `:streamGenerateContent` without alt=sse, an array.
    for (const chunk of Array.isArray(json) ? json : [json]) geminiChunk(chunk, state);
    state.final = state.seen;
  },
  toUsage: (c) => {
    const prompt = nonNegative(c.promptTokenCount);
    const cached = nonNegative(c.cachedContentTokenCount);
    // Tool-use prompt tokens are input the model read, counted apart from the prompt.
    const toolPrompt = nonNegative(c.toolUsePromptTokenCount);
    const output = nonNegative(c.candidatesTokenCount);
    const thoughts =
      c.thoughtsTokenCount !== undefined
        ? nonNegative(c.thoughtsTokenCount)
        : Math.max(0, nonNegative(c.totalTokenCount) - prompt - toolPrompt - output);
    return {
      inputTokens: Math.max(0, prompt - cached) + toolPrompt,
      outputTokens: output,
      cacheReadTokens: cached,
      cacheCreationTokens: 0,
      reasoningTokens: thoughts,
    };
  },
};

const READERS: Record<ModelApi, VendorReader> = { anthropic, openai, gemini };

/** How a response body is framed, from its content type; undefined: it carries no usage we read. */
export function bodyKind(contentType: string | undefined): 'sse' | 'json' | undefined {
  const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  if (type === 'text/event-stream') return 'sse';
  if (type === 'application/json' || type.endsWith('+json')) return 'json';
  return undefined;
}

const DEFAULT_MAX_BYTES = 16 * 1024 * 1024;

/** A meter for one response of `api` whose body is framed as `kind`. */
export function createUsageMeter(
  api: ModelApi,
  kind: 'sse' | 'json',
  options: UsageMeterOptions = {},
): UsageMeter {
  const reader = READERS[api];
  const max = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const state: ReadState = { responseId: null, model: null, counts: {}, seen: false, final: false };
  let note: string | undefined;
  const parseJson = (text: string): unknown => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return undefined;
    }
  };

  const sse =
    kind === 'sse'
      ? new SseParser({
          maxEventBytes: max,
          ...(reader.accept ? { accept: reader.accept } : {}),
          onEvent: (event) => {
            if (reader.wants(event, state)) reader.event(parseJson(event.data), state);
          },
          onOversized: (bytes) => {
            note = `an event of ${bytes} bytes was skipped`;
          },
        })
      : undefined;
  const body: Buffer[] = [];
  let bodyBytes = 0;

  return {
    get note() {
      return note;
    },
    push(chunk) {
      if (sse) {
        sse.push(chunk);
        return;
      }
      if (bodyBytes > max) return;
      bodyBytes += chunk.length;
      if (bodyBytes > max) {
        note = `the body is over ${max} bytes`;
        body.length = 0;
        return;
      }
      body.push(chunk);
    },
    finish(at) {
      if (sse) sse.end();
      else if (bodyBytes <= max && bodyBytes > 0) {
        const json = parseJson(Buffer.concat(body).toString('utf8'));
        if (json === undefined) note = 'the body is not complete JSON';
        else reader.body(json, state);
        body.length = 0;
      }
      if (!state.seen) return undefined;
      return {
        api,
        responseId: state.responseId,
        model: state.model ?? options.modelHint ?? null,
        usage: reader.toUsage(state.counts),
        partial: !state.final,
        at,
      };
    },
  };
}
