import type { TurnEvent } from '../core/events.js';
import { oneLine } from './format.js';

/** Readable progress for one event; untrusted text is flattened to one safe line. */
export function describeEvent(event: TurnEvent): string | null {
  switch (event.type) {
    case 'session':
      return null;
    case 'text':
      return event.text.trim() ? `  │ ${oneLine(event.text, 400)}` : null;
    case 'tool-use':
      return `  ⚙ ${oneLine(event.name, 60)} ${oneLine(JSON.stringify(event.input ?? null), 200)}`;
    case 'tool-result':
      return `  ${event.ok ? '✓' : '✗'} ${oneLine(event.summary, 200) || '(no output)'}`;
    case 'usage':
      return null;
    case 'turn-end':
      return null;
    case 'error':
      return `  ! engine error: ${oneLine(event.message, 400)}`;
    case 'diagnostic':
      return `  ? ${oneLine(event.message, 300)}`;
    case 'tool-refused':
      // The policy hook's refusal shows as the tool's result already.
      if (event.byPolicy) return null;
      return `  ⚠ the engine refused ${oneLine(event.tool, 60)} ${oneLine(JSON.stringify(event.input ?? null), 160)} (its permission mode)`;
    case 'attention':
      return event.waiting
        ? `  ⏸ waiting for a person: ${oneLine(event.message ?? 'a permission prompt', 200)}`
        : '  ▶ going on';
  }
}
