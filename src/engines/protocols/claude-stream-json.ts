import type { z as Z } from 'zod';
import type { TurnEvent } from '../../core/events.js';
import { lazyFields } from '../../os/lazy-zod.js';
import { contentBlockOf } from './claude-content-block.js';
import {
  decodeLine,
  nonNegative,
  type Protocol,
  type ProtocolParser,
  type QuickCheck,
  summarize,
} from './protocol.js';

/**
 * Claude Code `-p --output-format stream-json --verbose`: `system/init`, one `assistant` event per
 * content block (all sharing message.id), `user` events carrying tool results, and a final `result`
 * that alone has the turn's usage and cost. Cursor Agent's stream-json follows the same shapes.
 */

// Strict-enough schemas that keep only the fields we read: validating does not copy the rest of a
// large event (tool lists in system/init, file contents in tool results). Built with the zod given,
// when a line first fails its quick check (below): a turn whose lines all pass never loads zod.
function buildSchemas(z: typeof Z) {
  const contentBlock = contentBlockOf(z);
  const usageSchema = z
    .object({
      input_tokens: z.number().optional(),
      output_tokens: z.number().optional(),
      cache_read_input_tokens: z.number().nullish(),
      cache_creation_input_tokens: z.number().nullish(),
    })
    .nullish();

  return {
    system: z.object({
      type: z.literal('system'),
      subtype: z.string().optional(),
      session_id: z.string().optional(),
      model: z.string().optional(),
    }),
    assistant: z.object({
      type: z.literal('assistant'),
      message: z.object({
        id: z.string().optional(),
        model: z.string().optional(),
        content: z.array(contentBlock).optional(),
      }),
    }),
    user: z.object({
      type: z.literal('user'),
      message: z.object({ content: z.union([z.string(), z.array(contentBlock)]).optional() }),
    }),
    result: z.object({
      type: z.literal('result'),
      subtype: z.string().optional(),
      is_error: z.boolean().optional(),
      result: z.unknown().optional(),
      session_id: z.string().optional(),
      total_cost_usd: z.number().optional(),
      usage: usageSchema,
      modelUsage: z.record(z.string(), z.unknown()).optional(),
      api_error_status: z.unknown().optional(),
      errors: z.array(z.unknown()).optional(),
      // Tool calls the permission mode refused (headless: nobody to ask).
      permission_denials: z.array(z.unknown()).optional(),
    }),
  } as const;
}

const schemas = lazyFields(['system', 'assistant', 'user', 'result'], buildSchemas);
type Decoded = Z.infer<(typeof schemas)[keyof typeof schemas]>;

// The same schemas written out by hand, for the hot path (zod adds about a fifth of JSON.parse
// here). Each check accepts exactly what its schema accepts (test/engines/protocols/
// claude-checks.test.ts compares them on the recordings and on hostile variants); a value a check
// refuses goes to the schema, which decides and words the error. A checked value is used unstripped:
// the code below reads only the schemas' fields.
type Fields = Record<string, unknown>;
const isFields = (v: unknown): v is Fields => typeof v === 'object' && v !== null && !Array.isArray(v);
const optString = (v: unknown) => v === undefined || typeof v === 'string';
// z.number() refuses NaN and ±Infinity (JSON.parse reads 1e999 as Infinity).
const optNumber = (v: unknown) => v === undefined || (typeof v === 'number' && Number.isFinite(v));
const optBoolean = (v: unknown) => v === undefined || typeof v === 'boolean';

function isBlock(v: unknown): boolean {
  return (
    isFields(v) &&
    typeof v.type === 'string' &&
    optString(v.text) &&
    optString(v.id) &&
    optString(v.name) &&
    optString(v.tool_use_id) &&
    (v.is_error === null || optBoolean(v.is_error))
  );
}
const isBlocks = (v: unknown): boolean => Array.isArray(v) && v.every(isBlock);

const isUsage = (v: unknown): boolean =>
  v === undefined ||
  v === null ||
  (isFields(v) &&
    optNumber(v.input_tokens) &&
    optNumber(v.output_tokens) &&
    (v.cache_read_input_tokens === null || optNumber(v.cache_read_input_tokens)) &&
    (v.cache_creation_input_tokens === null || optNumber(v.cache_creation_input_tokens)));

const quickCheck: QuickCheck = (type, e) => {
  switch (type) {
    case 'system':
      return optString(e.subtype) && optString(e.session_id) && optString(e.model);
    case 'assistant': {
      const m = e.message;
      return (
        isFields(m) &&
        optString(m.id) &&
        optString(m.model) &&
        (m.content === undefined || isBlocks(m.content))
      );
    }
    case 'user': {
      const m = e.message;
      return isFields(m) && (m.content === undefined || typeof m.content === 'string' || isBlocks(m.content));
    }
    case 'result':
      return (
        optString(e.subtype) &&
        optBoolean(e.is_error) &&
        optString(e.session_id) &&
        optNumber(e.total_cost_usd) &&
        isUsage(e.usage) &&
        (e.modelUsage === undefined || isFields(e.modelUsage)) &&
        (e.errors === undefined || Array.isArray(e.errors)) &&
        (e.permission_denials === undefined || Array.isArray(e.permission_denials))
      );
    default:
      return false;
  }
};

/** Exported for the test that holds the quick checks to the schemas. */
export { quickCheck as claudeQuickCheck, schemas as claudeEventSchemas };

const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

type Block = Z.infer<ReturnType<typeof contentBlockOf>>;

/** The event of one assistant content block, if it makes one. */
function blockEvent(block: Block, synthetic: boolean): TurnEvent | undefined {
  if (block.type === 'text' && typeof block.text === 'string') {
    // Claude Code reports API failures as a synthetic assistant message ("API Error: ...").
    return synthetic ? { type: 'error', message: summarize(block.text) } : { type: 'text', text: block.text };
  }
  if (block.type === 'tool_use') {
    return {
      type: 'tool-use',
      id: str(block.id) ?? '',
      name: str(block.name) ?? 'unknown',
      input: block.input ?? null,
    };
  }
  return undefined;
}

function assistantEvents(event: Z.infer<typeof schemas.assistant>): TurnEvent[] {
  const blocks = event.message.content ?? [];
  const synthetic = event.message.model === '<synthetic>';
  // Claude Code prints one assistant event per content block: that one is the usual case.
  if (blocks.length === 1) {
    const only = blockEvent(blocks[0] as Block, synthetic);
    return only ? [only] : [];
  }
  const out: TurnEvent[] = [];
  for (const block of blocks) {
    const one = blockEvent(block, synthetic);
    if (one) out.push(one);
  }
  return out;
}

function userEvents(event: Z.infer<typeof schemas.user>): TurnEvent[] {
  const content = event.message.content;
  if (!Array.isArray(content)) return [];
  return content
    .filter((block) => block.type === 'tool_result')
    .map((block) => ({
      type: 'tool-result' as const,
      id: str(block.tool_use_id) ?? '',
      ok: block.is_error !== true,
      summary: summarize(block.content),
    }));
}

/** The models of a result's modelUsage, comma-separated; a "__proto__" key is not one (z.record drops it). */
function modelsOf(modelUsage: Record<string, unknown> | undefined): string | undefined {
  let names: string | undefined;
  for (const key of Object.keys(modelUsage ?? {})) {
    if (key !== '__proto__') names = names === undefined ? key : `${names},${key}`;
  }
  return names;
}

function resultEvents(event: Z.infer<typeof schemas.result>): TurnEvent[] {
  const out: TurnEvent[] = [];
  const denials = event.permission_denials ?? [];
  for (let i = 0; i < denials.length && i < 100; i++) {
    const denial = denials[i];
    const d = denial && typeof denial === 'object' ? (denial as Record<string, unknown>) : {};
    out.push({
      type: 'tool-refused',
      tool: str(d.tool_name) ?? 'unknown',
      id: str(d.tool_use_id),
      input: d.tool_input,
    });
  }
  const usage: TurnEvent | undefined = event.usage
    ? {
        type: 'usage',
        usage: {
          inputTokens: nonNegative(event.usage.input_tokens),
          outputTokens: nonNegative(event.usage.output_tokens),
          cacheReadTokens: nonNegative(event.usage.cache_read_input_tokens),
          cacheCreationTokens: nonNegative(event.usage.cache_creation_input_tokens),
          reasoningTokens: 0,
        },
        model: modelsOf(event.modelUsage),
        costUsd: event.total_cost_usd,
      }
    : undefined;
  const ok = event.is_error !== true && (event.subtype === undefined || event.subtype === 'success');
  let message: string | undefined;
  if (!ok) {
    const detail =
      typeof event.result === 'string' && event.result
        ? event.result
        : summarize(event.errors ?? event.subtype);
    message = summarize(detail);
  }
  const end: TurnEvent = { type: 'turn-end', ok, message, subtype: event.subtype };
  // Arrays of the size they end up (the usual result refuses nothing).
  if (out.length === 0) return usage ? [usage, end] : [end];
  if (usage) out.push(usage);
  out.push(end);
  return out;
}

/**
 * One turn's parser. `quick: false` validates with the schemas alone: the reference the tests hold
 * the quick checks to (the same events for every line).
 */
export function claudeStreamJsonParser(quick = true): ProtocolParser {
  const check = quick ? quickCheck : undefined;
  return {
    push(line) {
      const decoded = decodeLine<Decoded>(line, schemas, check);
      if (!decoded.ok) return decoded.event ? [decoded.event] : [];
      const event = decoded.value;
      switch (event.type) {
        case 'system':
          return event.subtype === 'init' && event.session_id
            ? [{ type: 'session', engineSessionId: event.session_id, model: event.model }]
            : [];
        case 'assistant':
          return assistantEvents(event);
        case 'user':
          return userEvents(event);
        case 'result':
          return resultEvents(event);
      }
    },
    end: () => [],
  };
}

export const claudeStreamJson: Protocol = {
  framing: 'jsonl',
  hasResultEvent: true,
  create: () => claudeStreamJsonParser(),
};
