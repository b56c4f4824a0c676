import { z } from 'zod';
import type { TurnEvent } from '../../core/events.js';
import { decodeLine, nonNegative, type Protocol, summarize } from './protocol.js';

/**
 * Claude Code `-p --output-format stream-json --verbose`: `system/init`, one `assistant` event per
 * content block (all sharing message.id), `user` events carrying tool results, and a final `result`
 * that alone has the turn's usage and cost. Cursor Agent's stream-json follows the same shapes.
 */

// Strict-enough schemas that keep only the fields we read: validating does not copy the rest of a
// large event (tool lists in system/init, file contents in tool results).
/** A content block of a Claude message (stream-json events and transcript records share it). */
export const contentBlock = z.object({
  type: z.string(),
  text: z.string().optional(),
  id: z.string().optional(),
  name: z.string().optional(),
  input: z.unknown().optional(),
  tool_use_id: z.string().optional(),
  content: z.unknown().optional(),
  is_error: z.boolean().nullish(),
});
const usageSchema = z
  .object({
    input_tokens: z.number().optional(),
    output_tokens: z.number().optional(),
    cache_read_input_tokens: z.number().nullish(),
    cache_creation_input_tokens: z.number().nullish(),
  })
  .nullish();

const schemas = {
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
};
type Decoded = z.infer<(typeof schemas)[keyof typeof schemas]>;

const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

function assistantEvents(event: z.infer<typeof schemas.assistant>): TurnEvent[] {
  const out: TurnEvent[] = [];
  const synthetic = event.message.model === '<synthetic>';
  for (const block of event.message.content ?? []) {
    if (block.type === 'text' && typeof block.text === 'string') {
      // Claude Code reports API failures as a synthetic assistant message ("API Error: ...").
      out.push(
        synthetic ? { type: 'error', message: summarize(block.text) } : { type: 'text', text: block.text },
      );
    } else if (block.type === 'tool_use') {
      out.push({
        type: 'tool-use',
        id: str(block.id) ?? '',
        name: str(block.name) ?? 'unknown',
        input: block.input ?? null,
      });
    }
  }
  return out;
}

function userEvents(event: z.infer<typeof schemas.user>): TurnEvent[] {
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

function resultEvents(event: z.infer<typeof schemas.result>): TurnEvent[] {
  const out: TurnEvent[] = [];
  for (const denial of (event.permission_denials ?? []).slice(0, 100)) {
    const d = denial && typeof denial === 'object' ? (denial as Record<string, unknown>) : {};
    out.push({
      type: 'tool-refused',
      tool: str(d.tool_name) ?? 'unknown',
      id: str(d.tool_use_id),
      input: d.tool_input,
    });
  }
  if (event.usage) {
    const models = Object.keys(event.modelUsage ?? {});
    out.push({
      type: 'usage',
      usage: {
        inputTokens: nonNegative(event.usage.input_tokens),
        outputTokens: nonNegative(event.usage.output_tokens),
        cacheReadTokens: nonNegative(event.usage.cache_read_input_tokens),
        cacheCreationTokens: nonNegative(event.usage.cache_creation_input_tokens),
        reasoningTokens: 0,
      },
      model: models.length > 0 ? models.join(',') : undefined,
      costUsd: event.total_cost_usd,
    });
  }
  const ok = event.is_error !== true && (event.subtype === undefined || event.subtype === 'success');
  let message: string | undefined;
  if (!ok) {
    const detail =
      typeof event.result === 'string' && event.result
        ? event.result
        : summarize(event.errors ?? event.subtype);
    message = summarize(detail);
  }
  out.push({ type: 'turn-end', ok, message, subtype: event.subtype });
  return out;
}

export const claudeStreamJson: Protocol = {
  framing: 'jsonl',
  hasResultEvent: true,
  create() {
    return {
      push(line) {
        const decoded = decodeLine<Decoded>(line, schemas);
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
  },
};
