import type { z as Z } from 'zod';

/**
 * A content block of a Claude message (stream-json events and transcript records share it), built
 * with the zod given: the stream-json parser builds its schemas only when a line needs them.
 */
export function contentBlockOf(z: typeof Z) {
  return z.object({
    type: z.string(),
    text: z.string().optional(),
    id: z.string().optional(),
    name: z.string().optional(),
    input: z.unknown().optional(),
    tool_use_id: z.string().optional(),
    content: z.unknown().optional(),
    is_error: z.boolean().nullish(),
  });
}
