import type { Usage } from '../../src/core/events.js';

/** A Usage with every kind 0 but those given. */
export const usage = (partial: Partial<Usage>): Usage => ({
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheCreationTokens: 0,
  reasoningTokens: 0,
  ...partial,
});
