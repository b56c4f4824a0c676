import { oneLine, stripControls } from '../core/text.js';
import type { Terminal } from './backend.js';
import { ConnectorError } from './names.js';

/**
 * An agent's target string resolved to one listed terminal (pure). The string is matched, never
 * passed on: a canonical id (`%12`, `kitty:7`) must equal a listed id, a name must equal a listed
 * name exactly (no prefix, no pattern, no case folding, no Unicode normalisation: `loop‐a` with a
 * hyphen look-alike is not `loop-a`). A tmux session name stands for its active pane.
 */

const ID = /^(?:%\d{1,9}|kitty:\d{1,9})$/;

export const quoteName = (text: string): string => JSON.stringify(oneLine(text, 80));

export function resolveTarget(terminals: readonly Terminal[], target: string): Terminal {
  if (ID.test(target)) {
    const byId = terminals.find((t) => t.id === target);
    if (!byId)
      throw new ConnectorError('E_TARGET_NOT_FOUND', `no terminal ${target}: list_terminals shows the ids`);
    return byId;
  }
  const named = terminals.filter((t) => t.name === target);
  if (named.length === 0)
    throw new ConnectorError(
      'E_TARGET_NOT_FOUND',
      `no terminal named ${quoteName(target)} (names match exactly): list_terminals shows them`,
    );
  if (named.length === 1) return named[0] as Terminal;
  const active = named.filter((t) => t.active);
  const backends = new Set(named.map((t) => t.backend));
  // Every pane of a tmux session has its name: the name means the pane a person attaching would see.
  if (backends.size === 1 && named[0]?.backend === 'tmux' && active.length === 1)
    return active[0] as Terminal;
  throw new ConnectorError(
    'E_TARGET_AMBIGUOUS',
    `${named.length} terminals are named ${quoteName(target)}: give one of their ids (${named
      .slice(0, 8)
      .map((t) => t.id)
      .join(', ')})`,
  );
}

/**
 * A terminal's name as grants see it: its characters that would be stripped from a display
 * (controls, escapes, bidi and other invisible marks) spelled out as `\u{…}`. So what a grant matches
 * is what is shown: `\u{2066}loop-zz` does not start with `loop-`, and `loop-a\u{202e}` is not
 * `loop-a`. Names without such characters are unchanged.
 */
export function visibleName(raw: string): string {
  if (stripControls(raw) === raw) return raw;
  let out = '';
  for (const ch of raw)
    out += stripControls(ch) === ch ? ch : `\\u{${(ch.codePointAt(0) ?? 0).toString(16)}}`;
  return out;
}
