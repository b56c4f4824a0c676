import type { Protocol } from './protocol.js';

/**
 * Plain text output: every chunk is assistant text. There is no result event and no usage, so the
 * turn ends when the one-shot process exits and it is recorded as unmetered.
 */
export const textProtocol: Protocol = {
  framing: 'text',
  hasResultEvent: false,
  create() {
    return {
      push: (chunk) => (chunk.length > 0 ? [{ type: 'text', text: chunk }] : []),
      end: () => [],
    };
  },
};
