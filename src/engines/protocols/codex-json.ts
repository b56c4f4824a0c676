import type { z as Z } from 'zod';
import type { TurnEvent } from '../../core/events.js';
import { lazyFields } from '../../os/lazy-zod.js';
import { decodeLine, nonNegative, type Protocol, summarize } from './protocol.js';

/**
 * Codex `exec --json`: `thread.started` (the thread id to resume), `turn.started`,
 * `item.started`/`item.updated`/`item.completed` (agent messages, command executions, file changes,
 * MCP tool calls, errors), and `turn.completed` with usage — which on a resumed thread is the
 * thread's running total (the preset says so with `usageScope: thread`) — or `turn.failed`.
 */

function buildSchemas(z: typeof Z) {
  const item = z.looseObject({ id: z.string().optional(), type: z.string() });
  return {
    'thread.started': z.looseObject({ thread_id: z.string() }),
    'item.started': z.looseObject({ item }),
    'item.completed': z.looseObject({ item }),
    'turn.completed': z.looseObject({
      usage: z
        .looseObject({
          input_tokens: z.number().optional(),
          cached_input_tokens: z.number().optional(),
          cache_write_input_tokens: z.number().optional(),
          output_tokens: z.number().optional(),
          reasoning_output_tokens: z.number().optional(),
        })
        .optional(),
    }),
    'turn.failed': z.looseObject({ error: z.looseObject({ message: z.string().optional() }).optional() }),
    error: z.looseObject({ message: z.string().optional() }),
  } as const;
}

/** Built, and zod loaded, when the first line is decoded. */
const schemas = lazyFields(
  ['thread.started', 'item.started', 'item.completed', 'turn.completed', 'turn.failed', 'error'],
  buildSchemas,
);

type Decoded = Z.infer<(typeof schemas)[keyof typeof schemas]>;
type Item = Z.infer<(typeof schemas)['item.started']>['item'];

const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** Item types that are tool calls, with the tool name we record and the fields that are its input. */
const TOOL_ITEMS: Record<string, { name: (i: Item) => string; input: (i: Item) => unknown }> = {
  command_execution: { name: () => 'shell', input: (i) => ({ command: i.command }) },
  file_change: { name: () => 'apply_patch', input: (i) => ({ changes: i.changes }) },
  mcp_tool_call: {
    name: (i) => `mcp:${str(i.server) ?? '?'}/${str(i.tool) ?? '?'}`,
    input: (i) => i.arguments ?? null,
  },
  web_search: { name: () => 'web_search', input: (i) => ({ query: i.query }) },
};

function started(i: Item): TurnEvent[] {
  const tool = Object.hasOwn(TOOL_ITEMS, i.type) ? TOOL_ITEMS[i.type] : undefined;
  return tool ? [{ type: 'tool-use', id: i.id ?? '', name: tool.name(i), input: tool.input(i) }] : [];
}

function completed(i: Item, seen: Set<string>): TurnEvent[] {
  if (i.type === 'agent_message') return typeof i.text === 'string' ? [{ type: 'text', text: i.text }] : [];
  if (i.type === 'error') return [{ type: 'error', message: summarize(i.message) }];
  const tool = Object.hasOwn(TOOL_ITEMS, i.type) ? TOOL_ITEMS[i.type] : undefined;
  if (!tool) return [];
  const id = i.id ?? '';
  const out: TurnEvent[] = seen.has(id) ? [] : started(i);
  const failed =
    i.status === 'failed' ||
    i.status === 'declined' ||
    (typeof i.exit_code === 'number' && i.exit_code !== 0) ||
    i.error;
  out.push({
    type: 'tool-result',
    id,
    ok: !failed,
    summary: summarize(i.aggregated_output ?? i.result ?? i.error ?? i.status ?? ''),
  });
  return out;
}

export const codexJson: Protocol = {
  framing: 'jsonl',
  hasResultEvent: true,
  create() {
    const startedIds = new Set<string>();
    return {
      push(line) {
        const decoded = decodeLine<Decoded>(line, schemas);
        if (!decoded.ok) return decoded.event ? [decoded.event] : [];
        const v = decoded.value as Record<string, never> & Decoded;
        switch (decoded.type) {
          case 'thread.started':
            return [{ type: 'session', engineSessionId: (v as { thread_id: string }).thread_id }];
          case 'item.started': {
            const i = (v as { item: Item }).item;
            if (i.id) startedIds.add(i.id);
            return started(i);
          }
          case 'item.completed':
            return completed((v as { item: Item }).item, startedIds);
          case 'turn.completed': {
            const u = (v as Z.infer<(typeof schemas)['turn.completed']>).usage;
            if (!u) return [{ type: 'turn-end', ok: true }];
            // OpenAI semantics: input_tokens includes the cached (read and written) tokens and
            // output_tokens includes the reasoning ones. Our kinds are disjoint, so subtract.
            const cached = nonNegative(u.cached_input_tokens);
            const written = nonNegative(u.cache_write_input_tokens);
            const reasoning = nonNegative(u.reasoning_output_tokens);
            return [
              {
                type: 'usage',
                usage: {
                  inputTokens: Math.max(0, nonNegative(u.input_tokens) - cached - written),
                  outputTokens: Math.max(0, nonNegative(u.output_tokens) - reasoning),
                  cacheReadTokens: cached,
                  cacheCreationTokens: written,
                  reasoningTokens: reasoning,
                },
              },
              { type: 'turn-end', ok: true },
            ];
          }
          case 'turn.failed':
            return [
              {
                type: 'turn-end',
                ok: false,
                message: summarize(
                  (v as Z.infer<(typeof schemas)['turn.failed']>).error?.message ?? 'turn failed',
                ),
              },
            ];
          case 'error':
            return [{ type: 'error', message: summarize((v as { message?: string }).message ?? 'error') }];
          default:
            return [];
        }
      },
      end: () => [],
    };
  },
};
