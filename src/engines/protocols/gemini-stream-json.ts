import type { z as Z } from 'zod';
import type { TurnEvent } from '../../core/events.js';
import { lazyFields } from '../../os/lazy-zod.js';
import { decodeLine, nonNegative, type Protocol, summarize } from './protocol.js';

/**
 * Gemini CLI `--output-format stream-json`: `init` (session id, model), `message` (role, content,
 * `delta`), `tool_use`, `tool_result`, `error`, and a final `result` with `stats`.
 */

function buildSchemas(z: typeof Z) {
  return {
    init: z.looseObject({ session_id: z.string().optional(), model: z.string().optional() }),
    message: z.looseObject({ role: z.string().optional(), content: z.unknown().optional() }),
    tool_use: z.looseObject({
      tool_name: z.string().optional(),
      tool_id: z.string().optional(),
      parameters: z.unknown().optional(),
    }),
    tool_result: z.looseObject({
      tool_id: z.string().optional(),
      status: z.string().optional(),
      output: z.unknown().optional(),
      error: z.unknown().optional(),
    }),
    error: z.looseObject({ message: z.string().optional(), severity: z.string().optional() }),
    result: z.looseObject({
      status: z.string().optional(),
      error: z.unknown().optional(),
      stats: z
        .looseObject({
          input_tokens: z.number().optional(),
          input: z.number().optional(),
          output_tokens: z.number().optional(),
          cached: z.number().optional(),
          thoughts_tokens: z.number().optional(),
          total_tokens: z.number().optional(),
          models: z.record(z.string(), z.unknown()).optional(),
        })
        .optional(),
    }),
  } as const;
}

/** Built, and zod loaded, when the first line is decoded. */
const schemas = lazyFields(['init', 'message', 'tool_use', 'tool_result', 'error', 'result'], buildSchemas);

type Decoded = Z.infer<(typeof schemas)[keyof typeof schemas]>;

const errorText = (value: unknown): string =>
  value && typeof value === 'object' && 'message' in value && typeof value.message === 'string'
    ? value.message
    : summarize(value);

type Stats = Z.infer<typeof schemas.result>['stats'];

/** The result's usage, kinds kept disjoint; the models that were used (not the routing call's). */
function usageEvent(stats: Stats): TurnEvent | undefined {
  if (!stats) return undefined;
  const cached = nonNegative(stats.cached);
  const input = nonNegative(stats.input_tokens ?? stats.input);
  // The routing call's model is listed too, often with zero tokens: name only those used.
  const models = Object.entries(stats.models ?? {})
    .filter(([, m]) => !(m && typeof m === 'object' && 'total_tokens' in m && m.total_tokens === 0))
    .map(([name]) => name);
  return {
    type: 'usage',
    usage: {
      // Gemini's prompt token count includes the cached tokens; kinds are kept disjoint.
      inputTokens: Math.max(0, input - cached),
      outputTokens: nonNegative(stats.output_tokens),
      cacheReadTokens: cached,
      cacheCreationTokens: 0,
      // Thinking tokens are only visible as what the total has beyond input and output.
      reasoningTokens:
        stats.thoughts_tokens !== undefined
          ? nonNegative(stats.thoughts_tokens)
          : Math.max(0, nonNegative(stats.total_tokens) - input - nonNegative(stats.output_tokens)),
    },
    model: models.length > 0 ? models.join(',') : undefined,
  };
}

export const geminiStreamJson: Protocol = {
  framing: 'jsonl',
  hasResultEvent: true,
  create() {
    // Assistant text arrives as many `delta` chunks: joined into one text event, flushed when
    // anything else arrives (or at the end).
    let pending = '';
    // A failed result often carries no error of its own; the last error event says why.
    let lastError: string | undefined;
    const flush = (out: TurnEvent[]) => {
      if (pending) out.push({ type: 'text', text: pending });
      pending = '';
    };
    return {
      push(line) {
        const decoded = decodeLine<Decoded>(line, schemas);
        if (!decoded.ok) return decoded.event ? [decoded.event] : [];
        const v = decoded.value as Record<string, unknown>;
        const out: TurnEvent[] = [];
        if (decoded.type === 'message' && v.role === 'assistant' && typeof v.content === 'string') {
          if (v.delta === true) {
            pending += v.content;
            return out;
          }
        }
        flush(out);
        switch (decoded.type) {
          case 'init':
            if (typeof v.session_id === 'string') {
              out.push({
                type: 'session',
                engineSessionId: v.session_id,
                model: typeof v.model === 'string' ? v.model : undefined,
              });
            }
            break;
          case 'message':
            if (v.role === 'assistant' && typeof v.content === 'string')
              out.push({ type: 'text', text: v.content });
            break;
          case 'tool_use':
            out.push({
              type: 'tool-use',
              id: typeof v.tool_id === 'string' ? v.tool_id : '',
              name: typeof v.tool_name === 'string' ? v.tool_name : 'unknown',
              input: v.parameters ?? null,
            });
            break;
          case 'tool_result':
            out.push({
              type: 'tool-result',
              id: typeof v.tool_id === 'string' ? v.tool_id : '',
              ok: v.status === 'success',
              summary: summarize(v.output ?? (v.error === undefined ? '' : errorText(v.error))),
            });
            break;
          case 'error':
            lastError = summarize(typeof v.message === 'string' ? v.message : 'error');
            out.push({ type: 'error', message: lastError });
            break;
          case 'result': {
            const usage = usageEvent((v as Z.infer<typeof schemas.result>).stats);
            if (usage) out.push(usage);
            const ok = v.status === 'success';
            out.push({
              type: 'turn-end',
              ok,
              message: ok
                ? undefined
                : v.error !== undefined
                  ? errorText(v.error)
                  : (lastError ?? `status ${String(v.status ?? 'missing')}`),
            });
            break;
          }
        }
        return out;
      },
      end: () => {
        const out: TurnEvent[] = [];
        flush(out);
        return out;
      },
    };
  },
};
